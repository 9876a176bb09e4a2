import { type CpuReport, CpuWindow } from './cpu.js';
import { RawConnection, type RawResponse } from './raw-http.js';
import type { ServerProcess } from './server-process.js';

export interface LoadSpec {
  port: number;
  connections: number;
  /** Requests kept in flight per connection (1 = no pipelining). */
  pipeline: number;
  warmupMs: number;
  durationMs: number;
  /** The next request for a connection. */
  next(conn: number): Buffer | string;
  expectStatus: number;
  keepBody?: boolean;
  /** Called for every successful response (warm-up included). */
  onOk?: (res: RawResponse) => void;
  server?: ServerProcess;
  /**
   * At least this many measured responses: the window stays open past `durationMs` until then.
   * With a floor the window's edges are responses (it opens on the first response after the
   * warm-up and closes on the response that completes it), so slow requests (hundreds of ms)
   * count whole and one connection's window is a whole number of requests.
   */
  minRequests?: number;
  /** With `minRequests`: the load fails when the floor is not reached this long after the warm-up (default max(20 x durationMs, 120 s)). */
  maxWindowMs?: number;
}

export interface LatencySummary {
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
}

export interface LoadResult {
  connections: number;
  pipeline: number;
  inFlight: number;
  durationSeconds: number;
  requests: number;
  requestsPerSecond: number;
  errors: number;
  firstError?: string;
  bodyBytes: number;
  latency: LatencySummary;
  /** CPU over the measured window (bench = the load generator). */
  cpu: CpuReport;
}

export function summarize(latencies: number[]): LatencySummary {
  if (latencies.length === 0) return { p50Ms: NaN, p90Ms: NaN, p99Ms: NaN, maxMs: NaN, meanMs: NaN };
  const sorted = Float64Array.from(latencies).sort();
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
  let sum = 0;
  for (const v of sorted) sum += v;
  return { p50Ms: at(0.5), p90Ms: at(0.9), p99Ms: at(0.99), maxMs: sorted[sorted.length - 1], meanMs: sum / sorted.length };
}

/**
 * Closed-loop load: `connections` keep-alive sockets, each keeping `pipeline` requests in
 * flight; a warm-up, then a measured window (`durationMs`, or longer to reach `minRequests`).
 * Only responses that complete inside the window count (throughput and latency); CPU of this
 * process and of the server is taken over it.
 */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const conns = await Promise.all(Array.from({ length: spec.connections }, () => RawConnection.connect(spec.port)));
  const latencies: number[] = [];
  let requests = 0;
  let errors = 0;
  let bodyBytes = 0;
  let firstError: string | undefined;
  let measuring = false;
  let stopping = false;
  let failure: Error | undefined;
  const floor = spec.minRequests;
  let warmedUp = false;

  let finish!: () => void;
  let abort!: (err: Error) => void;
  const done = new Promise<void>((resolve, reject) => {
    finish = resolve;
    abort = reject;
  });
  let active = conns.length;

  const onResponse = (i: number) => (res: RawResponse) => {
    const ok = res.status === spec.expectStatus;
    if (ok) spec.onOk?.(res);
    if (measuring) {
      requests++;
      bodyBytes += res.bodyBytes;
      latencies.push(res.doneAt - res.sentAt);
      if (!ok) {
        errors++;
        firstError ??= `HTTP ${res.status}${res.body ? `: ${res.body.toString('utf8').slice(0, 300)}` : ''}`;
      }
      if (floor !== undefined && requests >= floor && res.doneAt - t0 >= spec.durationMs) closeWindow();
    } else if (warmedUp && !stopping) {
      openWindow();
    }
    const conn = conns[i];
    if (!stopping) conn.enqueue(spec.next(i), handlers[i], spec.keepBody ?? false);
    else if (conn.inFlight === 0) {
      conn.close();
      if (--active === 0) finish();
    }
  };
  const handlers = conns.map((_, i) => onResponse(i));
  for (const [i, conn] of conns.entries()) {
    conn.onFailure = (err) => {
      failure ??= err;
      abort(err);
    };
    for (let k = 0; k < spec.pipeline; k++) conn.enqueue(spec.next(i), handlers[i], spec.keepBody ?? false);
    conn.flush();
  }

  let window: CpuWindow | undefined;
  let cpu: CpuReport = { benchPercent: NaN };
  let t0 = performance.now();
  let t1 = t0;
  let drainWatchdog: NodeJS.Timeout | undefined;
  const maxWindowMs = spec.maxWindowMs ?? Math.max(spec.durationMs * 20, 120_000);
  const floorLimit =
    floor === undefined ? undefined : setTimeout(() => abort(new Error(`load phase got ${requests} of at least ${floor} measured responses within ${maxWindowMs / 1000} s`)), spec.warmupMs + maxWindowMs);
  const openWindow = () => {
    measuring = true;
    window = new CpuWindow(spec.server?.pid);
    t0 = performance.now();
  };
  const closeWindow = () => {
    measuring = false;
    stopping = true;
    t1 = performance.now();
    if (window) cpu = window.end();
    clearTimeout(floorLimit);
    drainWatchdog = setTimeout(() => abort(new Error(`load phase did not drain within 30 s after its end (${conns.reduce((n, c) => n + c.inFlight, 0)} request(s) still in flight)`)), 30_000);
  };
  // Without a floor the window is timed; with one, responses open and close it (onResponse).
  const warm = setTimeout(() => {
    if (floor === undefined) openWindow();
    else warmedUp = true;
  }, spec.warmupMs);
  const stop = floor === undefined ? setTimeout(closeWindow, spec.warmupMs + spec.durationMs) : undefined;
  try {
    await done;
  } finally {
    clearTimeout(warm);
    clearTimeout(stop);
    clearTimeout(floorLimit);
    clearTimeout(drainWatchdog);
    for (const c of conns) c.close();
  }
  if (failure) throw failure;
  const seconds = (t1 - t0) / 1000;
  return {
    connections: spec.connections,
    pipeline: spec.pipeline,
    inFlight: spec.connections * spec.pipeline,
    durationSeconds: seconds,
    requests,
    requestsPerSecond: requests / seconds,
    errors,
    firstError,
    bodyBytes,
    latency: summarize(latencies),
    cpu,
  };
}
