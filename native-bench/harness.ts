import { Bench } from 'tinybench';

export const KiB = 1024;
export const MiB = 1024 * 1024;
/** Throughput in MB/s uses decimal megabytes (10^6 bytes), as hash benchmarks usually do. */
export const MB = 1e6;

export type Unit = 'MB/s' | 'ops/s';

export interface BenchCase {
  name: string;
  /** One iteration. Sync functions are timed synchronously; async ones are awaited. */
  fn: () => unknown;
  async?: boolean;
  /** Bytes one iteration processes (for MB/s). */
  bytesPerOp?: number;
  /** Logical operations one iteration performs (e.g. a batch of 1000 puts); default 1. */
  opsPerIteration?: number;
  /** Units to report; default MB/s when bytesPerOp is set, ops/s otherwise. */
  units?: Unit[];
}

export interface BenchResult {
  group: string;
  name: string;
  throughput: number;
  unit: Unit;
  /** Timed iterations (tinybench samples). */
  samples: number;
  /** Mean time of one iteration, milliseconds. */
  meanLatencyMs: number;
  /** Relative margin of error of the mean latency, percent (95%). */
  rmePercent: number;
  bytesPerOp?: number;
  opsPerIteration?: number;
}

export interface GroupOptions {
  /** Time budget per task, ms (default 500). */
  time?: number;
  /** Minimum timed iterations per task (default 10). */
  iterations?: number;
  /** Warmup budget per task, ms (default 150). */
  warmupTime?: number;
}

/** Runs one group of cases with tinybench and converts each to one result row per unit. */
export async function runGroup(group: string, cases: BenchCase[], options: GroupOptions = {}): Promise<BenchResult[]> {
  const bench = new Bench({
    name: group,
    time: options.time ?? 500,
    iterations: options.iterations ?? 10,
    warmupTime: options.warmupTime ?? 150,
    warmupIterations: 4,
    throws: true,
  });
  for (const c of cases) bench.add(c.name, c.fn, c.async ? { async: true } : {});
  const started = performance.now();
  await bench.run();
  process.stderr.write(`  ${group}: ${cases.length} tasks in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);

  const rows: BenchResult[] = [];
  for (const c of cases) {
    const task = bench.getTask(c.name);
    const r = task?.result;
    if (!task || !r || (r.state !== 'completed' && r.state !== 'aborted-with-statistics')) {
      throw new Error(`${group} / ${c.name}: ${r?.state === 'errored' ? r.error.message : (r?.state ?? 'missing')}`);
    }
    // Total work over total time: GC pauses and other slow samples count, as they do in service.
    const iterationsPerSec = 1000 / r.latency.mean;
    const ops = iterationsPerSec * (c.opsPerIteration ?? 1);
    const units = c.units ?? (c.bytesPerOp ? ['MB/s'] : ['ops/s']);
    for (const unit of units) {
      if (unit === 'MB/s' && !c.bytesPerOp) throw new Error(`${c.name}: MB/s needs bytesPerOp`);
      rows.push({
        group,
        name: c.name,
        throughput: unit === 'MB/s' ? (iterationsPerSec * c.bytesPerOp!) / MB : ops,
        unit,
        samples: r.latency.samplesCount,
        meanLatencyMs: r.latency.mean,
        rmePercent: r.latency.rme,
        ...(c.bytesPerOp ? { bytesPerOp: c.bytesPerOp } : {}),
        ...(c.opsPerIteration ? { opsPerIteration: c.opsPerIteration } : {}),
      });
    }
  }
  return rows;
}

/**
 * Calls `fn` repeatedly for `ms` milliseconds, untimed. WebAssembly starts in V8's baseline tier
 * and is recompiled by the optimising tier in the background; without this the first task
 * of each wasm hasher measures the baseline code (and competes with the compiler for a core).
 */
export function prewarm(fn: () => unknown, ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) fn();
}

/** Keeps results alive so no computation can be optimised away. */
export let sink: unknown;
export function consume(value: unknown): void {
  sink = value;
}
