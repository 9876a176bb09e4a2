// Task functions of the job queue tests (run on Piscina workers through engine/jobs/task-runner).
// Each gets { input, jobId, attempt }.
import fs from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { JobError } from '../../dist/engine/jobs/errors.js';

/** Doubles input.n. */
export function double({ input, jobId, attempt }) {
  return { doubled: input.n * 2, jobId, attempt };
}

/** Sleeps input.ms (input.firstMs on the first attempt, when given); leaves `<marker>.<attempt>` once started. */
export async function sleep({ input, attempt }) {
  if (input.marker) fs.writeFileSync(`${input.marker}.${attempt}`, String(process.pid));
  await delay(attempt === 1 && input.firstMs !== undefined ? input.firstMs : input.ms);
  return { slept: true, attempt };
}

/** Fails its first input.failures attempts: with a retryable JobError when input.code is set, else a plain Error. */
export function flaky({ input, attempt }) {
  if (attempt <= input.failures) {
    if (input.code) throw new JobError(input.code, `attempt ${attempt} refused`, true);
    throw new Error(`planned failure of attempt ${attempt} (internal detail)`);
  }
  return { attempt };
}

/** A non-retryable failure. */
export function refuse({ input }) {
  throw new JobError(input.code, input.message, false);
}

/** Ends its worker thread on the first attempt (a worker crash). */
export function crashOnce({ attempt }) {
  if (attempt === 1) process.exit(7);
  return { attempt };
}
