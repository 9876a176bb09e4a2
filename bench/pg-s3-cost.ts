/**
 * What a document and a canonical metadata write cost one svc node on pg-s3 against fs (issue 40),
 * in one run. Two servers side by side, both SVC_DURABILITY=relaxed: one fs node and one pg-s3 node
 * (PostgreSQL of its own with pg_stat_statements preloaded, bench/postgres-server.ts; S3: a
 * single-node radosgw, scripts/ceph/start.sh as bench/pg-s3.ts starts it, else s3rver, said loudly).
 * On each, the same closed loops of CLIENTS clients (bench/documents.ts's requests, one keep-alive
 * connection per client), the sides alternating within each round and the order flipping every
 * round. Before the rounds, each node runs each loop until it has completed the same number of
 * items (--warmup-items; by items, not time, so that the slower pg-s3 node is as warm as fs: V8
 * compiles a function after enough calls, not after enough seconds), then one uncounted round:
 *
 *   document         `POST /v1/documents` with an initialMetadata bundle (a schema registered here),
 *                    `PUT /v1/uploads/{id}/bytes` of 64 KiB fresh random bytes, `POST …/finalize`,
 *                    then one canonical metadata write (`POST /v1/documents/{id}/metadata`) on it;
 *   canonical write  `POST /v1/documents/{id}/metadata` (mode canonical, a new version each),
 *                    round-robin over a pool of documents made first.
 *
 * Per item it reports: the svc process's CPU-ms (all its threads, /proc, over the timed window) and
 * the ratio pg-s3 / fs (target <= 1.5x per document), of the two sides' medians and as the median
 * of each round's pair (measured back to back, so less moved by the host's drift between rounds); PostgreSQL statements (pg_stat_statements of
 * svc's database, every call: BEGIN and COMMIT count; over the whole cell divided by every
 * iteration that completed in it, so background work of the node is included) with the top
 * statements; S3 requests (radosgw's own perf counters through its admin socket: `rgw.req`, every
 * request radosgw served, and of them `rgw.put` and `rgw.get`, over the whole cell; none with s3rver). Counts do not depend on the
 * host's load; CPU-ms do, less than rates (the host's load is printed). And svc's CPU-ms per item
 * by group of threads (main, V8's platform threads, worker threads, libuv's pool: bench/cpu.ts
 * ThreadWindow), to say where pg-s3's extra goes.
 *
 *   npm run bench:pg-s3-cost                   3 counted rounds of 4 s windows
 *   npm run bench:pg-s3-cost -- --quick        1 counted round of 2 s windows
 *   … -- --before=DIR                          also an fs and a pg-s3 node of the build in DIR (a
 *                                              built worktree of an earlier commit), alternating
 *                                              with this build's: same-run A/B, this / before
 *   … -- --profile=DIR                         this build's fs and pg-s3 nodes under --cpu-prof
 *   … -- --warmup-items=N                      documents per node before the rounds (default
 *                                              1500, 200 with --quick; canonical writes 4x that)
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import pg from 'pg';
import { benchArgs } from './args.js';
import { closedLoop, describe, jsonRequest, makeDocumentIteration, type Outcome, REQUEST_TIMEOUT_MS, SCHEMA, TENANT, writeBody } from './documents.js';
import { BUCKET, client as s3ClientOf, deletePrefix, REGION, SCRATCH, type S3Server, startS3 } from './pg-s3.js';
import { type PgServer, requirePostgres } from './postgres-server.js';
import { THREAD_GROUPS, type ThreadGroup, ThreadWindow } from './cpu.js';
import { RawConnection } from './raw-http.js';
import { ServerProcess } from './server-process.js';

const run = promisify(execFile);
const ENTRY = fileURLToPath(new URL('../server/main.js', import.meta.url));
const CLIENTS = 4;
const POOL = 100;
const TOP = 12;
const log = (line: string) => process.stderr.write(`[bench:pg-s3-cost] ${line}\n`);

type Side = 'fs' | 'pg-s3';
type Build = 'this' | 'before';
type Loop = 'document' | 'canonical write';
const LOOPS = ['document', 'canonical write'] as const;

interface Node {
  side: Side;
  build: Build;
  /** `fs`, `pg-s3`; `fs (before)`, `pg-s3 (before)` for the build of --before. */
  label: string;
  server: ServerProcess;
  root: string;
  auth: string;
  /** svc's database (pg-s3 only). */
  database?: string;
  seq: number;
  /** Documents to write to, made before the rounds. */
  pool: string[];
}

interface Cell {
  /** svc CPU-ms per item over the timed window. */
  cpuMs: number;
  perSecond: number;
  /** Items completed over the whole cell (warm-up and drain included). */
  items: number;
  statements: Map<string, number>;
  s3Requests?: S3Counts;
  hostBusyPercent?: number;
  /** svc CPU-ms per item over the timed window, by group of threads (bench/cpu.ts ThreadWindow). */
  threads?: Record<ThreadGroup, number>;
  /** Times svc's main thread woke up per item over the timed window. */
  wakeups?: number;
}

// ---------------------------------------------------------------- counters

/** Statement calls by query text in svc's database, from pg_stat_statements. */
async function statements(db: pg.Client, database: string): Promise<Map<string, number>> {
  const r = await db.query<{ query: string; calls: string }>(
    'SELECT s.query, sum(s.calls)::text AS calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 GROUP BY s.query',
    [database],
  );
  return new Map(r.rows.map((row) => [row.query, Number(row.calls)]));
}

function diff(a: Map<string, number>, b: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [q, n] of b) {
    const d = n - (a.get(q) ?? 0);
    if (d > 0) out.set(q, d);
  }
  return out;
}

/** radosgw's requests: all (`rgw.req`), its GETs and PUTs (`rgw.get`, `rgw.put`); the rest are HEADs, DELETEs, POSTs, listings. */
interface S3Counts {
  req: number;
  get: number;
  put: number;
}

const minus = (a: S3Counts, b: S3Counts): S3Counts => ({ req: a.req - b.req, get: a.get - b.get, put: a.put - b.put });
const plus = (a: S3Counts | undefined, b: S3Counts): S3Counts => (a ? { req: a.req + b.req, get: a.get + b.get, put: a.put + b.put } : b);
const s3Cell = (c: S3Counts | undefined, items: number) =>
  c === undefined ? 'n/a' : `${fmt(c.req / items, 2)} (PUT ${fmt(c.put / items, 2)}, GET ${fmt(c.get / items, 2)}, other ${fmt((c.req - c.put - c.get) / items, 2)})`;

/** radosgw's requests served so far (perf counters `rgw.req`, `rgw.get`, `rgw.put`), through its admin socket; undefined without radosgw. */
async function s3Requests(s3: S3Server): Promise<S3Counts | undefined> {
  if (s3.kind !== 'radosgw') return undefined;
  const conf = s3Conf(s3.pids.radosgw!);
  const { stdout } = await run('ceph', ['-c', conf, 'daemon', 'client.rgw.x', 'perf', 'dump', 'rgw'], { timeout: 30_000 });
  const dump = JSON.parse(stdout) as { rgw?: { req?: number; get?: number; put?: number } };
  const { req, get, put } = dump.rgw ?? {};
  if (typeof req !== 'number' || typeof get !== 'number' || typeof put !== 'number') throw new Error(`radosgw perf dump has no rgw.req, get, put: ${stdout.slice(0, 300)}`);
  return { req, get, put };
}

/** The ceph.conf radosgw was started with (its `-c` argument). */
function s3Conf(pid: number): string {
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0');
  const i = argv.indexOf('-c');
  if (i < 0 || !argv[i + 1]) throw new Error(`radosgw ${pid} was started without -c: ${argv.join(' ')}`);
  return argv[i + 1]!;
}

// ---------------------------------------------------------------- nodes

async function once(port: number, request: Buffer, what: string, expect: number[]) {
  const res = await RawConnection.requestOnce(port, request, REQUEST_TIMEOUT_MS);
  if (!expect.includes(res.status)) throw new Error(`${what} answered ${describe(res)}`);
  return res;
}

async function startNode(side: Side, build: Build, entry: string, pgServer: PgServer, s3: S3Server, profile?: string): Promise<Node> {
  const root = mkdtempSync(path.join(SCRATCH, `svc-bench-cost-${side}-${build}-`));
  let env: NodeJS.ProcessEnv = { SVC_BLOB_BACKEND: 'fs' };
  let database: string | undefined;
  if (side === 'pg-s3') {
    database = `svc_bench_cost_${build}`;
    env = {
      SVC_BLOB_BACKEND: 'pg-s3', SVC_PG_URL: await pgServer.createDatabase(database), SVC_S3_ENDPOINT: s3.endpoint, SVC_S3_BUCKET: BUCKET,
      SVC_S3_PREFIX: `cost-${build}/`, SVC_S3_REGION: REGION, SVC_S3_FORCE_PATH_STYLE: 'true', AWS_ACCESS_KEY_ID: s3.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.secretAccessKey, AWS_REGION: REGION,
    };
  }
  // The main thread's profile of this build's node of each side, written as it stops (fs.cpuprofile, pg-s3.cpuprofile).
  if (profile && build === 'this') env.NODE_OPTIONS = `--cpu-prof --cpu-prof-dir=${path.resolve(profile)} --cpu-prof-name=${side}.cpuprofile`;
  const server = await ServerProcess.start({ entry, fsRoot: root, durability: 'relaxed', env, startTimeoutMs: 60_000 });
  const tokenRes = await once(server.port, jsonRequest('POST', '/dev/token', '', { org_id: TENANT, sub: 'bench', roles: ['clerk'], ttl_seconds: 7200 }), 'POST /dev/token', [200]);
  const token = (JSON.parse(tokenRes.body!.toString('utf8')) as { access_token?: string }).access_token;
  if (typeof token !== 'string') throw new Error(`POST /dev/token answered no access_token`);
  const auth = `Authorization: Bearer ${token}\r\n`;
  await once(server.port, jsonRequest('POST', '/v1/schemas', auth, SCHEMA), 'POST /v1/schemas', [200, 201]);
  return { side, build, label: build === 'this' ? side : `${side} (before)`, server, root, auth, database, seq: 0, pool: [] };
}

/** One document (create, PUT, finalize) and one canonical write on it. */
function documentIteration(node: Node): (conn: RawConnection) => Promise<Outcome> {
  let ids: string[] = [];
  const make = makeDocumentIteration(node.auth, () => node.seq++, (id) => ids.push(id));
  return async (conn) => {
    const made = await make(conn);
    if (!made.ok) return made;
    const id = ids.pop()!;
    if (ids.length > 100) ids = [];
    const res = await conn.request(jsonRequest('POST', `/v1/documents/${id}/metadata`, node.auth, writeBody(node.seq++)), true, REQUEST_TIMEOUT_MS);
    if (res.status !== 201) return { ok: false, step: 'POST …/metadata', detail: describe(res) };
    return { ok: true, steps: [] };
  };
}

function writeIteration(node: Node): (conn: RawConnection) => Promise<Outcome> {
  return async (conn) => {
    const n = node.seq++;
    const res = await conn.request(jsonRequest('POST', `/v1/documents/${node.pool[n % node.pool.length]}/metadata`, node.auth, writeBody(n)), true, REQUEST_TIMEOUT_MS);
    return res.status === 201 ? { ok: true, steps: [] } : { ok: false, step: 'POST …/metadata', detail: describe(res) };
  };
}

async function cell(node: Node, loop: Loop, windowMs: number, db: pg.Client, s3: S3Server): Promise<Cell> {
  const pgSide = node.side === 'pg-s3';
  const st0 = pgSide ? await statements(db, node.database!) : new Map<string, number>();
  const rq0 = pgSide ? await s3Requests(s3) : undefined;
  let items = 0;
  let threadWindow: ThreadWindow | undefined;
  let threads: ReturnType<ThreadWindow['end']> | undefined;
  const inner = loop === 'document' ? documentIteration(node) : writeIteration(node);
  const r = await closedLoop({
    port: node.server.port, server: node.server, connections: CLIENTS, warmupMs: 300, durationMs: windowMs, stepNames: [],
    window: { begin: () => (threadWindow = new ThreadWindow(node.server.pid)), end: () => (threads = threadWindow?.end()) },
    iteration: async (conn) => {
      const o = await inner(conn);
      if (o.ok) items++;
      return o;
    },
  });
  if (r.errors > 0) throw new Error(`${node.label} ${loop}: ${r.errors} errors, first: ${r.firstError}`);
  const st1 = pgSide ? await statements(db, node.database!) : new Map<string, number>();
  const rq1 = pgSide ? await s3Requests(s3) : undefined;
  return {
    cpuMs: r.serverCpuMsPerItem ?? NaN, perSecond: r.perSecond, items, statements: diff(st0, st1),
    s3Requests: rq0 === undefined || rq1 === undefined ? undefined : minus(rq1, rq0), hostBusyPercent: r.cpu.hostBusyPercent,
    threads: threads && r.completed > 0 ? perItem(threads.seconds, r.completed) : undefined,
    wakeups: threads && r.completed > 0 ? threads.mainWakeups / r.completed : undefined,
  };
}

/** Runs `loop` on `node` with CLIENTS connections until `items` have completed; nothing is measured. */
async function warmUp(node: Node, loop: Loop, items: number): Promise<void> {
  const inner = loop === 'document' ? documentIteration(node) : writeIteration(node);
  let started = 0;
  const client = async (): Promise<void> => {
    const conn = await RawConnection.connect(node.server.port);
    try {
      while (started < items) {
        started++;
        const o = await inner(conn);
        if (!o.ok) throw new Error(`${node.label} ${loop} warm-up: ${o.step}: ${o.detail}`);
      }
    } finally {
      conn.close();
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
}

const perItem = (seconds: Record<ThreadGroup, number>, items: number) =>
  Object.fromEntries(THREAD_GROUPS.map((g) => [g, (seconds[g] * 1000) / items])) as Record<ThreadGroup, number>;

// ---------------------------------------------------------------- report

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (x: number, d = 2) => (Number.isFinite(x) ? x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d }) : 'n/a');
const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

function merged(cells: Cell[]): { items: number; statements: Map<string, number>; s3?: S3Counts } {
  const statements = new Map<string, number>();
  let items = 0;
  let s3: S3Counts | undefined;
  for (const c of cells) {
    items += c.items;
    for (const [q, n] of c.statements) statements.set(q, (statements.get(q) ?? 0) + n);
    if (c.s3Requests !== undefined) s3 = plus(s3, c.s3Requests);
  }
  return { items, statements, s3 };
}

function row(loop: Loop, f: Cell[], p: Cell[], build: string): string {
  const fm = median(f.map((c) => c.cpuMs));
  const pm = median(p.map((c) => c.cpuMs));
  const m = merged(p);
  const target = loop === 'document' ? ` (target <= 1.5x: ${pm / fm <= 1.5 ? 'PASS' : 'FAIL'})` : '';
  // Each round's pair (the two sides measured back to back): less moved by the host's drift between rounds.
  const paired = p.map((c, i) => c.cpuMs / f[i]!.cpuMs);
  return `| ${loop}${build} | ${fmt(fm, 3)} [${f.map((c) => fmt(c.cpuMs, 3)).join(', ')}] | ${fmt(pm, 3)} [${p.map((c) => fmt(c.cpuMs, 3)).join(', ')}] | ${fmt(pm / fm, 2)}x${target} | ${fmt(median(paired), 2)}x [${paired.map((x) => fmt(x, 2)).join(', ')}] | ${fmt(median(f.map((c) => c.perSecond)), 0)} / ${fmt(median(p.map((c) => c.perSecond)), 0)} | ${fmt(sum(m.statements) / m.items, 2)} | ${s3Cell(m.s3, m.items)} | ${p.map((c) => fmt(c.hostBusyPercent ?? NaN, 0)).join(', ')} |`;
}

function topStatements(label: string, loop: Loop, cells: Cell[]): string[] {
  const m = merged(cells);
  const out = ['', `PostgreSQL statements per ${loop} on ${label} (pg_stat_statements, the top ${TOP}; ${m.items} items over the counted cells):`, '', '| per item | statement |', '|---|---|'];
  const top = [...m.statements].sort((a, b) => b[1] - a[1]).slice(0, TOP);
  for (const [q, n] of top) out.push(`| ${fmt(n / m.items, 2)} | \`${q.replace(/\s+/g, ' ').replaceAll('|', '\\|').replaceAll('`', "'").slice(0, 160)}\` |`);
  return out;
}

type Cells = Map<string, Record<Loop, Cell[]>>;

function render(cells: Cells, s3: S3Server, rounds: number, windowMs: number, warmupItems: number, minutes: number, before: string | undefined): string {
  const out = [
    `## svc per document and per canonical write, pg-s3 against fs (${new Date().toISOString()}, ${s3.kind}${s3.kind === 's3rver' ? ' -- FALLBACK, NOT radosgw: no S3 request count' : ''}, ${CLIENTS} clients, ${rounds} rounds of ${windowMs / 1000} s windows after a warm-up of ${warmupItems} documents and ${warmupItems * 4} canonical writes per node and one uncounted round, ${os.cpus().length} CPUs, load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}, ${fmt(minutes, 1)} min${before ? `; before = ${before}` : ''})`,
    '',
    '| Item | svc CPU-ms fs, median [rounds] | svc CPU-ms pg-s3, median [rounds] | pg-s3 / fs (of the medians) | pg-s3 / fs per round, median [rounds] | items/s fs / pg-s3 | PostgreSQL statements | S3 requests | host busy % (pg-s3 windows) |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const loop of LOOPS) {
    out.push(row(loop, cells.get('fs')![loop], cells.get('pg-s3')![loop], ''));
    if (before) out.push(row(loop, cells.get('fs (before)')![loop], cells.get('pg-s3 (before)')![loop], ' (before)'));
  }
  if (before) {
    // Same run, alternating order: this build's CPU per item over the build before's, each round's ratio.
    out.push('', 'This build against the build before, same run (svc CPU-ms per item, this / before, each round; median):', '', '| Item | fs | pg-s3 |', '|---|---|---|');
    for (const loop of LOOPS) {
      const ratios = (side: Side) => cells.get(side)![loop].map((c, i) => c.cpuMs / cells.get(`${side} (before)`)![loop][i]!.cpuMs);
      const cell = (side: Side) => `${fmt(median(ratios(side)), 3)}x [${ratios(side).map((x) => fmt(x, 3)).join(', ')}]`;
      out.push(`| ${loop} | ${cell('fs')} | ${cell('pg-s3')} |`);
    }
  }
  out.push('', 'svc CPU-ms per item by thread (/proc/<pid>/task, over the timed windows; median of the rounds, each group on its own, so the groups need not add up to the total), and the times its main thread woke up per item:', '',
    `| Node, item | ${THREAD_GROUPS.join(' | ')} | main thread wake-ups |`, `|---|${THREAD_GROUPS.map(() => '---').join('|')}|---|`);
  for (const loop of LOOPS) {
    for (const label of cells.keys()) {
      const split = cells.get(label)![loop].flatMap((c) => (c.threads ? [c.threads] : []));
      const wakeups = cells.get(label)![loop].flatMap((c) => (c.wakeups !== undefined ? [c.wakeups] : []));
      if (split.length > 0) out.push(`| ${label}, ${loop} | ${THREAD_GROUPS.map((g) => fmt(median(split.map((t) => t[g])), 3)).join(' | ')} | ${wakeups.length ? fmt(median(wakeups), 1) : 'n/a'} |`);
    }
  }
  for (const loop of LOOPS) {
    out.push(...topStatements('pg-s3', loop, cells.get('pg-s3')![loop]));
    if (before) out.push(...topStatements('pg-s3 (before)', loop, cells.get('pg-s3 (before)')![loop]));
  }
  out.push('', 'A document = create with initialMetadata + PUT of 64 KiB + finalize + one canonical write. svc CPU-ms: the svc process (all threads, /proc) over the timed window / items completed in it. Statements and S3 requests: over each whole cell (warm-up and drain included, background work of the node too) / items completed in it. S3 requests: radosgw\'s perf counters `rgw.req` (every request it served), `rgw.put`, `rgw.get`; other = HEAD, DELETE, POST, listings.', '');
  return out.join('\n');
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const args = benchArgs({
    usage: 'usage: node dist/bench/pg-s3-cost.js [--quick] [--rounds=N] [--window-ms=MS] [--warmup-items=N] [--before=DIR] [--profile=DIR]',
    options: {
      quick: { type: 'boolean', help: '1 counted round of 2 s windows' },
      rounds: { type: 'string', value: 'N', help: 'counted rounds (default 3, 1 with --quick)' },
      'window-ms': { type: 'string', value: 'MS', help: 'each timed window (default 4000, 2000 with --quick)' },
      'warmup-items': { type: 'string', value: 'N', help: 'documents each node completes before the rounds (default 1500, 200 with --quick), canonical writes 4x that' },
      before: { type: 'string', value: 'DIR', help: 'also the build of DIR (a built worktree of an earlier commit): an fs and a pg-s3 node of each build, same run' },
      profile: { type: 'string', value: 'DIR', help: 'this build\'s fs and pg-s3 svc processes run with --cpu-prof into DIR (fs.cpuprofile, pg-s3.cpuprofile, written as they stop)' },
    },
  });
  const rounds = args.number('rounds') ?? (args.values.quick ? 1 : 3);
  const windowMs = args.number('window-ms', { min: 200 }) ?? (args.values.quick ? 2000 : 4000);
  const warmupItems = args.number('warmup-items', { min: 0 }) ?? (args.values.quick ? 200 : 1500);
  const t0 = performance.now();
  let pgServer: PgServer | undefined;
  let s3: S3Server | undefined;
  const nodes: Node[] = [];
  let db: pg.Client | undefined;
  const cleanup = async () => {
    await db?.end().catch(() => {});
    for (const n of nodes) {
      await n.server.stop().catch(() => {});
      rmSync(n.root, { recursive: true, force: true });
    }
    await s3?.stop().catch((err: Error) => log(`S3 stop: ${err.message}`));
    await pgServer?.stop().catch((err: Error) => log(`PostgreSQL stop: ${err.message}`));
  };
  const onSignal = () => void cleanup().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    [pgServer, s3] = await Promise.all([requirePostgres(), startS3(1024 * 1024 * 1024)]);
    log(`PostgreSQL pid ${pgServer.pid} on ${pgServer.port}; ${s3.kind} at ${s3.endpoint}`);
    const c = s3ClientOf(s3);
    await c.send(new CreateBucketCommand({ Bucket: BUCKET }));
    db = new pg.Client({ connectionString: pgServer.url });
    await db.connect();
    await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const before = args.values.before;
    const builds: Array<[Build, string]> = [['this', ENTRY], ...(before ? [['before', path.resolve(before, 'dist', 'server', 'main.js')] as [Build, string]] : [])];
    for (const [build, entry] of builds) for (const side of ['fs', 'pg-s3'] as const) nodes.push(await startNode(side, build, entry, pgServer, s3, args.values.profile));
    for (const node of nodes) {
      log(`${node.label}: a pool of ${POOL} documents`);
      const conn = await RawConnection.connect(node.server.port);
      try {
        const make = makeDocumentIteration(node.auth, () => node.seq++, (id) => node.pool.push(id));
        while (node.pool.length < POOL) {
          const o = await make(conn);
          if (!o.ok) throw new Error(`${node.label}: creating the pool: ${o.step}: ${o.detail}`);
        }
      } finally {
        conn.close();
      }
    }
    for (const node of nodes) {
      const w0 = performance.now();
      await warmUp(node, 'document', warmupItems);
      await warmUp(node, 'canonical write', warmupItems * 4);
      log(`${node.label}: warmed up by ${warmupItems} documents and ${warmupItems * 4} canonical writes in ${fmt((performance.now() - w0) / 1000, 1)} s`);
    }
    const cells: Cells = new Map(nodes.map((n) => [n.label, { document: [], 'canonical write': [] }]));
    for (let round = 0; round <= rounds; round++) {
      const order = round % 2 === 0 ? nodes : [...nodes].reverse();
      for (const loop of LOOPS) {
        for (const node of order) {
          const r = await cell(node, loop, windowMs, db, s3);
          if (round > 0) cells.get(node.label)![loop].push(r);
          log(`round ${round}${round > 0 ? '' : ' (uncounted)'} ${node.label} ${loop}: ${fmt(r.cpuMs, 3)} CPU-ms, ${fmt(r.perSecond, 0)}/s${node.side === 'pg-s3' ? `, ${fmt(sum(r.statements) / r.items)} statements, ${s3Cell(r.s3Requests, r.items)} S3 requests` : ''} per item`);
        }
      }
    }
    for (const n of nodes) {
      const problems = n.server.problems.filter((p) => !/NodeVersionSupportWarning|versions published after|node >=22|security updates|a\.co\/|trace-warnings|^\s*$/.test(p));
      if (problems.length > 0) log(`svc (${n.label}) logged: ${problems.slice(0, 3).join(' | ')}`);
    }
    process.stdout.write(render(cells, s3, rounds, windowMs, warmupItems, (performance.now() - t0) / 60000, before));
    for (const [build] of builds) await deletePrefix(c, `cost-${build}/`).catch(() => {});
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
