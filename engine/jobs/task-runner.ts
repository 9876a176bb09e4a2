// Piscina task module of the job queue (the worker side): runs one attempt of a job's task.
//
// Every job kind's task is reached through this module: it loads the kind's module (once per
// worker, the module cache keeps it), calls the named export and reports a JobError as data. An
// Error crossing the thread boundary keeps only its message and stack, so a thrown JobError would
// lose its code and `retryable` flag; anything else is rethrown (an internal error, retried).

import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { asJobFailure, type JobFailure } from './errors.js';

/** What a task function receives. */
export interface JobTaskPayload<I = unknown> {
  input: I;
  jobId: string;
  /** 1 for the first attempt. */
  attempt: number;
  /** What the kind's `prepare` handed over (absent without one). */
  prepared?: unknown;
}

export interface TaskCall {
  /** The kind's task module: a file URL or an absolute path. */
  filename: string;
  name: string;
  payload: JobTaskPayload;
}

export type TaskOutcome = { ok: true; output: unknown } | { ok: false; failure: JobFailure };

export function moduleUrl(filename: string): string {
  if (filename.startsWith('file:')) return filename;
  if (!path.isAbsolute(filename)) throw new Error(`job task module must be a file URL or an absolute path: ${filename}`);
  return pathToFileURL(filename).href;
}

export async function runJobTask(call: TaskCall): Promise<TaskOutcome> {
  const module = (await import(moduleUrl(call.filename))) as Record<string, unknown>;
  const task = module[call.name];
  if (typeof task !== 'function') throw new Error(`job task module ${call.filename} has no function export ${call.name}`);
  try {
    return { ok: true, output: await (task as (payload: JobTaskPayload) => unknown)(call.payload) };
  } catch (err) {
    const failure = asJobFailure(err);
    if (failure) return { ok: false, failure };
    throw err;
  }
}
