// The failure a job kind reports on purpose. No imports: task modules on the worker threads
// import it without loading the queue (LMDB, Piscina).

/**
 * Thrown by a job's task (on a worker) or its `apply` (on the main thread). `retryable=false`
 * fails the job at once (`failed`); `retryable=true` counts as an attempt and is retried with
 * backoff like any other error. `code` and `message` become the job's `error` as they are, so
 * they are written for the job's reader (no internal details).
 */
export class JobError extends Error {
  override readonly name = 'JobError';

  constructor(
    readonly code: string,
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** What a failed attempt records: the job's `error` and whether it may run again. */
export interface JobFailure {
  code: string;
  message: string;
  retryable: boolean;
}

/**
 * A JobError, also one of another copy of this module (a task module may load it through another
 * path): recognised by its name and fields, not by its class.
 */
export function asJobFailure(err: unknown): JobFailure | undefined {
  if (err instanceof JobError) return { code: err.code, message: err.message, retryable: err.retryable };
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { name?: unknown; code?: unknown; message?: unknown; retryable?: unknown };
  if (e.name !== 'JobError' || typeof e.code !== 'string' || e.code === '' || typeof e.message !== 'string') return undefined;
  return { code: e.code, message: e.message, retryable: e.retryable !== false };
}
