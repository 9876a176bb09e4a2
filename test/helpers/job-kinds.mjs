// Job kinds of the job queue tests, shared by test/jobs.test.ts and the child process of the
// kill -9 test (test/helpers/job-child.mjs). Every kind's apply counts its call in the
// `test_job_effects` table, in the completion unit.

import { table } from '../../dist/engine/store/unit-store.js';

const TASKS = new URL('./job-tasks.mjs', import.meta.url).href;
export const EFFECTS = table('test_job_effects');

export function effectsDb(env) {
  return env.database('test_job_effects');
}

/** How many times apply's effects were committed for the job. */
export function effectCount(env, jobId) {
  return effectsDb(env).get(jobId) ?? 0;
}

/**
 * Defines the kinds on the queue. `hooks.beforeApply(job, output)` runs inside apply after the
 * effect is written to the unit (it may throw, to test the rollback, or wait).
 */
export function defineKinds(queue, hooks = {}) {
  const apply = (outputs) => async (unit, job, output) => {
    unit.put(EFFECTS, job.jobId, ((await unit.get(EFFECTS, job.jobId)) ?? 0) + 1);
    await hooks.beforeApply?.(job, output);
    return outputs(job, output);
  };
  const none = () => ({ derivedNamespaces: [], viewKeys: [] });
  queue.define({
    kind: 'double',
    task: { filename: TASKS, name: 'double' },
    apply: apply((job, output) => ({ derivedNamespaces: [`urn:test:ns:${output.doubled}`], viewKeys: [`v1:${job.jobId}`] })),
  });
  queue.define({ kind: 'sleep', task: { filename: TASKS, name: 'sleep' }, apply: apply(none) });
  queue.define({ kind: 'flaky', task: { filename: TASKS, name: 'flaky' }, apply: apply(none) });
  queue.define({ kind: 'refuse', task: { filename: TASKS, name: 'refuse' }, apply: apply(none) });
  queue.define({ kind: 'crashOnce', task: { filename: TASKS, name: 'crashOnce' }, apply: apply(none) });
}
