// The process the kill -9 test kills: opens the catalog in <root>, runs a job queue (lease
// <leaseMs>, node <node>) and enqueues one `sleep` job whose first attempt takes 60 s. Prints
// {"jobId","owner"} once enqueued.
// Usage: node job-child.mjs <root> <marker> <node> <leaseMs>
import { JobQueue } from '../../dist/engine/jobs/queue.js';
import { Logger } from '../../dist/engine/base/log.js';
import { CatalogEnv } from '../../dist/engine/store/index.js';
import { LmdbUnitStore } from '../../dist/engine/store/lmdb/unit-store.js';
import { createWorkerPool } from '../../dist/engine/worker-pool.js';
import { defineKinds } from './job-kinds.mjs';

const [root, marker, node, leaseMs] = process.argv.slice(2);
const env = CatalogEnv.open(root, 'strict');
const pool = createWorkerPool({ minThreads: 1, maxThreads: 1 });
const queue = new JobQueue({
  store: new LmdbUnitStore(env),
  pool,
  config: { concurrency: 1, ioConcurrency: 4, maxAttempts: 5, backoffMs: 50, backoffMaxMs: 1000, leaseMs: Number(leaseMs) },
  log: new Logger('silent'),
  node,
});
defineKinds(queue);
await queue.start();
const job = await queue.enqueue('tenant-a', 'sleep', { firstMs: 60_000, ms: 50, marker });
process.stdout.write(`${JSON.stringify({ jobId: job.jobId, owner: queue.owner })}\n`);
