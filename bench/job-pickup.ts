/**
 * Job pickup latency on LmdbUnitStore ("Jobs on PostgreSQL"): from the call to enqueue() to the
 * job's first main-thread step (its kind's `prepare`, called once the dispatcher has claimed it),
 * for jobs whose task is trivial (bench/job-noop.ts on the pool). Scenarios:
 *   idle       one job at a time, the next once the previous settled (the watch wakes the dispatcher)
 *   paced      one job every 2 ms (500/s) with 4 pool slots
 *   two nodes  idle, two queues on one store (each claim unit may conflict with the other's)
 * each under SVC_DURABILITY strict (fsync per commit) and relaxed. Reported: p50, p99, max in ms,
 * and the enqueue unit's own commit time (p50).
 *
 *   npm run build && node dist/bench/job-pickup.js [--jobs=500] [--durability=strict|relaxed]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Piscina } from 'piscina';
import type { Durability, JobConfig } from '../engine/base/config.js';
import { benchArgs } from './args.js';
import { JobQueue } from '../engine/jobs/index.js';
import { Logger } from '../engine/base/log.js';
import { CatalogEnv } from '../engine/store/index.js';
import { LmdbUnitStore } from '../engine/store/lmdb/unit-store.js';
import type { UnitStore } from '../engine/store/unit-store.js';
import { createWorkerPool } from '../engine/worker-pool.js';

const args = benchArgs({
  usage: 'usage: node dist/bench/job-pickup.js [--jobs=500] [--durability=strict|relaxed]',
  options: {
    jobs: { type: 'string', value: 'N', default: '500', help: 'jobs per scenario' },
    durability: { type: 'string', value: 'strict|relaxed', help: 'one SVC_DURABILITY only (default: both, strict then relaxed)' },
  },
});
const JOBS = args.number('jobs');
const durability = args.values.durability;
if (durability !== undefined && durability !== 'strict' && durability !== 'relaxed') args.fail(`--durability must be strict or relaxed, not "${durability}"`);
const DURABILITIES: Durability[] = durability ? [durability as Durability] : ['strict', 'relaxed'];
const NOOP = fileURLToPath(new URL('./job-noop.js', import.meta.url));
const CONFIG: JobConfig = { concurrency: 4, ioConcurrency: 4, maxAttempts: 3, backoffMs: 100, backoffMaxMs: 1000, leaseMs: 30_000 };
const log = new Logger('silent');

/** Pickup times by job id: when enqueue was called, when it resolved, when prepare ran. */
class Clock {
  readonly called = new Map<string, number>();
  readonly seen = new Map<string, number>();
  readonly committed: number[] = [];
  readonly pickups: number[] = [];
}

function queueOn(store: UnitStore, pool: Piscina, clock: { prepared(jobId: string): void }): JobQueue {
  const queue = new JobQueue({ store, pool, config: CONFIG, log });
  queue.define({
    kind: 'noop',
    task: { filename: NOOP, name: 'noop' },
    prepare: async (job) => {
      clock.prepared(job.jobId);
      return { prepared: undefined };
    },
    apply: async () => ({ derivedNamespaces: [], viewKeys: [] }),
  });
  return queue;
}

/** Enqueues `JOBS` jobs (one at a time, or every `everyMs`) and returns the pickup latencies. */
async function measure(queues: JobQueue[], everyMs: number | undefined, marks: Map<string, number>): Promise<{ pickups: number[]; commits: number[] }> {
  const pickups: number[] = [];
  const commits: number[] = [];
  const pending: Array<Promise<unknown>> = [];
  for (let i = 0; i < JOBS; i++) {
    const queue = queues[i % queues.length]!;
    const t0 = performance.now();
    const one = queue.enqueue('bench', 'noop', { i }).then(async (job) => {
      commits.push(performance.now() - t0);
      await queue.settled(job.jobId, 30_000);
      pickups.push(marks.get(job.jobId)! - t0);
    });
    if (everyMs === undefined) await one;
    else {
      pending.push(one);
      await delay(everyMs);
    }
  }
  await Promise.all(pending);
  return { pickups, commits };
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const fmt = (x: number) => x.toFixed(2).padStart(7);

async function scenario(name: string, durability: Durability, nodes: number, everyMs?: number): Promise<void> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-jobs-'));
  const env = CatalogEnv.open(root, durability);
  const store = new LmdbUnitStore(env);
  const pool = createWorkerPool({ minThreads: 4, maxThreads: 4 });
  const marks = new Map<string, number>();
  const clock = { prepared: (jobId: string) => marks.has(jobId) || marks.set(jobId, performance.now()) };
  const queues = Array.from({ length: nodes }, () => queueOn(store, pool, clock));
  try {
    await Promise.all(queues.map((q) => q.start()));
    // Warm the pool's threads and the task module.
    await Promise.all(Array.from({ length: 8 }, async () => queues[0]!.settled((await queues[0]!.enqueue('bench', 'noop', {})).jobId, 30_000)));
    const { pickups, commits } = await measure(queues, everyMs, marks);
    console.log(`${name.padEnd(10)} ${durability.padEnd(8)} pickup p50 ${fmt(pct(pickups, 50))} ms  p99 ${fmt(pct(pickups, 99))} ms  max ${fmt(Math.max(...pickups))} ms   enqueue commit p50 ${fmt(pct(commits, 50))} ms   (${pickups.length} jobs)`);
  } finally {
    await Promise.all(queues.map((q) => q.stop(5000)));
    await pool.destroy();
    await env.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

console.log(`job pickup on LmdbUnitStore, ${JOBS} jobs per scenario, ${os.cpus().length} CPUs, node ${process.version}`);
for (const durability of DURABILITIES) {
  await scenario('idle', durability, 1);
  await scenario('paced', durability, 1, 2);
  await scenario('two nodes', durability, 2);
}
