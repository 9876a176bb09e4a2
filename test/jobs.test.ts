// The durable job queue (engine/jobs) on a real LMDB catalog and a real Piscina pool; task
// functions in test/helpers/job-tasks.mjs, kinds in test/helpers/job-kinds.mjs.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Piscina } from 'piscina';
import { afterEach, describe, expect, test } from 'vitest';
import { loadConfig, type JobConfig } from '../dist/engine/config.js';
import { Engine } from '../dist/engine/engine.js';
import { JobQueue, type JobRecord } from '../dist/engine/jobs/queue.js';
import { Logger } from '../dist/engine/log.js';
import { CatalogEnv } from '../dist/engine/store/index.js';
import { createWorkerPool } from '../dist/engine/worker-pool.js';
import { defineKinds, effectCount, effectsDb } from './helpers/job-kinds.mjs';
import { tempRoot } from './helpers/server.js';

const TENANT = 'tenant-a';
const OTHER = 'tenant-b';
const CHILD = fileURLToPath(new URL('./helpers/job-child.mjs', import.meta.url));
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const CONFIG: JobConfig = { concurrency: 2, ioConcurrency: 4, maxAttempts: 5, backoffMs: 100, backoffMaxMs: 1000, leaseMs: 2000 };

interface Setup {
  root: string;
  env: CatalogEnv;
  pool: Piscina;
  queue: JobQueue;
}

const cleanups: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A catalog in a temp dir (or `root`), a pool and a queue with the test kinds, started. */
function setup(config: Partial<JobConfig> = {}, options: { root?: string; threads?: number; hooks?: object; start?: boolean } = {}): Setup {
  const root = options.root ?? tempRoot('svc-jobs-');
  const env = CatalogEnv.open(root, 'relaxed');
  const pool = createWorkerPool({ minThreads: options.threads ?? 2, maxThreads: options.threads ?? 2 });
  const queue = new JobQueue({ env, pool, config: { ...CONFIG, ...config }, log: new Logger('silent') });
  defineKinds(queue, env, options.hooks);
  if (options.start !== false) queue.start();
  cleanups.push(async () => {
    await queue.stop(2000);
    await pool.destroy();
    await env.close();
    if (!options.root) fs.rmSync(root, { recursive: true, force: true });
  });
  return { root, env, pool, queue };
}

/** Polls until `check` holds (or fails after `ms`). */
async function until<T>(probe: () => T, check: (v: T) => boolean, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (check(v)) return v;
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms: ${JSON.stringify(v)}`);
    await delay(5);
  }
}

describe('job queue', () => {
  test('enqueue → completed: durable pending record, task output through apply, outputs persisted, effects once', async () => {
    const { env, queue } = setup({}, { start: false });
    const job = await queue.enqueue(TENANT, 'double', { n: 21 });
    expect(job).toMatchObject({ tenant: TENANT, kind: 'double', input: { n: 21 }, state: 'pending', attempts: 0, maxAttempts: 5, error: null, outputs: { derivedNamespaces: [], viewKeys: [] } });
    expect(job.jobId).toMatch(UUID_V7);
    expect(job.nextRunAt).toBe(job.createdAt);
    expect(queue.get(TENANT, job.jobId)).toEqual(job); // committed before enqueue resolved
    queue.start();
    const done = await queue.settled(job.jobId, 5000);
    expect(done.state).toBe('completed');
    expect(done.attempts).toBe(1);
    expect(done.error).toBeNull();
    expect(done.lease).toBeUndefined();
    expect(done.startedAt).toBeGreaterThanOrEqual(job.createdAt);
    expect(done.finishedAt).toBeGreaterThanOrEqual(done.startedAt!);
    expect(done.outputs).toEqual({ derivedNamespaces: ['urn:test:ns:42'], viewKeys: [`v1:${job.jobId}`] });
    expect(queue.get(TENANT, job.jobId)).toEqual(done);
    expect(effectCount(env, job.jobId)).toBe(1);
    // Settled again: the terminal record at once.
    expect(await queue.settled(job.jobId)).toEqual(done);
  });

  test("another tenant's job is undefined; unknown ids and kinds", async () => {
    const { queue } = setup();
    const job = await queue.enqueue(TENANT, 'double', { n: 1 });
    expect(queue.get(OTHER, job.jobId)).toBeUndefined();
    expect(queue.get(TENANT, job.jobId)?.jobId).toBe(job.jobId);
    expect(queue.get(TENANT, '01900000-0000-7000-8000-000000000000')).toBeUndefined();
    await expect(queue.enqueue(TENANT, 'no-such-kind', {})).rejects.toThrow(/unknown job kind/);
    expect(() => queue.enqueueSync('', 'double', {})).toThrow(/tenant/);
    await queue.settled(job.jobId, 5000);
  });

  test('a retryable failure returns to pending with attempts 1 and nextRunAt in the future, then completes', async () => {
    const { env, queue } = setup({ backoffMs: 400 });
    const job = await queue.enqueue(TENANT, 'flaky', { failures: 1 });
    const retry = await until(() => queue.get(TENANT, job.jobId)!, (r) => r.attempts === 1 && r.state === 'pending');
    const seenAt = Date.now();
    expect(retry.nextRunAt).toBeGreaterThan(seenAt);
    expect(retry.nextRunAt - retry.startedAt!).toBeGreaterThanOrEqual(400);
    // An internal error: a generic message, no stack or detail.
    expect(retry.error).toEqual({ code: 'internal_error', message: 'The job failed because of an internal error' });
    expect(retry.lease).toBeUndefined();
    expect(retry.finishedAt).toBeUndefined();
    const done = await queue.settled(job.jobId, 5000);
    expect(done.state).toBe('completed');
    expect(done.attempts).toBe(2);
    expect(done.startedAt).toBeGreaterThanOrEqual(retry.nextRunAt);
    expect(done.error).toBeNull();
    expect(effectCount(env, job.jobId)).toBe(1);
  });

  test('a retryable JobError keeps its code; backoff doubles per attempt', async () => {
    const { queue } = setup({ backoffMs: 100 });
    const job = await queue.enqueue(TENANT, 'flaky', { failures: 2, code: 'source_unavailable' });
    const first = await until(() => queue.get(TENANT, job.jobId)!, (r) => r.attempts === 1 && r.state === 'pending');
    expect(first.error).toEqual({ code: 'source_unavailable', message: 'attempt 1 refused' });
    const second = await until(() => queue.get(TENANT, job.jobId)!, (r) => r.attempts === 2 && r.state === 'pending');
    // 100 ms after the first failure, 200 ms after the second (so at least that after each attempt's start).
    expect(first.nextRunAt - first.startedAt!).toBeGreaterThanOrEqual(100);
    expect(second.nextRunAt - second.startedAt!).toBeGreaterThanOrEqual(200);
    expect(second.error).toEqual({ code: 'source_unavailable', message: 'attempt 2 refused' });
    expect((await queue.settled(job.jobId, 5000)).attempts).toBe(3);
  });

  test('after SVC_JOB_MAX_ATTEMPTS attempts the job is dead with its error; no effects', async () => {
    const { env, queue } = setup({ maxAttempts: 3, backoffMs: 20 });
    const job = await queue.enqueue(TENANT, 'flaky', { failures: 99 });
    expect(job.maxAttempts).toBe(3);
    const dead = await queue.settled(job.jobId, 5000);
    expect(dead.state).toBe('dead');
    expect(dead.attempts).toBe(3);
    expect(dead.error).toEqual({ code: 'internal_error', message: 'The job failed because of an internal error' });
    expect(dead.finishedAt).toBeGreaterThanOrEqual(dead.startedAt!);
    expect(dead.lease).toBeUndefined();
    expect(effectCount(env, job.jobId)).toBe(0);
    await delay(100);
    expect(queue.get(TENANT, job.jobId)).toEqual(dead); // not run again
  });

  test('a non-retryable JobError in the task fails the job at once', async () => {
    const { env, queue } = setup();
    const job = await queue.enqueue(TENANT, 'refuse', { code: 'unsupported_input', message: 'The input cannot be processed' });
    const failed = await queue.settled(job.jobId, 5000);
    expect(failed.state).toBe('failed');
    expect(failed.attempts).toBe(1);
    expect(failed.error).toEqual({ code: 'unsupported_input', message: 'The input cannot be processed' });
    expect(effectCount(env, job.jobId)).toBe(0);
  });

  test("apply's writes commit with the completion: an apply that throws after writing leaves nothing; a non-retryable JobError from apply fails the job", async () => {
    let calls = 0;
    const { JobError } = await import('../dist/engine/jobs/errors.js');
    const { env, queue } = setup({ backoffMs: 20 }, {
      hooks: {
        beforeApply: (job: JobRecord) => {
          const input = job.input as { applyFails?: number; applyRefuses?: boolean };
          if (input.applyRefuses) throw new JobError('conflict', 'The target changed', false);
          if (input.applyFails !== undefined && ++calls <= input.applyFails) throw new Error('apply broke after writing');
        },
      },
    });
    const retried = await queue.enqueue(TENANT, 'double', { n: 2, applyFails: 2 });
    const done = await queue.settled(retried.jobId, 5000);
    expect(done.state).toBe('completed');
    expect(done.attempts).toBe(3); // apply threw twice; each time the task ran again
    expect(calls).toBe(3);
    expect(effectCount(env, retried.jobId)).toBe(1); // the two rolled-back writes left nothing
    const refused = await queue.enqueue(TENANT, 'double', { n: 2, applyRefuses: true });
    const failed = await queue.settled(refused.jobId, 5000);
    expect(failed.state).toBe('failed');
    expect(failed.error).toEqual({ code: 'conflict', message: 'The target changed' });
    expect(failed.outputs).toEqual({ derivedNamespaces: [], viewKeys: [] });
    expect(effectCount(env, refused.jobId)).toBe(0);
  });

  test('a worker crash is a retryable failure', async () => {
    const { env, queue } = setup({ backoffMs: 20 });
    const job = await queue.enqueue(TENANT, 'crashOnce', {});
    const done = await queue.settled(job.jobId, 5000);
    expect(done.state).toBe('completed');
    expect(done.attempts).toBe(2);
    expect(effectCount(env, job.jobId)).toBe(1);
  });

  test('jobs without a worker task (main-thread I/O) run up to SVC_JOB_IO_CONCURRENCY beside the pool jobs', async () => {
    const { queue } = setup({ concurrency: 1, ioConcurrency: 3 }, { start: false });
    let running = 0;
    let peak = 0;
    queue.define({
      kind: 'io-wait',
      prepare: async () => {
        peak = Math.max(peak, ++running);
        await delay(120);
        running--;
        return { done: null };
      },
      apply: () => ({ derivedNamespaces: [], viewKeys: [] }),
    });
    const io = await Promise.all(Array.from({ length: 7 }, () => queue.enqueue(TENANT, 'io-wait', {})));
    const pooled = await Promise.all(Array.from({ length: 2 }, () => queue.enqueue(TENANT, 'sleep', { ms: 300 })));
    queue.start();
    const done = await Promise.all([...io, ...pooled].map((j) => queue.settled(j.jobId, 10_000)));
    expect(done.every((r) => r.state === 'completed')).toBe(true);
    expect(peak).toBe(3);
    // The pool lane kept its own bound: its two jobs ran one after the other, while I/O jobs ran.
    const [a, b] = done.slice(7);
    expect(b!.startedAt!).toBeGreaterThanOrEqual(a!.finishedAt!);
    expect(done.slice(0, 7).some((r) => r.startedAt! >= a!.startedAt! && r.startedAt! < a!.finishedAt!)).toBe(true);
  });

  test('at most SVC_JOB_CONCURRENCY jobs run at once; due jobs run in order of nextRunAt, then creation', async () => {
    const { queue } = setup({ concurrency: 2 }, { threads: 4, start: false });
    const jobs: JobRecord[] = [];
    for (let i = 0; i < 6; i++) jobs.push(await queue.enqueue(TENANT, 'sleep', { ms: 150 }));
    let peak = 0;
    const sampler = setInterval(() => {
      const running = jobs.filter((j) => queue.get(TENANT, j.jobId)!.state === 'running').length;
      peak = Math.max(peak, running);
    }, 5);
    queue.start();
    const done = await Promise.all(jobs.map((j) => queue.settled(j.jobId, 10_000)));
    clearInterval(sampler);
    expect(done.every((r) => r.state === 'completed')).toBe(true);
    expect(peak).toBe(2);
    // From the records: no instant with more than two attempts between start and finish.
    for (const r of done) {
      const overlapping = done.filter((o) => o.startedAt! <= r.startedAt! && o.finishedAt! > r.startedAt!).length;
      expect(overlapping).toBeLessThanOrEqual(2);
    }
    const starts = done.map((r) => r.startedAt!);
    expect([...starts].sort((a, b) => a - b)).toEqual(starts); // creation order
  });

  test('enqueueSync inside a caller transaction commits or aborts with it', async () => {
    const { env, queue } = setup();
    const effects = effectsDb(env);
    let aborted: JobRecord | undefined;
    expect(() =>
      env.root.transactionSync(() => {
        effects.put('caller-write', 1);
        aborted = queue.enqueueSync(TENANT, 'double', { n: 1 });
        throw new Error('caller aborts');
      }),
    ).toThrow('caller aborts');
    expect(queue.get(TENANT, aborted!.jobId)).toBeUndefined();
    expect(effects.get('caller-write')).toBeUndefined();
    const committed = env.root.transactionSync(() => {
      effects.put('caller-write', 2);
      return queue.enqueueSync(TENANT, 'double', { n: 3 });
    });
    expect(effects.get('caller-write')).toBe(2);
    expect(queue.get(TENANT, committed.jobId)?.state).toBeDefined();
    expect((await queue.settled(committed.jobId, 5000)).outputs.derivedNamespaces).toEqual(['urn:test:ns:6']);
    // Inside an asynchronous transaction callback: seen once that batch commits.
    const inAsync = await env.root.transaction(() => queue.enqueueSync(TENANT, 'double', { n: 4 }));
    expect((await queue.settled(inAsync.jobId, 5000)).state).toBe('completed');
    // Outside any transaction it commits its own.
    const alone = queue.enqueueSync(TENANT, 'double', { n: 5 });
    expect(queue.get(TENANT, alone.jobId)?.state).toBe('pending');
    expect((await queue.settled(alone.jobId, 5000)).state).toBe('completed');
  });

  test('a long task keeps its lease renewed and is not taken up again', async () => {
    const { env, queue } = setup({ leaseMs: 300 });
    // The task runs 3 s from no earlier than the moment it was seen running: 700 ms later it still
    // runs however late that sighting was (up to 2.3 s), and the 300 ms lease was renewed meanwhile.
    const job = await queue.enqueue(TENANT, 'sleep', { ms: 3000 });
    const running = await until(() => queue.get(TENANT, job.jobId)!, (r) => r.state === 'running');
    await delay(700);
    const later = queue.get(TENANT, job.jobId)!;
    expect(later.state).toBe('running');
    expect(later.attempts).toBe(1);
    expect(later.lease!.owner).toBe(queue.owner);
    expect(later.lease!.until).toBeGreaterThan(running.lease!.until);
    const done = await queue.settled(job.jobId, 5000);
    expect(done.attempts).toBe(1);
    expect(effectCount(env, job.jobId)).toBe(1);
  });

  test('stop() waits for running jobs; jobs a stopped queue left running are taken up at once by the next queue', async () => {
    const first = setup({ leaseMs: 60_000 });
    const job = await first.queue.enqueue(TENANT, 'sleep', { ms: 300 });
    await until(() => first.queue.get(TENANT, job.jobId)!, (r) => r.state === 'running');
    await first.queue.stop();
    expect(first.queue.get(TENANT, job.jobId)!.state).toBe('completed');

    const abandoned = await (async () => {
      const q = new JobQueue({ env: first.env, pool: first.pool, config: { ...CONFIG, leaseMs: 60_000 }, log: new Logger('silent') });
      defineKinds(q, first.env);
      q.start();
      const j = await q.enqueue(TENANT, 'sleep', { firstMs: 1500, ms: 20 });
      await until(() => q.get(TENANT, j.jobId)!, (r) => r.state === 'running');
      await q.stop(50); // gives up waiting: the job keeps this queue's lease (60 s)
      expect(q.get(TENANT, j.jobId)!.state).toBe('running');
      return j;
    })();
    const started = Date.now();
    const next = new JobQueue({ env: first.env, pool: first.pool, config: CONFIG, log: new Logger('silent') });
    defineKinds(next, first.env);
    next.start();
    cleanups.push(() => next.stop(2000));
    const done = await next.settled(abandoned.jobId, 5000);
    expect(Date.now() - started).toBeLessThan(3000); // not after the 60 s lease
    expect(done.state).toBe('completed');
    expect(done.attempts).toBe(2);
    await delay(1700); // the abandoned first attempt ends meanwhile: its result is dropped
    expect(effectCount(first.env, abandoned.jobId)).toBe(1);
    expect(next.get(TENANT, abandoned.jobId)).toEqual(done);
  });

  test('kill -9 while a job runs: a new queue on the same catalog completes it, apply once', async () => {
    const root = tempRoot('svc-jobs-kill-');
    cleanups.push(() => fs.rmSync(root, { recursive: true, force: true }));
    const marker = path.join(root, 'started');
    const child = spawn(process.execPath, [CHILD, root, marker], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    await until(() => fs.existsSync(`${marker}.1`) || child.exitCode !== null, Boolean, 10_000);
    expect(child.exitCode, err).toBeNull();
    const { jobId, owner } = JSON.parse(out.trim());
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');

    const started = Date.now();
    const { env, queue } = setup({}, { root });
    const before = queue.get(TENANT, jobId)!;
    // Still running under the dead process's 60 s lease...
    expect(before.state).toBe('running');
    expect(before.lease!.owner).toBe(owner);
    expect(before.lease!.until).toBeGreaterThan(Date.now() + 30_000);
    // ...and taken up at once.
    const done = await queue.settled(jobId, 5000);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(done.state).toBe('completed');
    expect(done.attempts).toBe(2);
    expect(fs.existsSync(`${marker}.2`)).toBe(true);
    expect(effectCount(env, jobId)).toBe(1);
  });

  test('the engine owns a started queue configured from SVC_JOB_*', async () => {
    expect(loadConfig({ SVC_WORKERS: '3' }).jobs).toEqual({ concurrency: 3, ioConcurrency: 16, maxAttempts: 5, backoffMs: 1000, backoffMaxMs: 300_000, leaseMs: 300_000 });
    expect(loadConfig({ SVC_JOB_CONCURRENCY: '7', SVC_JOB_IO_CONCURRENCY: '9', SVC_JOB_MAX_ATTEMPTS: '2', SVC_JOB_BACKOFF: '250ms', SVC_JOB_BACKOFF_MAX: '10s', SVC_JOB_LEASE: '30s' }).jobs)
      .toEqual({ concurrency: 7, ioConcurrency: 9, maxAttempts: 2, backoffMs: 250, backoffMaxMs: 10_000, leaseMs: 30_000 });
    expect(() => loadConfig({ SVC_JOB_CONCURRENCY: '0' })).toThrow(/SVC_JOB_CONCURRENCY/);
    expect(() => loadConfig({ SVC_JOB_LEASE: '5' })).toThrow(/SVC_JOB_LEASE/);
    const root = tempRoot('svc-jobs-engine-');
    const engine = await Engine.open(loadConfig({ SVC_FS_ROOT: root, SVC_DURABILITY: 'relaxed', SVC_WORKERS: '2' }), new Logger('silent'));
    cleanups.push(async () => {
      await engine.close();
      fs.rmSync(root, { recursive: true, force: true });
    });
    defineKinds(engine.jobs, engine.catalog);
    const job = await engine.jobs.enqueue(TENANT, 'double', { n: 5 });
    const done = await engine.jobs.settled(job.jobId, 5000);
    expect(done.outputs.derivedNamespaces).toEqual(['urn:test:ns:10']);
    expect(effectCount(engine.catalog, job.jobId)).toBe(1);
  });
});
