/**
 * What the tenant accounting costs (docs/security.md, "Tenant policy and budgets"): this build
 * against the build of `--before=DIR` (a worktree of an earlier commit, built), same run,
 * alternating order, each side on a fresh server with security on and a tenant policy that sets
 * every byte limit (a quota, an object limit and a byte budget, all far above what the run uses),
 * so every check and reservation runs and none refuses:
 *
 * 1. Canonical metadata writes (`POST /v1/documents/{id}/metadata`, mode canonical, over a pool
 *    of 200 documents, 16 clients; bench/documents.ts's writes): the metadata accounting.
 * 2. 4 KiB uploads (`POST /api/v1/blobs`, fresh random bytes, 16 clients): the quota check, the
 *    byte budget, the staged bytes.
 *
 * Beside the rates, the server's CPU-milliseconds per operation (all threads, /proc), the steadier
 * figure on a 2-core host where the bench client takes its share. Target: this build ≥ 0.95x
 * before, on the median of the rounds' ratios.
 *
 *   npm run bench:tenant-accounting -- --before=/work/wt/base     the full run (6 rounds)
 *   … -- --quick                                                    2 rounds, shorter windows
 *
 * Prints a Markdown report on stdout and writes bench/results/tenant-accounting-<time>.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './args.js';
import { SCHEMA, type LoopResult, type Outcome, REQUEST_TIMEOUT_MS, canonicalWrites, closedLoop, describe, randomBodyRequest } from './documents.js';
import { call, expectStatus } from './json-call.js';
import { RawConnection } from './raw-http.js';
import { f, machineEnvironment, median } from './report.js';
import { commitOf, startPolicyServer } from './policy-server.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENTRY = path.join(REPO, 'dist', 'server', 'main.js');
const args = benchArgs({
  usage: 'usage: node dist/bench/tenant-accounting.js --before=DIR [--quick]',
  options: {
    before: { type: 'string', value: 'DIR', help: 'required: a built worktree of the commit to compare with' },
    quick: { type: 'boolean', help: '2 rounds, shorter windows (default: 6 rounds)' },
  },
});
const quick = args.values.quick;
const beforeDir = args.values.before ?? args.fail('--before=DIR is required');

const ROUNDS = quick ? 2 : 6;
const CLIENTS = 16;
const WARMUP_MS = 1000;
const WINDOW_MS = quick ? 3000 : 5000;
const UPLOAD_BYTES = 4096;
const RATIO_TARGET = 0.95;
const TENANT = 'bench';
/** Far above what a run stores or sends, so nothing is refused, yet every limit is set and checked. */
const POLICY = { default: {}, tenants: { [TENANT]: { quotaBytes: 1e15, maxObjectBytes: 1e12, bytesPerMinute: 1e15, requestsPerMinute: 1e9 } } };
const SECRET = 'tenant-accounting-bench-secret-0123456789abcdef0123456789abcdef';

type Side = 'this' | 'before';
type Cell = 'canonical writes' | '4 KiB uploads';

interface Run {
  side: Side;
  round: number;
  cell: Cell;
  result: LoopResult;
}

const log = (m: string) => process.stderr.write(`[tenant-accounting] ${m}\n`);

async function cell(side: Side, round: number, which: Cell): Promise<Run> {
  const entry = side === 'before' ? path.join(path.resolve(beforeDir), 'dist', 'server', 'main.js') : ENTRY;
  const s = await startPolicyServer(entry, 'accounting', POLICY, SECRET);
  try {
    const port = s.server.port;
    const token = await s.token(TENANT);
    const auth = `Authorization: Bearer ${token}\r\n`;
    let iteration: (c: RawConnection) => Promise<Outcome>;
    if (which === 'canonical writes') {
      expectStatus(await call(port, 'POST', '/v1/schemas', token, SCHEMA), 'POST /v1/schemas', 200, 201);
      iteration = await canonicalWrites(port, auth);
    } else {
      iteration = async (c) => {
        const res = await c.request(randomBodyRequest('POST', '/api/v1/blobs', auth, 'application/octet-stream', UPLOAD_BYTES), true, REQUEST_TIMEOUT_MS);
        return res.status === 201 ? { ok: true, steps: [] } : { ok: false, step: 'POST /api/v1/blobs', detail: describe(res) };
      };
    }
    const result = await closedLoop({ port, server: s.server, connections: CLIENTS, warmupMs: WARMUP_MS, durationMs: WINDOW_MS, stepNames: [], iteration });
    log(`${which}, ${side}, round ${round}: ${f(result.perSecond)}/s, ${f(result.serverCpuMsPerItem, 3)} CPU-ms each, ${result.errors} errors${result.firstError ? ` (${result.firstError})` : ''}`);
    return { side, round, cell: which, result };
  } finally {
    await s.stop();
  }
}

function render(runs: Run[], environment: Record<string, unknown>): string {
  const L: string[] = ['# Tenant accounting: this build against before', ''];
  L.push(`- this: ${ENTRY} (commit ${environment.gitCommit ?? "n/a"}); before: ${environment.before} (commit ${environment.beforeCommit ?? 'n/a'})`);
  L.push(`- ${ROUNDS} rounds, order alternating; ${CLIENTS} clients, ${WINDOW_MS / 1000} s windows after ${WARMUP_MS / 1000} s of warm-up; security on, a policy with every byte limit set`, '');
  L.push('| Cell | this | before | ratio (median; rounds) | CPU-ms per op this / before | target | verdict |', '|---|---|---|---|---|---|---|');
  for (const which of ['canonical writes', '4 KiB uploads'] as const) {
    const mine = runs.filter((r) => r.cell === which && r.side === 'this');
    const theirs = runs.filter((r) => r.cell === which && r.side === 'before');
    const ratios = mine.map((m) => m.result.perSecond / (theirs.find((b) => b.round === m.round)?.result.perSecond ?? NaN));
    const ratio = median(ratios);
    const cpu = (rs: Run[]) => median(rs.map((r) => r.result.serverCpuMsPerItem ?? NaN));
    L.push(`| ${which}/s | ${f(median(mine.map((r) => r.result.perSecond)))} | ${f(median(theirs.map((r) => r.result.perSecond)))} | ${f(ratio, 2)}x (${ratios.map((x) => f(x, 2)).join(', ')}) | ${f(cpu(mine), 3)} / ${f(cpu(theirs), 3)} | ≥ ${RATIO_TARGET}x | ${ratio >= RATIO_TARGET ? 'met' : 'not met'} |`);
  }
  return L.join('\n') + '\n';
}

async function main(): Promise<void> {
  const environment: Record<string, unknown> = { ...machineEnvironment(REPO), before: path.resolve(beforeDir) };
  environment.beforeCommit = commitOf(beforeDir);
  const runs: Run[] = [];
  // One uncounted side of each build first: the disk cache and the JIT of the bench itself.
  for (const side of ['before', 'this'] as const) await cell(side, -1, '4 KiB uploads');
  for (let round = 0; round < ROUNDS; round++) {
    const order: Side[] = round % 2 ? ['this', 'before'] : ['before', 'this'];
    for (const which of ['canonical writes', '4 KiB uploads'] as const) for (const side of order) runs.push(await cell(side, round, which));
  }
  const report = render(runs, environment);
  process.stdout.write(report);
  const dir = path.join(REPO, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, `tenant-accounting-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), JSON.stringify({ environment, runs }, null, 2));
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
