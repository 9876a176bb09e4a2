/**
 * The model runtime scenario (issue 3): registers MLeap's airbnb benchmark bundle on the model
 * listener (HTTP_PORT), then measures `POST /models/airbnb/transform?exec=<mode>` at 1, 100 and
 * 10,000 rows per request for each of `seq`, `par` and `par-2`, and `POST /models/airbnb/rank`
 * over 1,000 candidates. Per cell: requests/s, rows/s, p50/p99 latency, the per-row cost
 * (wall time / rows processed) and the server's CPU.
 *
 * The load is bench/load.ts's closed loop (one request in flight per connection, a floor of
 * measured requests for the slow cells) over bench/raw-http.ts connections, which read the
 * chunked transform answers.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { CpuReport } from './cpu.js';
import { type LatencySummary, type LoadResult, runLoad } from './load.js';
import { ByteStream } from './prng.js';
import { RawConnection, type RawResponse, bodyRequest } from './raw-http.js';
import { type Results, type Target, f, ms, pct, renderErrors, renderHeader, renderServer, renderTargets, us } from './report.js';
import type { ServerProcess } from './server-process.js';

export const BUNDLE_PATH = '../shared/fixtures/mleap/combust-mleap/mleap-benchmark/src/main/resources/models/airbnb.model.lr.zip';
export const FRAME_PATH = '../shared/fixtures/mleap/combust-mleap/mleap-benchmark/src/main/resources/leap_frame/frame.airbnb.json';
/** MLeap's published prediction for frame.airbnb.json (test/model-api.test.ts). */
const PUBLISHED_PREDICTION = 232.62463916840318;
const MODES = ['seq', 'par', 'par-2'] as const;
type Mode = (typeof MODES)[number];

/** One JSON request on a new connection, its body kept. */
function once(port: number, method: string, target: string, body: string): Promise<RawResponse> {
  return RawConnection.requestOnce(port, bodyRequest(method, target, 'application/json', body), 120_000);
}

// ---------------------------------------------------------------------------------------------
// Frames

interface LeapFrameJson {
  schema: { fields: Array<{ name: string; type: unknown }> };
  rows: unknown[][];
}

/**
 * `rows` copies of the frame's row; from the second copy on, every double is scaled by a factor
 * in [0.5, 1.5) and rounded to 2 decimals (strings unchanged: they are categories the model knows).
 * With `id`, a string column `id` is added (candidate ids for rank).
 */
function buildFrame(base: LeapFrameJson, rows: number, seed: number, id = false): string {
  const random = new ByteStream(`airbnb-frame:${seed}`);
  const template = base.rows[0]!;
  const doubles = base.schema.fields.map((field) => field.type === 'double');
  const out: unknown[][] = new Array(rows);
  for (let i = 0; i < rows; i++) {
    const row = template.map((v, c) => (i > 0 && doubles[c] && typeof v === 'number' ? Math.round(v * (0.5 + random.fraction()) * 100) / 100 : v));
    if (id) row.push(`c${seed}-${i}`);
    out[i] = row;
  }
  const fields = id ? [...base.schema.fields, { name: 'id', type: 'string' }] : base.schema.fields;
  return JSON.stringify({ schema: { fields }, rows: out });
}

// ---------------------------------------------------------------------------------------------
// Results

export interface ModelCell {
  /** What is measured, e.g. "transform" or "transform, select=price_prediction". */
  label: string;
  mode: Mode;
  rowsPerRequest: number;
  connections: number;
  requestBytes: number;
  responseBytesPerRequest: number;
  durationSeconds: number;
  requests: number;
  requestsPerSecond: number;
  rowsPerSecond: number;
  /** Wall time / rows processed over the window (all connections together), µs. */
  usPerRow: number;
  /** p50 latency / rows per request, µs: the per-row cost seen by one request. */
  p50UsPerRow: number;
  errors: number;
  firstError?: string;
  latency: LatencySummary;
  cpu: CpuReport;
}

// ---------------------------------------------------------------------------------------------
// The scenario

export interface ModelsOptions {
  /** Project root (bench fixtures are relative to it). */
  repo: string;
  server: ServerProcess;
  modelPort: number;
  quick: boolean;
  progress: (msg: string) => void;
}

export interface RankResult {
  mode: Mode;
  candidates: number;
  k: number;
  requests: number;
  durationSeconds: number;
  requestsPerSecond: number;
  usPerCandidate: number;
  latency: LatencySummary;
  errors: number;
  firstError?: string;
  cpu: CpuReport;
  /** The first answer's ids. */
  sample: string[];
}

export interface ModelsResult {
  skipped?: string;
  bundle?: string;
  frame?: string;
  registerMs?: number;
  registerStatus?: number;
  /** price_prediction of the published frame, and whether it equals MLeap's. */
  check?: { prediction: number; published: number; matches: boolean };
  /**
   * The same-run limit of the 10k-row cell: JSON.parse of its request plus JSON.stringify of its
   * answer's rows, on one thread of the bench process (best of 5), and the server's pool threads.
   */
  jsonLimit?: { usPerRowOneThread: number; poolThreads: number };
  cells: ModelCell[];
  rank: RankResult[];
  targets: Target[];
  settings?: { warmupMs: number; oneRowMs: number; hundredRowMs: number; tenKRowMs: number; rankMs: number };
}

/** Runs the scenario; a missing fixture skips it (the result says why), anything else throws. */
export async function runModels(opts: ModelsOptions): Promise<ModelsResult> {
  const result: ModelsResult = { cells: [], rank: [], targets: [] };
  const bundle = path.resolve(opts.repo, BUNDLE_PATH);
  const framePath = path.resolve(opts.repo, FRAME_PATH);
  for (const file of [bundle, framePath]) {
    if (!existsSync(file)) {
      result.skipped = `model runtime scenario skipped: fixture ${file} is absent (the MLeap fixtures live in ../shared/fixtures/mleap next to the project)`;
      opts.progress(result.skipped);
      return result;
    }
  }
  result.bundle = path.relative(opts.repo, bundle);
  result.frame = path.relative(opts.repo, framePath);
  const port = opts.modelPort;
  const base = JSON.parse(readFileSync(framePath, 'utf8')) as LeapFrameJson;

  const warmupMs = opts.quick ? 300 : 700;
  const settings = {
    warmupMs,
    oneRowMs: opts.quick ? 1500 : 3000,
    hundredRowMs: opts.quick ? 1500 : 3000,
    tenKRowMs: opts.quick ? 2000 : 5000,
    rankMs: opts.quick ? 1500 : 3000,
  };
  result.settings = settings;

  opts.progress(`models: PUT /models/airbnb (${pathToFileURL(bundle).href})`);
  const t = performance.now();
  const reg = await once(port, 'PUT', '/models/airbnb', pathToFileURL(bundle).href);
  result.registerMs = performance.now() - t;
  result.registerStatus = reg.status;
  if (reg.status !== 201 && reg.status !== 200) throw new Error(`PUT /models/airbnb answered HTTP ${reg.status}: ${reg.body?.toString('utf8').slice(0, 500)}`);

  // The published frame must give MLeap's published prediction in every mode.
  for (const mode of MODES) {
    const r = await once(port, 'POST', `/models/airbnb/transform?exec=${mode}&select=price_prediction`, JSON.stringify(base));
    if (r.status !== 200) throw new Error(`transform of frame.airbnb.json (exec=${mode}) answered HTTP ${r.status}: ${r.body?.toString('utf8').slice(0, 500)}`);
    const prediction = (JSON.parse(r.body!.toString('utf8')) as { rows: number[][] }).rows[0]![0]!;
    result.check = { prediction, published: PUBLISHED_PREDICTION, matches: prediction === PUBLISHED_PREDICTION };
    if (!result.check.matches) throw new Error(`exec=${mode}: price_prediction ${prediction}, MLeap publishes ${PUBLISHED_PREDICTION}`);
  }

  // Frames: several variants per size so requests differ; each is checked once before it is timed.
  const variants = (rows: number, n: number, id = false) => Array.from({ length: n }, (_, i) => buildFrame(base, rows, rows * 1000 + i + 1, id));
  const frames = new Map<number, string[]>([
    [1, variants(1, 16)],
    [100, variants(100, 8)],
    [10_000, variants(10_000, 2)],
  ]);
  for (const [rows, list] of frames) {
    const r = await once(port, 'POST', '/models/airbnb/transform?exec=par', list[list.length - 1]!);
    if (rows === 10_000 && r.status === 200) result.jsonLimit = { usPerRowOneThread: jsonUsPerRow(list[list.length - 1]!, r.body!.toString('utf8'), rows), poolThreads: await poolThreads(port) };
    if (r.status !== 200) throw new Error(`transform of a ${rows}-row frame answered HTTP ${r.status}: ${r.body?.toString('utf8').slice(0, 500)}`);
    const out = JSON.parse(r.body!.toString('utf8')) as LeapFrameJson;
    const at = out.schema.fields.findIndex((field) => field.name === 'price_prediction');
    if (out.rows.length !== rows || at < 0 || !out.rows.every((row) => Number.isFinite(row[at]))) {
      throw new Error(`transform of a ${rows}-row frame: ${out.rows.length} rows back, price_prediction column ${at < 0 ? 'missing' : 'not all finite'}`);
    }
  }

  /** Closed-loop load on `target`, the bodies taken round-robin so every connection sends varied frames. */
  const load = (target: string, bodies: string[], connections: number, durationMs: number, minRequests: number): Promise<LoadResult> => {
    const requests = bodies.map((body) => bodyRequest('POST', target, 'application/json', body));
    let seq = 0;
    const next = () => requests[seq++ % requests.length]!;
    return runLoad({ port, server: opts.server, connections, pipeline: 1, warmupMs, durationMs, minRequests, next, expectStatus: 200 });
  };

  const cell = async (label: string, mode: Mode, rows: number, connections: number, durationMs: number, minRequests: number, query = ''): Promise<void> => {
    const list = frames.get(rows)!;
    const target = `/models/airbnb/transform?exec=${mode}${query}`;
    opts.progress(`models: ${label} exec=${mode}, ${rows} row(s) per request, ${connections} connection(s), ${durationMs / 1000} s`);
    const r = await load(target, list, connections, durationMs, minRequests);
    const rowsDone = r.requests * rows;
    result.cells.push({
      label,
      mode,
      rowsPerRequest: rows,
      connections,
      requestBytes: Math.round(list.reduce((n, b) => n + Buffer.byteLength(b), 0) / list.length),
      responseBytesPerRequest: r.requests ? Math.round(r.bodyBytes / r.requests) : NaN,
      durationSeconds: r.durationSeconds,
      requests: r.requests,
      requestsPerSecond: r.requestsPerSecond,
      rowsPerSecond: rowsDone / r.durationSeconds,
      usPerRow: (r.durationSeconds * 1e6) / rowsDone,
      p50UsPerRow: (r.latency.p50Ms * 1000) / rows,
      errors: r.errors,
      firstError: r.firstError,
      latency: r.latency,
      cpu: r.cpu,
    });
    if (r.errors > 0) throw new Error(`${label} exec=${mode} ${rows} rows: ${r.errors} error(s), first: ${r.firstError}`);
  };

  for (const mode of MODES) {
    await cell('transform', mode, 1, 1, settings.oneRowMs, 200);
    await cell('transform', mode, 1, 4, settings.oneRowMs, 200);
    await cell('transform', mode, 100, 2, settings.hundredRowMs, 100);
    await cell('transform', mode, 10_000, 1, settings.tenKRowMs, opts.quick ? 10 : 30);
  }
  // The same 10k rows with only the prediction returned: the difference is the JSON output.
  await cell('transform, select=price_prediction', 'par', 10_000, 1, settings.tenKRowMs, opts.quick ? 10 : 30, '&select=price_prediction');

  // Rank over 1,000 candidates.
  const candidates = 1000;
  const k = 10;
  const rankFrames = Array.from({ length: 4 }, (_, i) => buildFrame(base, candidates, 77_000 + i, true));
  for (const mode of MODES) {
    const target = `/models/airbnb/rank?id=id&rank=price_prediction&k=${k}&exec=${mode}`;
    const first = await once(port, 'POST', target, rankFrames[0]!);
    if (first.status !== 200) throw new Error(`rank exec=${mode} answered HTTP ${first.status}: ${first.body?.toString('utf8').slice(0, 500)}`);
    const sample = (JSON.parse(first.body!.toString('utf8')) as { results: string[] }).results;
    if (!Array.isArray(sample) || sample.length !== k) throw new Error(`rank exec=${mode} returned ${JSON.stringify(sample).slice(0, 200)}, expected ${k} ids`);
    opts.progress(`models: rank exec=${mode}, ${candidates} candidates, k=${k}, 1 connection, ${settings.rankMs / 1000} s`);
    const r = await load(target, rankFrames, 1, settings.rankMs, 100);
    result.rank.push({
      mode,
      candidates,
      k,
      requests: r.requests,
      durationSeconds: r.durationSeconds,
      requestsPerSecond: r.requestsPerSecond,
      usPerCandidate: (r.durationSeconds * 1e6) / (r.requests * candidates),
      latency: r.latency,
      errors: r.errors,
      firstError: r.firstError,
      cpu: r.cpu,
      sample,
    });
    if (r.errors > 0) throw new Error(`rank exec=${mode}: ${r.errors} error(s), first: ${r.firstError}`);
  }
  result.targets = modelTargets(result);
  return result;
}

/** µs per row of JSON.parse(request) + JSON.stringify(answer rows), best of 5. */
function jsonUsPerRow(request: string, answer: string, rows: number): number {
  const parsed = JSON.parse(answer) as LeapFrameJson;
  let best = Infinity;
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    JSON.parse(request);
    JSON.stringify(parsed.rows);
    best = Math.min(best, performance.now() - t);
  }
  return (best * 1000) / rows;
}

/** The `workers_count{pool="blocking"}` gauge of the model listener's /metrics. */
async function poolThreads(port: number): Promise<number> {
  const r = await RawConnection.requestOnce(port, bodyRequest('GET', '/metrics', 'text/plain', ''), 10_000);
  const m = /^workers_count\{pool="blocking"\} (\d+)/m.exec(r.body?.toString('utf8') ?? '');
  if (!m) throw new Error('model /metrics has no workers_count{pool="blocking"} gauge');
  return Number(m[1]);
}

// ---------------------------------------------------------------------------------------------
// Targets and report

export function modelTargets(m: ModelsResult): Target[] {
  const targets: Target[] = [];
  const tenK = m.cells.filter((c) => c.rowsPerRequest === 10_000 && c.label === 'transform');
  if (tenK.length) {
    const best = tenK.reduce((a, b) => (b.usPerRow < a.usPerRow ? b : a));
    targets.push({
      name: 'Model transform, 10,000 rows per request: µs per row (best mode)',
      value: `${us(best.usPerRow)} (exec=${best.mode}; ${tenK.map((c) => `${c.mode} ${us(c.usPerRow)}`).join(', ')})`,
      target: '<= 5 µs (MLeap on the JVM: ~6-25 µs)',
      pass: best.usPerRow <= 5,
    });
  } else targets.push({ name: 'Model transform, 10,000 rows: µs per row', value: 'n/a', target: '<= 5 µs', pass: undefined });
  const single = m.cells.filter((c) => c.rowsPerRequest === 1 && c.connections === 1);
  if (single.length) {
    const best = single.reduce((a, b) => (b.latency.p99Ms < a.latency.p99Ms ? b : a));
    targets.push({
      name: 'Model transform, 1 row per request, 1 connection: p99 latency (best mode)',
      value: `${ms(best.latency.p99Ms)} (exec=${best.mode}; ${single.map((c) => `${c.mode} ${ms(c.latency.p99Ms)}`).join(', ')})`,
      target: '< 1 ms',
      pass: best.latency.p99Ms < 1,
    });
  } else targets.push({ name: 'Model transform, 1 row: p99 latency', value: 'n/a', target: '< 1 ms', pass: undefined });
  return targets;
}

/** The model runtime section of the report (Markdown, `##` headings). */
export function renderModelsSection(m: ModelsResult): string {
  const L: string[] = [];
  L.push('## Model runtime (issue 3): airbnb bundle on the model listener');
  L.push('');
  if (m.skipped) {
    L.push(`Skipped: ${m.skipped}`);
    L.push('');
    return L.join('\n');
  }
  L.push(`- Bundle \`${m.bundle}\` registered with \`PUT /models/airbnb\` (HTTP ${m.registerStatus}) in ${ms(m.registerMs)} (load, compile, warm-up); input frame \`${m.frame}\` repeated with varied doubles`);
  if (m.check) L.push(`- frame.airbnb.json → price_prediction ${m.check.prediction} in seq, par and par-2 (MLeap publishes ${m.check.published}: ${m.check.matches ? 'equal' : 'DIFFERENT'})`);
  if (m.settings) L.push(`- Each cell: ${m.settings.warmupMs} ms warm-up, then ${m.settings.oneRowMs / 1000} s (1 and 100 rows), ${m.settings.tenKRowMs / 1000} s (10,000 rows), ${m.settings.rankMs / 1000} s (rank) or until enough requests; closed loop, one request in flight per connection`);
  L.push('');
  if (m.targets.length) L.push(...renderTargets(m.targets));
  const tenK = m.cells.filter((c) => c.rowsPerRequest === 10_000 && c.label === 'transform');
  if (m.jsonLimit && tenK.length) {
    const { usPerRowOneThread, poolThreads } = m.jsonLimit;
    const limit = usPerRowOneThread / poolThreads;
    const best = Math.min(...tenK.map((c) => c.usPerRow));
    L.push(`Same-run limit of the 10,000-row cells: JSON.parse of the request plus JSON.stringify of the answer's rows takes ${us(usPerRowOneThread)} per row on one thread of the bench process; over the server's ${poolThreads} pool threads that is ${us(limit)} per row. The best mode runs at ${f(best / limit, 2)}× that limit.`);
    L.push('');
  }
  L.push('### POST /models/airbnb/transform');
  L.push('');
  L.push('| Request | exec | Rows/request | Connections | Requests/s | Rows/s | µs per row | p50 | p99 | p50 / row | Response | Server CPU | Bench CPU |');
  L.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const c of m.cells) {
    L.push(`| ${c.label} | ${c.mode} | ${f(c.rowsPerRequest)} | ${c.connections} | ${f(c.requestsPerSecond, c.requestsPerSecond < 100 ? 1 : 0)} | ${f(c.rowsPerSecond)} | ${us(c.usPerRow)} | ${ms(c.latency.p50Ms)} | ${ms(c.latency.p99Ms)} | ${us(c.p50UsPerRow)} | ${f(c.responseBytesPerRequest / 1024, 1)} KiB | ${pct(c.cpu.serverPercent)} | ${pct(c.cpu.benchPercent)} |`);
  }
  L.push('');
  if (m.rank.length) {
    L.push('### POST /models/airbnb/rank?id=id&rank=price_prediction&k=10 (1,000 candidates)');
    L.push('');
    L.push('| exec | Requests/s | µs per candidate | p50 | p99 | max | Server CPU | Bench CPU |');
    L.push('|---|---|---|---|---|---|---|---|');
    for (const r of m.rank) L.push(`| ${r.mode} | ${f(r.requestsPerSecond)} | ${us(r.usPerCandidate)} | ${ms(r.latency.p50Ms)} | ${ms(r.latency.p99Ms)} | ${ms(r.latency.maxMs)} | ${pct(r.cpu.serverPercent)} | ${pct(r.cpu.benchPercent)} |`);
    L.push('');
  }
  L.push('µs per row = measured wall time / rows answered in it (all connections together); p50 / row = median request latency / rows per request. CPU is % of one core over the window (server: all its threads). Latency is from writing the request to the last byte of the answer, on keep-alive connections from the same host.');
  L.push('');
  return L.join('\n');
}

/** The whole report of a `--models-only` run. */
export function renderModelsReport(r: Results, m: ModelsResult): string {
  const L = renderHeader(r, `svc benchmark: model runtime only (--models-only${r.mode === 'quick' ? ', --quick' : ''})`, r.startedAt);
  L.push(...renderErrors(r), renderModelsSection(m), ...renderServer(r));
  return L.join('\n');
}
