// The durable job queue: kinds, enqueue, dispatch, leases, retries, lists.
export { JobError, JobQueue, type JobFilter, type JobKind, type JobOutputs, type JobRecord, type JobState } from './queue.js';
