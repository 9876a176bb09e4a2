/**
 * The model runtime scenario (issue 3): registers MLeap's airbnb benchmark bundle on the model
 * listener (HTTP_PORT), then measures `POST /models/airbnb/transform?exec=<mode>` at 1, 100 and
 * 10,000 rows per request for each of `seq`, `par` and `par-2`, and `POST /models/airbnb/rank`
 * over 1,000 candidates. Per cell: requests/s, rows/s, p50/p99 latency, the per-row cost
 * (wall time / rows processed) and the server's CPU.
 *
 * Transform answers are chunked (Transfer-Encoding: chunked), which bench/raw-http.ts does not
 * read, so this file has its own small keep-alive client: one request in flight per connection,
 * Content-Length and chunked bodies, bodies counted and only kept when asked.
 */
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type CpuReport, CpuWindow } from './cpu.js';
import { type LatencySummary, summarize } from './load.js';
import type { Results, Target } from './report.js';
import type { ServerProcess } from './server-process.js';

export const BUNDLE_PATH = '../shared/fixtures/mleap/combust-mleap/mleap-benchmark/src/main/resources/models/airbnb.model.lr.zip';
export const FRAME_PATH = '../shared/fixtures/mleap/combust-mleap/mleap-benchmark/src/main/resources/leap_frame/frame.airbnb.json';
/** MLeap's published prediction for frame.airbnb.json (test/model-api.test.ts). */
const PUBLISHED_PREDICTION = 232.62463916840318;
const MODES = ['seq', 'par', 'par-2'] as const;
type Mode = (typeof MODES)[number];

// ---------------------------------------------------------------------------------------------
// A keep-alive HTTP/1.1 client that reads chunked bodies

interface Reply {
  status: number;
  bodyBytes: number;
  body?: Buffer;
  sentAt: number;
  doneAt: number;
}

const CRLF = Buffer.from('\r\n');
const CRLF2 = Buffer.from('\r\n\r\n');

type ReadState = 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-crlf' | 'trailer' | 'idle';

class ModelConnection {
  private state: ReadState = 'idle';
  private carry: Buffer | null = null;
  private remaining = 0;
  private status = 0;
  private keep: Buffer[] | null = null;
  private bodyBytes = 0;
  private sentAt = 0;
  private pending: { resolve: (r: Reply) => void; reject: (e: Error) => void; keepBody: boolean } | undefined;
  private failure: Error | undefined;
  private closing = false;

  private constructor(private readonly socket: net.Socket) {}

  static connect(port: number): Promise<ModelConnection> {
    return new Promise((resolve, reject) => {
      let conn: ModelConnection | undefined = undefined;
      const socket = net.connect({
        port,
        host: '127.0.0.1',
        onread: {
          buffer: Buffer.allocUnsafe(256 * 1024),
          callback: (n: number, buf: Uint8Array) => {
            conn!.feed(buf as Buffer, n);
            return true;
          },
        },
      });
      conn = new ModelConnection(socket);
      socket.setNoDelay(true);
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        socket.on('error', (err) => conn!.fail(err));
        socket.on('close', () => conn!.fail(new Error('server closed the connection')));
        resolve(conn!);
      });
    });
  }

  request(bytes: Buffer, keepBody = false): Promise<Reply> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.pending) return Promise.reject(new Error('one request at a time'));
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject, keepBody };
      this.state = 'head';
      this.sentAt = performance.now();
      this.socket.write(bytes);
    });
  }

  close(): void {
    this.closing = true;
    this.socket.destroy();
  }

  private fail(err: Error): void {
    if (this.closing || this.failure) return;
    this.failure = err;
    const p = this.pending;
    this.pending = undefined;
    p?.reject(err);
  }

  /** Bytes up to and including the next `delimiter` (carried across reads), or undefined. */
  private takeUntil(buf: Buffer, pos: number, end: number, delimiter: Buffer): { text: string; next: number } | undefined {
    const carried = this.carry ? this.carry.length : 0;
    const data = this.carry ? Buffer.concat([this.carry, buf.subarray(pos, end)]) : buf.subarray(pos, end);
    const idx = data.indexOf(delimiter);
    if (idx < 0) {
      if (data.length > 64 * 1024) throw new Error('response line or header larger than 64 KiB');
      this.carry = Buffer.from(data);
      return undefined;
    }
    this.carry = null;
    return { text: data.toString('latin1', 0, idx), next: pos + idx + delimiter.length - carried };
  }

  private body(buf: Buffer, from: number, to: number): void {
    this.bodyBytes += to - from;
    if (this.keep) this.keep.push(Buffer.from(buf.subarray(from, to)));
  }

  private feed(buf: Buffer, end: number): void {
    let pos = 0;
    try {
      while (pos < end && this.pending) {
        switch (this.state) {
          case 'head': {
            const t = this.takeUntil(buf, pos, end, CRLF2);
            if (!t) return;
            pos = t.next;
            if (!t.text.startsWith('HTTP/1.')) throw new Error(`malformed status line: ${t.text.slice(0, 200)}`);
            this.status = Number(t.text.slice(9, 12));
            this.bodyBytes = 0;
            this.keep = this.pending.keepBody || this.status >= 400 ? [] : null;
            const length = /\r\ncontent-length:[ \t]*(\d+)/i.exec(t.text);
            if (/\r\ntransfer-encoding:[^\r]*chunked/i.test(t.text)) this.state = 'chunk-size';
            else if (length) {
              this.remaining = Number(length[1]);
              this.state = 'length';
              if (this.remaining === 0) this.finish();
            } else throw new Error(`response with neither Content-Length nor chunked: ${t.text.slice(0, 200)}`);
            break;
          }
          case 'length': {
            const take = Math.min(this.remaining, end - pos);
            this.body(buf, pos, pos + take);
            pos += take;
            this.remaining -= take;
            if (this.remaining === 0) this.finish();
            break;
          }
          case 'chunk-size': {
            const t = this.takeUntil(buf, pos, end, CRLF);
            if (!t) return;
            pos = t.next;
            const size = parseInt(t.text, 16);
            if (!Number.isFinite(size)) throw new Error(`bad chunk size line "${t.text.slice(0, 40)}"`);
            this.remaining = size;
            this.state = size === 0 ? 'trailer' : 'chunk-data';
            break;
          }
          case 'chunk-data': {
            const take = Math.min(this.remaining, end - pos);
            this.body(buf, pos, pos + take);
            pos += take;
            this.remaining -= take;
            if (this.remaining === 0) {
              this.state = 'chunk-crlf';
              this.remaining = 2;
            }
            break;
          }
          case 'chunk-crlf': {
            const take = Math.min(this.remaining, end - pos);
            pos += take;
            this.remaining -= take;
            if (this.remaining === 0) this.state = 'chunk-size';
            break;
          }
          case 'trailer': {
            // Trailer lines, if any, end with an empty line; uWS sends none.
            const t = this.takeUntil(buf, pos, end, CRLF);
            if (!t) return;
            pos = t.next;
            if (t.text === '') this.finish();
            break;
          }
          case 'idle':
            throw new Error('bytes from the server without a request');
        }
      }
      if (pos < end && !this.pending) throw new Error('bytes from the server without a request');
    } catch (err) {
      this.fail(err as Error);
      this.socket.destroy();
    }
  }

  private finish(): void {
    const p = this.pending!;
    this.pending = undefined;
    this.state = 'idle';
    const reply: Reply = { status: this.status, bodyBytes: this.bodyBytes, sentAt: this.sentAt, doneAt: performance.now() };
    if (this.keep) reply.body = Buffer.concat(this.keep);
    this.keep = null;
    p.resolve(reply);
  }
}

function httpRequest(method: string, target: string, body: Buffer | string): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const head = `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${b.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), b]);
}

async function once(port: number, method: string, target: string, body: Buffer | string, timeoutMs = 120_000): Promise<Reply> {
  const conn = await ModelConnection.connect(port);
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      conn.request(httpRequest(method, target, body), true),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${method} ${target}: no answer within ${timeoutMs / 1000} s`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    conn.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Frames

interface LeapFrameJson {
  schema: { fields: Array<{ name: string; type: unknown }> };
  rows: unknown[][];
}

/** Deterministic [0, 1) numbers (mulberry32). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * `rows` copies of the frame's row; from the second copy on, every double is scaled by a factor
 * in [0.5, 1.5) and rounded to 2 decimals (strings unchanged: they are categories the model knows).
 * With `id`, a string column `id` is added (candidate ids for rank).
 */
function buildFrame(base: LeapFrameJson, rows: number, seed: number, id = false): string {
  const random = prng(seed);
  const template = base.rows[0]!;
  const doubles = base.schema.fields.map((f) => f.type === 'double');
  const out: unknown[][] = new Array(rows);
  for (let i = 0; i < rows; i++) {
    const row = template.map((v, c) => (i > 0 && doubles[c] && typeof v === 'number' ? Math.round(v * (0.5 + random()) * 100) / 100 : v));
    if (id) row.push(`c${seed}-${i}`);
    out[i] = row;
  }
  const fields = id ? [...base.schema.fields, { name: 'id', type: 'string' }] : base.schema.fields;
  return JSON.stringify({ schema: { fields }, rows: out });
}

// ---------------------------------------------------------------------------------------------
// Closed-loop load

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

interface LoadCellSpec {
  port: number;
  server: ServerProcess;
  connections: number;
  warmupMs: number;
  durationMs: number;
  /** At least this many measured requests (the window is extended until then). */
  minRequests: number;
  requests: Buffer[];
}

interface LoadCellResult {
  durationSeconds: number;
  requests: number;
  bodyBytes: number;
  errors: number;
  firstError?: string;
  latencies: number[];
  cpu: CpuReport;
}

async function runCell(spec: LoadCellSpec): Promise<LoadCellResult> {
  const conns = await Promise.all(Array.from({ length: spec.connections }, () => ModelConnection.connect(spec.port)));
  const latencies: number[] = [];
  let requests = 0;
  let errors = 0;
  let bodyBytes = 0;
  let firstError: string | undefined;
  let measuring = false;
  let stopping = false;
  let window: CpuWindow | undefined;
  let cpu: CpuReport = { benchPercent: NaN };
  let t0 = 0;
  let t1 = 0;
  const begin = performance.now();
  const maybeStop = () => {
    const now = performance.now();
    if (!measuring && !stopping && now - begin >= spec.warmupMs) {
      measuring = true;
      window = new CpuWindow(spec.server.pid);
      t0 = now;
    } else if (measuring && now - t0 >= spec.durationMs && requests >= spec.minRequests) {
      measuring = false;
      stopping = true;
      t1 = now;
      cpu = window!.end();
    }
  };
  // Requests are taken round-robin from a shared counter so every connection sends varied frames.
  let seq = 0;
  const hardLimit = spec.warmupMs + Math.max(spec.durationMs * 20, 120_000);
  try {
    await Promise.all(
      conns.map(async (conn) => {
        while (!stopping) {
          if (performance.now() - begin > hardLimit) throw new Error(`cell did not reach ${spec.minRequests} requests within ${hardLimit / 1000} s`);
          const reply = await conn.request(spec.requests[seq++ % spec.requests.length]!);
          if (measuring && reply.sentAt >= t0) {
            requests++;
            bodyBytes += reply.bodyBytes;
            latencies.push(reply.doneAt - reply.sentAt);
            if (reply.status !== 200) {
              errors++;
              firstError ??= `HTTP ${reply.status}: ${reply.body?.toString('utf8').slice(0, 300)}`;
            }
          } else if (reply.status !== 200) {
            firstError ??= `HTTP ${reply.status} (warm-up): ${reply.body?.toString('utf8').slice(0, 300)}`;
          }
          maybeStop();
        }
      }),
    );
  } finally {
    for (const c of conns) c.close();
  }
  return { durationSeconds: (t1 - t0) / 1000, requests, bodyBytes, errors, firstError, latencies, cpu };
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
  poolThreads?: unknown;
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
  for (const f of [bundle, framePath]) {
    if (!existsSync(f)) {
      result.skipped = `model runtime scenario skipped: fixture ${f} is absent (the MLeap fixtures live in ../shared/fixtures/mleap next to the project)`;
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
    if (r.status !== 200) throw new Error(`transform of a ${rows}-row frame answered HTTP ${r.status}: ${r.body?.toString('utf8').slice(0, 500)}`);
    const out = JSON.parse(r.body!.toString('utf8')) as LeapFrameJson;
    const at = out.schema.fields.findIndex((f) => f.name === 'price_prediction');
    if (out.rows.length !== rows || at < 0 || !out.rows.every((row) => Number.isFinite(row[at]))) {
      throw new Error(`transform of a ${rows}-row frame: ${out.rows.length} rows back, price_prediction column ${at < 0 ? 'missing' : 'not all finite'}`);
    }
  }

  const cell = async (label: string, mode: Mode, rows: number, connections: number, durationMs: number, minRequests: number, query = ''): Promise<void> => {
    const list = frames.get(rows)!;
    const target = `/models/airbnb/transform?exec=${mode}${query}`;
    opts.progress(`models: ${label} exec=${mode}, ${rows} row(s) per request, ${connections} connection(s), ${durationMs / 1000} s`);
    const requests = list.map((body) => httpRequest('POST', target, body));
    const r = await runCell({ port, server: opts.server, connections, warmupMs, durationMs, minRequests, requests });
    const latency = summarize(r.latencies);
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
      requestsPerSecond: r.requests / r.durationSeconds,
      rowsPerSecond: rowsDone / r.durationSeconds,
      usPerRow: (r.durationSeconds * 1e6) / rowsDone,
      p50UsPerRow: (latency.p50Ms * 1000) / rows,
      errors: r.errors,
      firstError: r.firstError,
      latency,
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
    const r = await runCell({ port, server: opts.server, connections: 1, warmupMs, durationMs: settings.rankMs, minRequests: 100, requests: rankFrames.map((b) => httpRequest('POST', target, b)) });
    const latency = summarize(r.latencies);
    result.rank.push({
      mode,
      candidates,
      k,
      requests: r.requests,
      durationSeconds: r.durationSeconds,
      requestsPerSecond: r.requests / r.durationSeconds,
      usPerCandidate: (r.durationSeconds * 1e6) / (r.requests * candidates),
      latency,
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

// ---------------------------------------------------------------------------------------------
// Targets and report

const f = (n: number | undefined, digits = 0) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }));
const ms = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n < 10 ? `${f(n, 2)} ms` : `${f(n, 1)} ms`);
const us = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n < 100 ? `${f(n, 1)} µs` : `${f(n)} µs`);
const pct = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : `${f(n)}%`);

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

const mark = (pass: boolean | undefined) => (pass === undefined ? 'NOT MEASURED' : pass ? 'PASS' : 'FAIL');

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
  if (m.targets.length) {
    L.push('| Check | Result | Target | Verdict |');
    L.push('|---|---|---|---|');
    for (const t of m.targets) L.push(`| ${t.name} | ${t.value} | ${t.target} | ${mark(t.pass)} |`);
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
  const e = r.environment;
  const L: string[] = [];
  L.push(`# svc benchmark: model runtime only (--models-only${r.mode === 'quick' ? ', --quick' : ''})`);
  L.push('');
  L.push(`- Run: ${r.startedAt}`);
  L.push(`- Host: ${e.cpuModel}, ${e.cpus} CPU(s), ${f(e.memoryBytes / 1024 ** 3)} GiB RAM, ${e.os}, Node ${e.node}; load average at start ${e.loadAverageAtStart.join(' / ')}`);
  L.push(`- Code: ${e.gitCommit ? `\`${e.gitCommit.slice(0, 12)}\`${e.gitDirty ? ' (working tree has uncommitted changes)' : ''}` : 'unknown'}; server workers: ${r.server.workers ?? 'unknown'}`);
  L.push('');
  if (r.errors.length > 0) {
    L.push('## Errors');
    L.push('');
    for (const err of r.errors) L.push(`- **${err.phase}**: ${err.message.replace(/\n/g, ' ')}`);
    L.push('');
  }
  L.push(renderModelsSection(m));
  L.push(`Server warnings/errors logged: ${r.server.problems.length === 0 ? 'none' : r.server.problems.length}`);
  for (const p of r.server.problems.slice(0, 10)) L.push(`- \`${p.replace(/`/g, "'").slice(0, 500)}\``);
  L.push('');
  return L.join('\n');
}
