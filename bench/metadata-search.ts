/**
 * Search by metadata (`POST /v1/documents/search`, docs/documents.md "Search"), on fs:
 *
 * 1. Search latency at 10k and at 100k documents, on one server (SVC_BLOB_BACKEND=fs,
 *    SVC_DURABILITY=relaxed): the documents are made over HTTP (`POST /v1/documents` with an
 *    initialMetadata entry + `PUT` of 16 bytes + finalize, 32 clients), the first 10k, then the
 *    measurements, then the rest up to 100k, then the same measurements. Document n's entry has
 *    `bucket: "b-<n % 100>"` (100 distinct values: 100 matches at 10k, 1,000 at 100k) and
 *    `court: "Court <n % 37>"`. A query picks a random bucket and pages through up to 3 pages of
 *    100 (`limit: 100`, following `nextCursor`); every request is timed on its own. Cells: one
 *    client (latency), eight clients (throughput), and the AND of bucket and court (27 matches
 *    in 1,000 at 100k: pages scan up to 416 keys of the bucket and check the court by point reads).
 * 2. Canonical metadata writes per second with the index (this build) against the build of
 *    `--before=DIR` (a worktree of the commit before the index, built), same run, alternating
 *    order, each side on a fresh server: bench/documents.ts's writes (`POST …/metadata` mode
 *    canonical over a pool of 200 documents, 16 clients; each write changes four fields of the
 *    entry, so the index removes four keys and puts four), after one uncounted side of each build.
 *    Beside writes/s, the server's CPU-milliseconds per write (all threads, /proc), the steadier
 *    figure on a 2-core host where the bench client takes its share.
 *
 *   npm run bench:metadata-search -- --before=/work/wt-before     the full run
 *   … -- --quick                                                   2 rounds, shorter windows
 *
 * Prints a Markdown report on stdout and writes bench/results/metadata-search-<time>.json.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './args.js';
import { SCHEMA, type LoopResult, REQUEST_TIMEOUT_MS, canonicalWrites, closedLoop, describe, jsonRequest } from './documents.js';
import { type LatencySummary, summarize } from './load.js';
import { call, expectStatus } from './json-call.js';
import { RawConnection } from './raw-http.js';
import { f, machineEnvironment } from './report.js';
import { ServerProcess } from './server-process.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENTRY = path.join(REPO, 'dist', 'server', 'main.js');
const args = benchArgs({
  usage: 'usage: node dist/bench/metadata-search.js [--quick] [--before=DIR]',
  options: {
    quick: { type: 'boolean', help: '2 rounds, shorter windows' },
    before: { type: 'string', value: 'DIR', help: 'compare the canonical writes with the build in DIR (a worktree of the commit before the index, built)' },
  },
});
const { quick, before: beforeDir } = args.values;

const SIZES = [10_000, 100_000];
const SEED_CLIENTS = 32;
const SEARCH_MS = quick ? 3000 : 6000;
const SEARCH_WARMUP_MS = 1000;
const PAGES = 3;
const PAGE = 100;
const BUCKETS = 100;
const COURTS = 37;
const ROUNDS = quick ? 2 : 6;
const WRITE_CLIENTS = 16;
const WRITE_WARMUP_MS = 1000;
const WRITE_MS = quick ? 3000 : 5000;
const NAMESPACE = 'urn:svc:bench-search';
const SCHEMA_URN = 'urn:svc:schema:bench-search@1.0.0';
const P99_TARGET_MS = 20;
const GROWTH_TARGET = 2;
const WRITE_RATIO_TARGET = 0.85;

const log = (m: string) => process.stderr.write(`[metadata-search] ${m}\n`);

async function tokenAndSchemas(port: number, schemas: unknown[]): Promise<string> {
  const t = expectStatus(await call(port, 'POST', '/dev/token', undefined, { org_id: 'bench', sub: 'bench', ttl_seconds: 3600 }), 'POST /dev/token', 200);
  const token = t.json.access_token as string;
  for (const s of schemas) expectStatus(await call(port, 'POST', '/v1/schemas', token, s), 'POST /v1/schemas', 200, 201);
  return token;
}

async function startServer(entry: string): Promise<{ server: ServerProcess; root: string }> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-search-'));
  const server = await ServerProcess.start({ entry, fsRoot: root, durability: 'relaxed', env: { SVC_BLOB_BACKEND: 'fs', SVC_LOG_LEVEL: 'warn' } });
  return { server, root };
}

async function stopServer(s: { server: ServerProcess; root: string }): Promise<string[]> {
  await s.server.stop();
  rmSync(s.root, { recursive: true, force: true });
  return s.server.problems;
}

// ---------------------------------------------------------------- 1. search latency

const SEARCH_SCHEMA = { schemaUrn: SCHEMA_URN, namespaceUrn: NAMESPACE, lifecycle: 'published', jsonSchema: { type: 'object', required: ['caseNumber', 'bucket'] } };
const entryData = (n: number) => ({ caseNumber: `C-${n}`, bucket: `b-${n % BUCKETS}`, court: `Court ${n % COURTS}`, pages: (n % 500) + 1, tags: ['bench', `t-${n % 7}`] });

/** Documents `from` … `to - 1`, SEED_CLIENTS at a time; answers documents per second. */
async function seed(port: number, auth: string, from: number, to: number): Promise<number> {
  let next = from;
  const t0 = performance.now();
  const tiny = Buffer.from('0123456789abcdef');
  await Promise.all(
    Array.from({ length: SEED_CLIENTS }, async () => {
      const conn = await RawConnection.connect(port);
      try {
        for (let n = next++; n < to; n = next++) {
          const created = await conn.request(jsonRequest('POST', '/v1/documents', auth, { initialMetadata: { namespaces: { [NAMESPACE]: { schema: SCHEMA_URN, data: entryData(n) } } } }), true, REQUEST_TIMEOUT_MS);
          if (created.status !== 201) throw new Error(`POST /v1/documents: ${describe(created)}`);
          const { uploadId } = JSON.parse(created.body!.toString('utf8')) as { uploadId: string };
          const put = await conn.request(Buffer.concat([Buffer.from(`PUT /v1/uploads/${uploadId}/bytes HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Type: application/octet-stream\r\nContent-Length: ${tiny.length}\r\n\r\n`, 'latin1'), tiny]), false, REQUEST_TIMEOUT_MS);
          if (put.status !== 204) throw new Error(`PUT bytes: ${describe(put)}`);
          const fin = await conn.request(jsonRequest('POST', `/v1/uploads/${uploadId}/finalize`, auth, { reason: 'bench' }), true, REQUEST_TIMEOUT_MS);
          if (fin.status !== 201) throw new Error(`finalize: ${describe(fin)}`);
          if (n % 10_000 === 9_999) log(`${n + 1} documents`);
        }
      } finally {
        conn.close();
      }
    }),
  );
  return (to - from) / ((performance.now() - t0) / 1000);
}

interface SearchCell {
  documents: number;
  query: 'bucket' | 'bucket AND court';
  clients: number;
  requests: number;
  perSecond: number;
  /** Matches returned per request, on average. */
  meanMatches: number;
  /** Requests that were a later page (with a cursor). */
  laterPages: number;
  latency: LatencySummary;
  errors: number;
}

/** `clients` closed-loop clients, each query paging through up to PAGES pages; each request timed. */
async function measureSearch(port: number, auth: string, documents: number, query: SearchCell['query'], clients: number): Promise<SearchCell> {
  const latencies: number[] = [];
  let matches = 0;
  let laterPages = 0;
  let errors = 0;
  let measuring = false;
  let stopping = false;
  let t0 = 0;
  let t1 = 0;
  const warm = setTimeout(() => {
    measuring = true;
    t0 = performance.now();
  }, SEARCH_WARMUP_MS);
  const stop = setTimeout(() => {
    measuring = false;
    stopping = true;
    t1 = performance.now();
  }, SEARCH_WARMUP_MS + SEARCH_MS);
  await Promise.all(
    Array.from({ length: clients }, async () => {
      const conn = await RawConnection.connect(port);
      try {
        while (!stopping) {
          const b = Math.floor(Math.random() * BUCKETS);
          const where: Record<string, string> = query === 'bucket' ? { '/bucket': `b-${b}` } : { '/bucket': `b-${b}`, '/court': `Court ${Math.floor(Math.random() * COURTS)}` };
          let cursor: string | undefined;
          for (let page = 0; page < PAGES && !stopping; page++) {
            const body = { namespaceUrn: NAMESPACE, where, limit: PAGE, ...(cursor ? { cursor } : {}) };
            const a = performance.now();
            const counted = measuring;
            const res = await conn.request(jsonRequest('POST', '/v1/documents/search', auth, body), true, REQUEST_TIMEOUT_MS);
            const ms = performance.now() - a;
            if (res.status !== 200) {
              errors++;
              break;
            }
            const answer = JSON.parse(res.body!.toString('utf8')) as { documents: unknown[]; nextCursor?: string };
            if (counted && measuring) {
              latencies.push(ms);
              matches += answer.documents.length;
              if (page > 0) laterPages++;
            }
            cursor = answer.nextCursor;
            if (!cursor) break;
          }
        }
      } finally {
        conn.close();
      }
    }),
  );
  clearTimeout(warm);
  clearTimeout(stop);
  return {
    documents, query, clients, requests: latencies.length, perSecond: latencies.length / ((t1 - t0) / 1000),
    meanMatches: matches / Math.max(1, latencies.length), laterPages, latency: summarize(latencies), errors,
  };
}

interface SearchResult {
  seeding: Array<{ documents: number; perSecond: number }>;
  cells: SearchCell[];
  problems: string[];
}

async function searchScenario(): Promise<SearchResult> {
  const s = await startServer(ENTRY);
  const result: SearchResult = { seeding: [], cells: [], problems: [] };
  try {
    const port = s.server.port;
    const token = await tokenAndSchemas(port, [SEARCH_SCHEMA]);
    const auth = `Authorization: Bearer ${token}\r\n`;
    let made = 0;
    for (const size of SIZES) {
      log(`seeding ${made} → ${size} documents`);
      result.seeding.push({ documents: size, perSecond: await seed(port, auth, made, size) });
      made = size;
      for (const [query, clients] of [['bucket', 1], ['bucket', 8], ['bucket AND court', 1]] as const) {
        const cell = await measureSearch(port, auth, size, query, clients);
        log(`${size} documents, ${query}, ${clients} client(s): p50 ${f(cell.latency.p50Ms, 2)} ms, p99 ${f(cell.latency.p99Ms, 2)} ms, ${f(cell.perSecond)}/s`);
        result.cells.push(cell);
      }
    }
  } finally {
    result.problems = await stopServer(s);
  }
  return result;
}

// ---------------------------------------------------------------- 2. canonical writes, with and without the index

type WriteSide = 'with index' | 'before';

interface WriteRun {
  side: WriteSide;
  round: number;
  writes: LoopResult;
  problems: string[];
}

async function writeSide(side: WriteSide, round: number): Promise<WriteRun> {
  const s = await startServer(side === 'before' ? path.join(path.resolve(beforeDir!), 'dist', 'server', 'main.js') : ENTRY);
  try {
    const port = s.server.port;
    const token = await tokenAndSchemas(port, [SCHEMA]);
    const auth = `Authorization: Bearer ${token}\r\n`;
    const writeIteration = await canonicalWrites(port, auth);
    const writes = await closedLoop({ port, server: s.server, connections: WRITE_CLIENTS, warmupMs: WRITE_WARMUP_MS, durationMs: WRITE_MS, stepNames: [], iteration: writeIteration });
    log(`writes, ${side}, round ${round}: ${f(writes.perSecond)}/s, ${f(writes.serverCpuMsPerItem, 3)} CPU-ms each, p99 ${f(writes.latency.p99Ms, 2)} ms, ${writes.errors} errors`);
    return { side, round, writes, problems: [] };
  } finally {
    const problems = await stopServer(s);
    if (problems.length) log(`${side}: the server logged ${problems.length} warning/error line(s); first: ${problems[0]}`);
  }
}

// ---------------------------------------------------------------- report

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function render(r: { environment: Record<string, unknown>; search: SearchResult; writes: WriteRun[]; startedAt: string; finishedAt: string }): string {
  const L: string[] = [];
  const env = r.environment as ReturnType<typeof machineEnvironment> & { before?: string; beforeCommit?: string };
  L.push('## Metadata search');
  L.push('');
  L.push(`- Run: ${r.startedAt} → ${r.finishedAt}; commit ${env.gitCommit ?? 'n/a'}${env.gitDirty ? ' (uncommitted changes)' : ''}; ${env.cpus} CPUs (${env.cpuModel}); Node ${env.node}; load average at start ${env.loadAverageAtStart.join(' / ')}`);
  if (env.before) L.push(`- "before": ${env.before}/dist/server/main.js (commit ${env.beforeCommit ?? 'n/a'})`);
  L.push(`- Seeding (create + 16 B + finalize, ${SEED_CLIENTS} clients): ${r.search.seeding.map((s) => `to ${f(s.documents)} at ${f(s.perSecond)} documents/s`).join('; ')}`);
  L.push('');
  L.push(`| documents | where | clients | requests | requests/s | matches per page | later pages | p50 | p99 | max | errors |`);
  L.push('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const c of r.search.cells) {
    L.push(`| ${f(c.documents)} | ${c.query} | ${c.clients} | ${f(c.requests)} | ${f(c.perSecond)} | ${f(c.meanMatches, 1)} | ${f(c.laterPages)} | ${f(c.latency.p50Ms, 2)} ms | ${f(c.latency.p99Ms, 2)} ms | ${f(c.latency.maxMs, 2)} ms | ${c.errors} |`);
  }
  const p99 = (size: number) => r.search.cells.find((c) => c.documents === size && c.query === 'bucket' && c.clients === 1)?.latency.p99Ms ?? NaN;
  const small = p99(SIZES[0]!);
  const large = p99(SIZES[1]!);
  L.push('');
  L.push('| target | measured | verdict |');
  L.push('|---|---|---|');
  L.push(`| p99 of a page of 100 at 100k ≤ ${GROWTH_TARGET}x p99 at 10k (one client) | ${f(large, 2)} ms against ${f(small, 2)} ms: ${f(large / small, 2)}x | ${large / small <= GROWTH_TARGET ? 'met' : 'not met'} |`);
  L.push(`| p99 of a page of 100 at 100k ≤ ${P99_TARGET_MS} ms | ${f(large, 2)} ms | ${large <= P99_TARGET_MS ? 'met' : 'not met'} |`);
  if (r.writes.length) {
    const withIndex = r.writes.filter((w) => w.side === 'with index');
    const before = r.writes.filter((w) => w.side === 'before');
    const ratios = withIndex.map((w) => w.writes.perSecond / (before.find((b) => b.round === w.round)?.writes.perSecond ?? NaN));
    const ratio = median(ratios);
    const cpu = (ws: WriteRun[]) => median(ws.map((w) => w.writes.serverCpuMsPerItem ?? NaN));
    L.push(`| canonical writes/s with the index ≥ ${WRITE_RATIO_TARGET}x before (${WRITE_CLIENTS} clients, median of ${ROUNDS} rounds) | ${f(median(withIndex.map((w) => w.writes.perSecond)))} against ${f(median(before.map((w) => w.writes.perSecond)))} writes/s: ${f(ratio, 2)}x (rounds ${ratios.map((x) => f(x, 2)).join(', ')}); server CPU ${f(cpu(withIndex), 3)} against ${f(cpu(before), 3)} ms per write | ${ratio >= WRITE_RATIO_TARGET ? 'met' : 'not met'} |`);
    L.push('');
    L.push('| round | side | writes/s | server CPU per write | p50 | p99 | errors |');
    L.push('|---|---|---|---|---|---|---|');
    for (const w of r.writes) L.push(`| ${w.round} | ${w.side} | ${f(w.writes.perSecond)} | ${f(w.writes.serverCpuMsPerItem, 3)} ms | ${f(w.writes.latency.p50Ms, 2)} ms | ${f(w.writes.latency.p99Ms, 2)} ms | ${w.writes.errors} |`);
  } else {
    L.push('| canonical writes/s with the index ≥ 0.85x before | not measured: give --before=<a built worktree of the commit before> | — |');
  }
  if (r.search.problems.length) L.push('', `The search server logged ${r.search.problems.length} warning/error line(s); first: ${r.search.problems[0]}`);
  return L.join('\n');
}

async function main(): Promise<void> {
  const startedAt = new Date().toISOString();
  const environment: Record<string, unknown> = machineEnvironment(REPO);
  if (beforeDir) {
    environment.before = path.resolve(beforeDir);
    try {
      environment.beforeCommit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: beforeDir, encoding: 'utf8' }).trim();
    } catch {
      environment.beforeCommit = undefined;
    }
  }
  const writes: WriteRun[] = [];
  if (beforeDir) {
    // Uncounted: the first server of a run (either build) is slower (files, page cache, JIT of the bench itself).
    for (const side of ['before', 'with index'] as const) await writeSide(side, -1);
    for (let round = 0; round < ROUNDS; round++) {
      const order: WriteSide[] = round % 2 ? ['with index', 'before'] : ['before', 'with index'];
      for (const side of order) writes.push(await writeSide(side, round));
    }
  }
  const search = await searchScenario();
  const report = { startedAt, finishedAt: new Date().toISOString(), environment, search, writes };
  const text = render(report);
  process.stdout.write(`${text}\n`);
  const outDir = path.join(REPO, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, `metadata-search-${startedAt.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(report, null, 2));
  log(`wrote ${file}`);
  const failed = search.cells.some((c) => c.errors > 0) || writes.some((w) => w.writes.errors > 0);
  if (failed) process.exitCode = 1;
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
