// The durable job queue: kinds, enqueue, dispatch, leases, retries.
export { JobError, JobQueue, type JobRecord } from './queue.js';
