/**
 * Bulk migration (`POST /v1/migrations/apply`, docs/documents.md "Derived metadata, migrations
 * and jobs") against single migrations (`POST /v1/documents/{id}/migrate`), on fs:
 *
 * A fresh server per round (SVC_BLOB_BACKEND=fs, SVC_DURABILITY=relaxed) with the schemas
 * urn:svc:schema:case@1.0.0 {caseNumber, court} and @2.0.0 {number, court} and the migration
 * 1→2 (forward `move /caseNumber → /number`, inverse back), as test/bulk-migration.test.ts has
 * them. Before each cell N documents are made on 1.0.0 over HTTP (create with the entry + 16 B +
 * finalize, 16 clients; not measured), so each cell has exactly its N documents on the source
 * schema. The cells, in this order in even rounds and reversed in odd ones:
 *
 * - bulk: one `POST /v1/migrations/apply {fromSchemaUrn, toSchemaUrn, reason}`, then
 *   `GET /v1/jobs/{id}?wait=30` until the job has ended; the time from the POST to the answer
 *   that says completed, with `outputs.migration.migrated === N` checked.
 * - single ×8 and single ×1: each document `POST …/migrate {namespaceUrn, toSchemaUrn, reason}`
 *   then `GET /v1/jobs/{id}?wait=30` until completed, by 8 (then 1) clients on their own
 *   keep-alive connections; the time from the first POST to the last completed job.
 *
 * Documents per second for each, the server's CPU per migrated document (all threads,
 * /proc/<pid>/stat utime+stime at the cell's edges), the bench client's, other processes' share
 * of the host (/proc/stat; near 0 on a quiet host), and bulk / single per round; the report
 * gives the medians of the rounds. Each server first runs an uncounted
 * warm-up: 64 documents bulk-migrated and 64 migrated one by one.
 *
 *   npm run bench:bulk-migration                  2,000 documents per cell, 3 rounds (~3 min)
 *   … -- --quick                                  300 documents per cell
 *   … -- --documents=N --rounds=R                 other sizes
 *
 * Prints a Markdown report on stdout and writes bench/results/bulk-migration-<time>.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './args.js';
import { CpuWindow } from './cpu.js';
import { REQUEST_TIMEOUT_MS, describe, jsonRequest } from './documents.js';
import { type LatencySummary, summarize } from './load.js';
import { expectStatus, parseJson } from './json-call.js';
import { RawConnection } from './raw-http.js';
import { f, machineEnvironment, median } from './report.js';
import { ServerProcess } from './server-process.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENTRY = path.join(REPO, 'dist', 'server', 'main.js');
const args = benchArgs({
  usage: 'usage: node dist/bench/bulk-migration.js [--quick] [--documents=N] [--rounds=R]',
  options: {
    quick: { type: 'boolean', help: '300 documents per cell instead of 2,000' },
    documents: { type: 'string', value: 'N', help: 'documents per cell (default 2,000; 300 with --quick)' },
    rounds: { type: 'string', value: 'R', default: '3', help: 'rounds' },
  },
});
const quick = args.values.quick;
const DOCUMENTS = args.number('documents') ?? (quick ? 300 : 2000);
const ROUNDS = args.number('rounds');
const SEED_CLIENTS = 16;
const SINGLE_CLIENTS = [8, 1] as const;
const WARMUP_DOCUMENTS = 64;
const WAIT_S = 30;

const CASE = 'urn:svc:case';
const V1 = 'urn:svc:schema:case@1.0.0';
const V2 = 'urn:svc:schema:case@2.0.0';
const SCHEMAS = [
  { schemaUrn: V1, namespaceUrn: CASE, lifecycle: 'published', jsonSchema: { type: 'object', required: ['caseNumber'], additionalProperties: false, properties: { caseNumber: { type: 'string' }, court: { type: 'string' } } } },
  { schemaUrn: V2, namespaceUrn: CASE, lifecycle: 'published', jsonSchema: { type: 'object', required: ['number'], additionalProperties: false, properties: { number: { type: 'string' }, court: { type: 'string' } } } },
];
const MIGRATION = {
  fromSchemaUrn: V1, toSchemaUrn: V2,
  forward: { type: 'jsonpatch', ops: [{ op: 'move', from: '/caseNumber', path: '/number' }] },
  inverse: { type: 'jsonpatch', ops: [{ op: 'move', from: '/number', path: '/caseNumber' }] },
};

const log = (m: string) => process.stderr.write(`[bulk-migration] ${m}\n`);

interface JobView {
  jobId: string;
  state: string;
  error: unknown;
  progress?: { done: number; total: number };
  outputs?: { migration?: { migrated: number; skipped: number; failed: number; failures: unknown[] } };
}

async function request(conn: RawConnection, method: string, target: string, auth: string, body?: unknown): Promise<{ status: number; json: any; text: string }> {
  const bytes = body === undefined ? `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Length: 0\r\n\r\n` : jsonRequest(method, target, auth, body);
  const res = await conn.request(bytes, true, (WAIT_S + 10) * 1000);
  const text = res.body?.toString('utf8') ?? '';
  return { status: res.status, json: parseJson(text), text };
}

/** GET /v1/jobs/{id}?wait=30 until the job has ended. */
async function settle(conn: RawConnection, auth: string, jobId: string): Promise<JobView> {
  for (;;) {
    const job = expectStatus(await request(conn, 'GET', `/v1/jobs/${jobId}?wait=${WAIT_S}`, auth), 'GET /v1/jobs/{id}', 200).json as JobView;
    if (job.state !== 'pending' && job.state !== 'running') return job;
  }
}

interface Server {
  server: ServerProcess;
  root: string;
  port: number;
  auth: string;
  /** Documents made so far on this server (case numbers stay unique). */
  made: number;
}

async function startServer(): Promise<Server> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-bulk-'));
  const server = await ServerProcess.start({ entry: ENTRY, fsRoot: root, durability: 'relaxed', env: { SVC_BLOB_BACKEND: 'fs', SVC_LOG_LEVEL: 'warn' } });
  const conn = await RawConnection.connect(server.port);
  try {
    const t = expectStatus(await request(conn, 'POST', '/dev/token', '', { org_id: 'bench', sub: 'bench', ttl_seconds: 3600 }), 'POST /dev/token', 200);
    const auth = `Authorization: Bearer ${t.json.access_token as string}\r\n`;
    for (const s of SCHEMAS) expectStatus(await request(conn, 'POST', '/v1/schemas', auth, s), 'POST /v1/schemas', 201);
    expectStatus(await request(conn, 'POST', '/v1/migrations', auth, MIGRATION), 'POST /v1/migrations', 201);
    return { server, root, port: server.port, auth, made: 0 };
  } finally {
    conn.close();
  }
}

async function stopServer(s: Server): Promise<string[]> {
  await s.server.stop();
  rmSync(s.root, { recursive: true, force: true });
  return s.server.problems;
}

/** `count` new documents on V1 (court alternating Oslo/Bergen), SEED_CLIENTS at a time; their ids. */
async function seed(s: Server, count: number): Promise<string[]> {
  const from = s.made;
  const to = from + count;
  s.made = to;
  let next = from;
  const ids: string[] = [];
  const tiny = Buffer.from('0123456789abcdef');
  await Promise.all(
    Array.from({ length: Math.min(SEED_CLIENTS, count) }, async () => {
      const conn = await RawConnection.connect(s.port);
      try {
        for (let n = next++; n < to; n = next++) {
          const data = { caseNumber: `C-${n}`, court: n % 2 === 0 ? 'Oslo' : 'Bergen' };
          const created = await conn.request(jsonRequest('POST', '/v1/documents', s.auth, { initialMetadata: { namespaces: { [CASE]: { schema: V1, data } } } }), true, REQUEST_TIMEOUT_MS);
          if (created.status !== 201) throw new Error(`POST /v1/documents: ${describe(created)}`);
          const { uploadId, documentId } = JSON.parse(created.body!.toString('utf8')) as { uploadId: string; documentId: string };
          const put = await conn.request(Buffer.concat([Buffer.from(`PUT /v1/uploads/${uploadId}/bytes HTTP/1.1\r\nHost: 127.0.0.1\r\n${s.auth}Content-Type: application/octet-stream\r\nContent-Length: ${tiny.length}\r\n\r\n`, 'latin1'), tiny]), false, REQUEST_TIMEOUT_MS);
          if (put.status !== 204) throw new Error(`PUT bytes: ${describe(put)}`);
          const fin = await conn.request(jsonRequest('POST', `/v1/uploads/${uploadId}/finalize`, s.auth, { reason: 'bench' }), true, REQUEST_TIMEOUT_MS);
          if (fin.status !== 201) throw new Error(`finalize: ${describe(fin)}`);
          ids.push(documentId);
        }
      } finally {
        conn.close();
      }
    }),
  );
  return ids;
}

type CellName = 'bulk' | 'single ×8' | 'single ×1';

interface Cell {
  round: number;
  cell: CellName;
  documents: number;
  seconds: number;
  perSecond: number;
  /** Server CPU (all threads) per migrated document, ms. */
  serverCpuMs?: number;
  /** The bench client's CPU per migrated document, ms. */
  clientCpuMs: number;
  /** CPU of other processes on the host during the cell, % of one core (a quiet host: near 0). */
  otherPercent?: number;
  /** single: POST …/migrate to the completed job, per document. */
  latency?: LatencySummary;
  /** bulk: the job's tally. */
  tally?: { migrated: number; skipped: number; failed: number };
}

/** Runs `work` and measures wall time and CPU (server and client) around it. */
async function measured<T>(s: Server, work: () => Promise<T>): Promise<{ value: T; seconds: number; serverCpuS?: number; clientCpuS: number; otherPercent?: number }> {
  const host = new CpuWindow(s.server.pid);
  const server0 = s.server.cpuSeconds();
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await work();
  const seconds = (performance.now() - t0) / 1000;
  const server1 = s.server.cpuSeconds();
  const client = process.cpuUsage(client0);
  const { otherPercent } = host.end();
  return { value, otherPercent, seconds, serverCpuS: server0 !== undefined && server1 !== undefined ? server1 - server0 : undefined, clientCpuS: (client.user + client.system) / 1e6 };
}

async function bulk(s: Server, expected: number): Promise<{ seconds: number; serverCpuS?: number; clientCpuS: number; otherPercent?: number; job: JobView }> {
  const conn = await RawConnection.connect(s.port);
  try {
    const m = await measured(s, async () => {
      const applied = expectStatus(await request(conn, 'POST', '/v1/migrations/apply', s.auth, { fromSchemaUrn: V1, toSchemaUrn: V2, reason: 'bench: bulk' }), 'POST /v1/migrations/apply', 202);
      return settle(conn, s.auth, applied.json.jobId as string);
    });
    const job = m.value;
    const tally = job.outputs?.migration;
    if (job.state !== 'completed' || !tally || tally.migrated !== expected || tally.failed !== 0) {
      throw new Error(`bulk migration of ${expected} documents: ${JSON.stringify({ state: job.state, error: job.error, progress: job.progress, tally })}`);
    }
    return { ...m, job };
  } finally {
    conn.close();
  }
}

async function singles(s: Server, ids: string[], clients: number): Promise<{ seconds: number; serverCpuS?: number; clientCpuS: number; otherPercent?: number; latencies: number[] }> {
  const conns = await Promise.all(Array.from({ length: clients }, () => RawConnection.connect(s.port)));
  try {
    const latencies: number[] = [];
    let next = 0;
    const m = await measured(s, () =>
      Promise.all(
        conns.map(async (conn) => {
          for (let i = next++; i < ids.length; i = next++) {
            const a = performance.now();
            const r = expectStatus(await request(conn, 'POST', `/v1/documents/${ids[i]}/migrate`, s.auth, { namespaceUrn: CASE, toSchemaUrn: V2, reason: 'bench: single' }), 'POST …/migrate', 202);
            const job = await settle(conn, s.auth, r.json.jobId as string);
            if (job.state !== 'completed') throw new Error(`migrating ${ids[i]}: job ${job.jobId} ${job.state}: ${JSON.stringify(job.error)}`);
            latencies.push(performance.now() - a);
          }
        }),
      ),
    );
    return { seconds: m.seconds, serverCpuS: m.serverCpuS, clientCpuS: m.clientCpuS, otherPercent: m.otherPercent, latencies };
  } finally {
    for (const c of conns) c.close();
  }
}

/** Outside the measurement: a spread of `ids` (up to 16) is on V2 with two versions, as a migration leaves it. */
async function check(s: Server, ids: string[], what: string): Promise<void> {
  const conn = await RawConnection.connect(s.port);
  try {
    const step = Math.max(1, Math.floor(ids.length / 16));
    for (let i = 0; i < ids.length; i += step) {
      const m = expectStatus(await request(conn, 'GET', `/v1/documents/${ids[i]}/metadata/${encodeURIComponent(CASE)}`, s.auth), 'GET …/metadata/{ns}', 200).json;
      const v = expectStatus(await request(conn, 'GET', `/v1/documents/${ids[i]}/versions`, s.auth), 'GET …/versions', 200).json;
      if (m.entry?.schema !== V2 || typeof m.entry?.data?.number !== 'string' || v.versions?.length !== 2) {
        throw new Error(`${what}: document ${ids[i]} after the migration: entry ${JSON.stringify(m.entry)}, ${v.versions?.length} versions`);
      }
    }
  } finally {
    conn.close();
  }
}

async function runCell(s: Server, round: number, cell: CellName): Promise<Cell> {
  const ids = await seed(s, DOCUMENTS);
  let r: { seconds: number; serverCpuS?: number; clientCpuS: number; otherPercent?: number };
  let extra: Partial<Cell> = {};
  if (cell === 'bulk') {
    const b = await bulk(s, DOCUMENTS);
    r = b;
    const t = b.job.outputs!.migration!;
    extra = { tally: { migrated: t.migrated, skipped: t.skipped, failed: t.failed } };
  } else {
    const one = await singles(s, ids, cell === 'single ×8' ? 8 : 1);
    r = one;
    extra = { latency: summarize(one.latencies) };
  }
  await check(s, ids, `round ${round}, ${cell}`);
  const out: Cell = {
    round, cell, documents: DOCUMENTS, seconds: r.seconds, perSecond: DOCUMENTS / r.seconds,
    serverCpuMs: r.serverCpuS === undefined ? undefined : (r.serverCpuS * 1000) / DOCUMENTS, clientCpuMs: (r.clientCpuS * 1000) / DOCUMENTS, otherPercent: r.otherPercent, ...extra,
  };
  log(`round ${round}, ${cell}: ${f(out.perSecond)} documents/s (${f(out.seconds, 2)} s), server ${f(out.serverCpuMs, 3)} CPU-ms per document, other processes ${f(out.otherPercent)}%${out.latency ? `, p50 ${f(out.latency.p50Ms, 2)} ms, p99 ${f(out.latency.p99Ms, 2)} ms` : ''}`);
  return out;
}

async function warmUp(s: Server): Promise<void> {
  await seed(s, WARMUP_DOCUMENTS);
  await bulk(s, WARMUP_DOCUMENTS);
  await singles(s, await seed(s, WARMUP_DOCUMENTS), 8);
}

// ---------------------------------------------------------------- report

const ORDER: CellName[] = ['bulk', 'single ×8', 'single ×1'];

function render(r: { environment: ReturnType<typeof machineEnvironment>; cells: Cell[]; problems: string[]; startedAt: string; finishedAt: string }): string {
  const env = r.environment;
  const of = (name: CellName) => r.cells.filter((c) => c.cell === name);
  const byRound = (name: CellName, round: number) => r.cells.find((c) => c.cell === name && c.round === round);
  const ratios = (single: CellName) => Array.from({ length: ROUNDS }, (_, round) => byRound('bulk', round)!.perSecond / byRound(single, round)!.perSecond);
  const L: string[] = [];
  L.push('## Bulk migration');
  L.push('');
  L.push(`- Run: ${r.startedAt} → ${r.finishedAt}; commit ${env.gitCommit ?? 'n/a'}${env.gitDirty ? ' (uncommitted changes)' : ''}; ${env.cpus} CPUs (${env.cpuModel}); Node ${env.node}; load average at start ${env.loadAverageAtStart.join(' / ')}`);
  L.push(`- fs, SVC_DURABILITY=relaxed, a fresh server per round; ${f(DOCUMENTS)} documents per cell, ${ROUNDS} rounds (cells in order ${ORDER.join(', ')} in even rounds, reversed in odd ones)`);
  L.push('');
  L.push('| cell | documents/s (median) | rounds | server CPU per document | client CPU per document | p50 / p99 per document | other processes (rounds) |');
  L.push('|---|---|---|---|---|---|---|');
  for (const name of ORDER) {
    const cs = of(name);
    const lat = name === 'bulk' ? '—' : `${f(median(cs.map((c) => c.latency!.p50Ms)), 2)} / ${f(median(cs.map((c) => c.latency!.p99Ms)), 2)} ms`;
    L.push(`| ${name} | ${f(median(cs.map((c) => c.perSecond)))} | ${cs.map((c) => f(c.perSecond)).join(', ')} | ${f(median(cs.map((c) => c.serverCpuMs ?? NaN)), 3)} ms | ${f(median(cs.map((c) => c.clientCpuMs)), 3)} ms | ${lat} | ${cs.map((c) => `${f(c.otherPercent)}%`).join(', ')} |`);
  }
  L.push('');
  for (const single of ['single ×8', 'single ×1'] as const) {
    const xs = ratios(single);
    L.push(`- bulk / ${single}: **${f(median(xs), 2)}x** (rounds ${xs.map((x) => f(x, 2)).join(', ')})`);
  }
  if (r.problems.length) L.push('', `The servers logged ${r.problems.length} warning/error line(s); first: ${r.problems[0]}`);
  return L.join('\n');
}

async function main(): Promise<void> {
  const startedAt = new Date().toISOString();
  const environment = machineEnvironment(REPO);
  const cells: Cell[] = [];
  const problems: string[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const s = await startServer();
    try {
      await warmUp(s);
      for (const name of round % 2 ? [...ORDER].reverse() : ORDER) cells.push(await runCell(s, round, name));
    } finally {
      problems.push(...(await stopServer(s)));
    }
  }
  const report = { startedAt, finishedAt: new Date().toISOString(), environment, documents: DOCUMENTS, rounds: ROUNDS, cells, problems };
  process.stdout.write(`${render(report)}\n`);
  const outDir = path.join(REPO, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, `bulk-migration-${startedAt.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(report, null, 2));
  log(`wrote ${file}`);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
