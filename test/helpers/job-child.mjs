// The process the kill -9 test kills: opens the catalog in <root>, runs a job queue (lease 60 s)
// and enqueues one `sleep` job whose first attempt takes 60 s. Prints {"jobId"} once enqueued.
// Usage: node job-child.mjs <root> <marker>
import { JobQueue } from '../../dist/engine/jobs/queue.js';
import { Logger } from '../../dist/engine/log.js';
import { CatalogEnv } from '../../dist/engine/store/index.js';
import { createWorkerPool } from '../../dist/engine/worker-pool.js';
import { defineKinds } from './job-kinds.mjs';

const [root, marker] = process.argv.slice(2);
const env = CatalogEnv.open(root, 'strict');
const pool = createWorkerPool({ minThreads: 1, maxThreads: 1 });
const queue = new JobQueue({
  env,
  pool,
  config: { concurrency: 1, ioConcurrency: 4, maxAttempts: 5, backoffMs: 50, backoffMaxMs: 1000, leaseMs: 60_000 },
  log: new Logger('silent'),
});
defineKinds(queue, env);
queue.start();
const job = await queue.enqueue('tenant-a', 'sleep', { firstMs: 60_000, ms: 50, marker });
process.stdout.write(`${JSON.stringify({ jobId: job.jobId, owner: queue.owner })}\n`);
