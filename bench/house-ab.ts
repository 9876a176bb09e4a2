/**
 * The house's cost (issue 38: the engine owns the rules): this build against the build of
 * `--before=DIR` (a worktree of an earlier commit, built), same run, alternating order, each cell
 * on a fresh server with security on and a tenant policy that sets every byte limit (far above
 * what a run uses, so every check runs and none refuses):
 *
 * 1. ingest: `POST /api/v1/blobs` of 8 MiB fresh random bytes, 4 clients (MiB/s);
 * 2. 4 KiB GETs: `GET /api/v1/blobs/{id}` over 256 stored 4 KiB blobs, 16 clients;
 * 3. canonical writes: `POST /v1/documents/{id}/metadata`, mode canonical, 16 clients
 *    (bench/documents.ts's writes over a pool of 200 documents);
 * 4. tus PATCHes: 256 KiB `PATCH /files/{id}` appends, 8 clients, each on uploads of 32 MiB
 *    (a new one, created by `POST /files/`, when the last is whole).
 *
 * Beside the rates, the server's CPU-milliseconds per operation (all threads, /proc). Target:
 * this build ≥ 0.95x before on the median of the rounds' ratios.
 *
 *   npm run bench:house -- --before=/work/wt/base     the full run (5 rounds)
 *   … -- --quick                                        2 rounds, shorter windows
 *   … -- --this=DIR --before=DIR                        the harness against itself (its bias on this host)
 *
 * Prints a Markdown report on stdout and writes bench/results/house-ab-<time>.json.
 */
import { randomFillSync } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './args.js';
import { SCHEMA, type LoopResult, type Outcome, REQUEST_TIMEOUT_MS, canonicalWrites, closedLoop, describe, randomBodyRequest } from './documents.js';
import { call, expectStatus } from './json-call.js';
import { RawConnection, getRequest } from './raw-http.js';
import { f, machineEnvironment, median } from './report.js';
import { commitOf, startPolicyServer } from './policy-server.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DEFAULT_ENTRY = path.join(REPO, 'dist', 'server', 'main.js');
const args = benchArgs({
  usage: 'usage: node dist/bench/house-ab.js --before=DIR [--this=DIR] [--quick] [--cells=a,b]',
  options: {
    before: { type: 'string', value: 'DIR', help: 'required: a built worktree of the commit to compare with' },
    quick: { type: 'boolean', help: '2 rounds, shorter windows (default: 5 rounds)' },
    cells: { type: 'string', value: 'LIST', help: 'only these cells (comma-separated: ingest, get, canonical, tus)' },
    this: { type: 'string', value: 'DIR', help: 'the "this" side from the build in DIR instead of this checkout (--this=DIR --before=DIR: the harness against itself)' },
  },
});
const quick = args.values.quick;
const beforeDir = args.values.before ?? args.fail('--before=DIR is required');
const ENTRY = args.values.this ? path.join(path.resolve(args.values.this), 'dist', 'server', 'main.js') : DEFAULT_ENTRY;

const ROUNDS = quick ? 2 : 5;
const WARMUP_MS = 1000;
const WINDOW_MS = quick ? 3000 : 5000;
const RATIO_TARGET = 0.95;
const MiB = 1024 * 1024;
const INGEST_BYTES = 8 * MiB;
const SMALL_BYTES = 4096;
const SMALL_BLOBS = 256;
const TUS_PATCH = 256 * 1024;
const TUS_UPLOAD = 32 * MiB;
const TENANT = 'bench';
/** Far above what a run stores or sends, so nothing is refused, yet every limit is set and checked. */
const POLICY = { default: {}, tenants: { [TENANT]: { quotaBytes: 1e15, maxObjectBytes: 1e12, bytesPerMinute: 1e15, requestsPerMinute: 1e9 } } };
const SECRET = 'house-ab-bench-secret-0123456789abcdef0123456789abcdef0123';

type Side = 'this' | 'before';
interface CellSpec {
  name: string;
  key: string;
  connections: number;
  /** Units of one iteration for the rate column (MiB for ingest, else 1). */
  unit: number;
  unitName: string;
  prepare(port: number, token: string, auth: string): Promise<(c: RawConnection) => Promise<Outcome>>;
}

interface Run {
  side: Side;
  round: number;
  cell: string;
  result: LoopResult;
}

const log = (m: string) => process.stderr.write(`[house-ab] ${m}\n`);

const CELLS: CellSpec[] = [
  {
    name: 'ingest', key: 'ingest', connections: 4, unit: INGEST_BYTES / MiB, unitName: 'MiB/s',
    prepare: async (_port, _token, auth) => async (c) => {
      const res = await c.request(randomBodyRequest('POST', '/api/v1/blobs', auth, 'application/octet-stream', INGEST_BYTES), true, REQUEST_TIMEOUT_MS);
      return res.status === 201 ? { ok: true, steps: [] } : { ok: false, step: 'POST /api/v1/blobs', detail: describe(res) };
    },
  },
  {
    name: '4 KiB GETs', key: 'get', connections: 16, unit: 1, unitName: '/s',
    prepare: async (port, token, auth) => {
      const ids: string[] = [];
      for (let i = 0; i < SMALL_BLOBS; i++) {
        const bytes = randomFillSync(Buffer.alloc(SMALL_BYTES));
        ids.push(expectStatus(await call(port, 'POST', '/api/v1/blobs', token, bytes), 'POST /api/v1/blobs', 201).json.blob.id as string);
      }
      let n = 0;
      return async (c) => {
        const res = await c.request(getRequest(`/api/v1/blobs/${ids[n++ % ids.length]}`, auth), false, REQUEST_TIMEOUT_MS);
        return res.status === 200 && res.bodyBytes === SMALL_BYTES ? { ok: true, steps: [] } : { ok: false, step: 'GET /api/v1/blobs/{id}', detail: describe(res) };
      };
    },
  },
  {
    name: 'canonical writes', key: 'canonical', connections: 16, unit: 1, unitName: '/s',
    prepare: async (port, token, auth) => {
      expectStatus(await call(port, 'POST', '/v1/schemas', token, SCHEMA), 'POST /v1/schemas', 200, 201);
      return canonicalWrites(port, auth);
    },
  },
  {
    name: 'tus PATCHes', key: 'tus', connections: 8, unit: 1, unitName: '/s',
    prepare: async (port, token, auth) => {
      const uploads = new Map<RawConnection, { path: string; offset: number }>();
      const create = async () => {
        const res = await fetch(`http://127.0.0.1:${port}/files/`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Tus-Resumable': '1.0.0', 'Upload-Length': String(TUS_UPLOAD) } });
        await res.arrayBuffer();
        const location = res.headers.get('location');
        if (res.status !== 201 || !location) throw new Error(`POST /files/ answered HTTP ${res.status}`);
        return { path: new URL(location, `http://127.0.0.1:${port}`).pathname, offset: 0 };
      };
      const chunk = randomFillSync(Buffer.alloc(TUS_PATCH));
      return async (c) => {
        let upload = uploads.get(c);
        if (!upload || upload.offset >= TUS_UPLOAD) uploads.set(c, (upload = await create()));
        // Fresh bytes for every PATCH: the store deduplicates whole uploads, not PATCHes, but
        // a different first block keeps every upload's blob new.
        chunk.writeUInt32BE((Math.random() * 2 ** 32) >>> 0, 0);
        const head = `PATCH ${upload.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Tus-Resumable: 1.0.0\r\nUpload-Offset: ${upload.offset}\r\nContent-Type: application/offset+octet-stream\r\nContent-Length: ${TUS_PATCH}\r\n\r\n`;
        const res = await c.request(Buffer.concat([Buffer.from(head, 'latin1'), chunk]), true, REQUEST_TIMEOUT_MS);
        if (res.status !== 204) return { ok: false, step: 'PATCH /files/{id}', detail: describe(res) };
        upload.offset += TUS_PATCH;
        return { ok: true, steps: [] };
      };
    },
  },
];

async function cell(side: Side, round: number, spec: CellSpec): Promise<Run> {
  const entry = side === 'before' ? path.join(path.resolve(beforeDir), 'dist', 'server', 'main.js') : ENTRY;
  const s = await startPolicyServer(entry, 'house', POLICY, SECRET);
  try {
    const port = s.server.port;
    const token = await s.token(TENANT);
    const iteration = await spec.prepare(port, token, `Authorization: Bearer ${token}\r\n`);
    const result = await closedLoop({ port, server: s.server, connections: spec.connections, warmupMs: WARMUP_MS, durationMs: WINDOW_MS, stepNames: [], iteration });
    log(`${spec.name}, ${side}, round ${round}: ${f(result.perSecond * spec.unit)} ${spec.unitName}, ${f(result.serverCpuMsPerItem, 3)} CPU-ms each, ${result.errors} errors${result.firstError ? ` (${result.firstError})` : ''}`);
    return { side, round, cell: spec.key, result };
  } finally {
    await s.stop();
  }
}

function render(cells: CellSpec[], runs: Run[], environment: Record<string, unknown>): string {
  const L: string[] = ['# The house: this build against before', ''];
  L.push(`- this: ${ENTRY} (commit ${environment.gitCommit ?? 'n/a'}); before: ${environment.before} (commit ${environment.beforeCommit ?? 'n/a'})`);
  L.push(`- ${ROUNDS} rounds, order alternating; ${WINDOW_MS / 1000} s windows after ${WARMUP_MS / 1000} s of warm-up; security on, a policy with every byte limit set`, '');
  L.push('| Cell | this | before | ratio (median; rounds) | CPU-ms per op this / before | target | verdict |', '|---|---|---|---|---|---|---|');
  for (const spec of cells) {
    const mine = runs.filter((r) => r.cell === spec.key && r.side === 'this');
    const theirs = runs.filter((r) => r.cell === spec.key && r.side === 'before');
    const ratios = mine.map((m) => m.result.perSecond / (theirs.find((b) => b.round === m.round)?.result.perSecond ?? NaN));
    const ratio = median(ratios);
    const rate = (rs: Run[]) => f(median(rs.map((r) => r.result.perSecond * spec.unit)));
    const cpu = (rs: Run[]) => f(median(rs.map((r) => r.result.serverCpuMsPerItem ?? NaN)), 3);
    L.push(`| ${spec.name} (${spec.connections} clients), ${spec.unitName} | ${rate(mine)} | ${rate(theirs)} | ${f(ratio, 2)}x (${ratios.map((x) => f(x, 2)).join(', ')}) | ${cpu(mine)} / ${cpu(theirs)} | ≥ ${RATIO_TARGET}x | ${ratio >= RATIO_TARGET ? 'met' : 'not met'} |`);
  }
  return L.join('\n') + '\n';
}

async function main(): Promise<void> {
  const wanted = args.values.cells?.split(',').map((s) => s.trim());
  const cells = wanted ? CELLS.filter((c) => wanted.includes(c.key)) : CELLS;
  if (wanted && cells.length !== wanted.length) args.fail(`--cells: known cells are ${CELLS.map((c) => c.key).join(', ')}`);
  const environment: Record<string, unknown> = { ...machineEnvironment(REPO), before: path.resolve(beforeDir) };
  environment.beforeCommit = commitOf(beforeDir);
  const runs: Run[] = [];
  // One uncounted cell of each build first: the disk cache and the JIT of the bench itself.
  for (const side of ['before', 'this'] as const) await cell(side, -1, cells[0]!);
  for (let round = 0; round < ROUNDS; round++) {
    const order: Side[] = round % 2 ? ['this', 'before'] : ['before', 'this'];
    for (const spec of cells) for (const side of order) runs.push(await cell(side, round, spec));
  }
  const report = render(cells, runs, environment);
  process.stdout.write(report);
  const dir = path.join(REPO, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, `house-ab-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), JSON.stringify({ environment, runs }, null, 2));
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
