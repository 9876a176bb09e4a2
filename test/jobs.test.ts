// The durable job queue (engine/jobs) on a real LMDB catalog through LmdbUnitStore and a real
// Piscina pool; task functions in test/helpers/job-tasks.mjs, kinds in test/helpers/job-kinds.mjs.
// Two queues on one store stand for two nodes sharing a store (each sees the other's writes and
// watch events), as pg-s3 nodes share PostgreSQL.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Piscina } from 'piscina';
import { afterEach, describe, expect, test } from 'vitest';
import { loadConfig, type JobConfig } from '../dist/engine/base/config.js';
import { Engine } from '../dist/engine/engine.js';
import { JobQueue, type JobRecord } from '../dist/engine/jobs/queue.js';
import { JOBS, writeJob } from '../dist/engine/jobs/records.js';
import { Logger } from '../dist/engine/base/log.js';
import { CatalogEnv } from '../dist/engine/store/index.js';
import { LmdbUnitStore } from '../dist/engine/store/lmdb/unit-store.js';
import type { UnitStore } from '../dist/engine/store/unit-store.js';
import { createWorkerPool } from '../dist/engine/worker-pool.js';
import { EFFECTS, defineKinds, effectCount } from './helpers/job-kinds.mjs';
import { tempRoot } from './helpers/server.js';

const TENANT = 'tenant-a';
const OTHER = 'tenant-b';
const CHILD = fileURLToPath(new URL('./helpers/job-child.mjs', import.meta.url));
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const CONFIG: JobConfig = { concurrency: 2, ioConcurrency: 4, maxAttempts: 5, backoffMs: 100, backoffMaxMs: 1000, leaseMs: 2000 };
const silent = new Logger('silent');

interface Setup {
  root: string;
  env: CatalogEnv;
  store: UnitStore;
  pool: Piscina;
  queue: JobQueue;
}

const cleanups: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Options {
  root?: string;
  threads?: number;
  hooks?: { beforeApply?: (job: JobRecord, output: unknown) => void | Promise<void> };
  start?: boolean;
  node?: string;
}

/** A catalog in a temp dir (or `root`), its unit store, a pool and a queue with the test kinds, started. */
async function setup(config: Partial<JobConfig> = {}, options: Options = {}): Promise<Setup> {
  const root = options.root ?? tempRoot('svc-jobs-');
  const env = CatalogEnv.open(root, 'relaxed');
  const store = new LmdbUnitStore(env);
  const pool = createWorkerPool({ minThreads: options.threads ?? 2, maxThreads: options.threads ?? 2 });
  const queue = new JobQueue({ store, pool, config: { ...CONFIG, ...config }, log: silent, ...(options.node ? { node: options.node } : {}) });
  defineKinds(queue, options.hooks as never);
  cleanups.push(async () => {
    await queue.stop(2000);
    await pool.destroy();
    await env.close();
    if (!options.root) fs.rmSync(root, { recursive: true, force: true });
  });
  if (options.start !== false) await queue.start();
  return { root, env, store, pool, queue };
}

/** Another queue ("node") on the same store and pool, with the test kinds; stopped at cleanup. */
async function peer(of: Setup, config: Partial<JobConfig> = {}, options: Omit<Options, 'root' | 'threads'> = {}): Promise<JobQueue> {
  const queue = new JobQueue({ store: of.store, pool: of.pool, config: { ...CONFIG, ...config }, log: silent, ...(options.node ? { node: options.node } : {}) });
  defineKinds(queue, options.hooks as never);
  cleanups.push(() => queue.stop(2000));
  if (options.start !== false) await queue.start();
  return queue;
}

/** Polls until `check` holds (or fails after `ms`). */
async function until<T>(probe: () => T | Promise<T>, check: (v: T) => boolean, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (check(v)) return v;
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms: ${JSON.stringify(v)}`);
    await delay(5);
  }
}

/** Rewrites a running job's lease (another owner, another end), as a node that lost it would find it. */
async function setLease(store: UnitStore, jobId: string, lease: { owner: string; until: number }): Promise<void> {
  await store.run(async (unit) => {
    const current = (await unit.get(JOBS, jobId))!;
    writeJob(unit, current, { ...current, lease });
  });
}

describe('job queue', () => {
  test('enqueue → completed: durable pending record, task output through apply, outputs persisted, effects once', async () => {
    const { env, queue } = await setup({}, { start: false });
    const job = await queue.enqueue(TENANT, 'double', { n: 21 });
    expect(job).toMatchObject({ tenant: TENANT, kind: 'double', input: { n: 21 }, state: 'pending', attempts: 0, maxAttempts: 5, error: null, outputs: { derivedNamespaces: [], viewKeys: [] } });
    expect(job.jobId).toMatch(UUID_V7);
    expect(job.nextRunAt).toBe(job.createdAt);
    expect(await queue.get(TENANT, job.jobId)).toEqual(job); // committed before enqueue resolved
    await queue.start();
    const done = await queue.settled(job.jobId, 5000);
    expect(done.state).toBe('completed');
    expect(done.attempts).toBe(1);
    expect(done.error).toBeNull();
    expect(done.lease).toBeUndefined();
    expect(done.startedAt).toBeGreaterThanOrEqual(job.createdAt);
    expect(done.finishedAt).toBeGreaterThanOrEqual(done.startedAt!);
    expect(done.outputs).toEqual({ derivedNamespaces: ['urn:test:ns:42'], viewKeys: [`v1:${job.jobId}`] });
    expect(await queue.get(TENANT, job.jobId)).toEqual(done);
    expect(effectCount(env, job.jobId)).toBe(1);
    // Settled again: the terminal record at once.
    expect(await queue.settled(job.jobId)).toEqual(done);
  });

  test("another tenant's job is undefined; unknown ids and kinds", async () => {
    const { queue } = await setup();
    const job = await queue.enqueue(TENANT, 'double', { n: 1 });
    expect(await queue.get(OTHER, job.jobId)).toBeUndefined();
    expect((await queue.get(TENANT, job.jobId))?.jobId).toBe(job.jobId);
    expect(await queue.get(TENANT, '01900000-0000-7000-8000-000000000000')).toBeUndefined();
    await expect(queue.enqueue(TENANT, 'no-such-kind', {})).rejects.toThrow(/unknown job kind/);
    await expect(queue.enqueue('', 'double', {})).rejects.toThrow(/tenant/);
    await queue.settled(job.jobId, 5000);
  });

  test('a retryable failure returns to pending with attempts 1 and nextRunAt in the future, then completes', async () => {
    const { env, queue } = await setup({ backoffMs: 400 });
    const job = await queue.enqueue(TENANT, 'flaky', { failures: 1 });
    const retry = await until(() => queue.get(TENANT, job.jobId), (r) => r!.attempts === 1 && r!.state === 'pending');
    const seenAt = Date.now();
    expect(retry!.nextRunAt).toBeGreaterThan(seenAt);
    expect(retry!.nextRunAt - retry!.startedAt!).toBeGreaterThanOrEqual(400);
    // An internal error: a generic message, no stack or detail.
    expect(retry!.error).toEqual({ code: 'internal_error', message: 'The job failed because of an internal error' });
    expect(retry!.lease).toBeUndefined();
    expect(retry!.finishedAt).toBeUndefined();
    const done = await queue.settled(job.jobId, 5000);
    expect(done.state).toBe('completed');
    expect(done.attempts).toBe(2);
    expect(done.startedAt).toBeGreaterThanOrEqual(retry!.nextRunAt);
    expect(done.error).toBeNull();
    expect(effectCount(env, job.jobId)).toBe(1);
  });

  test('a retryable JobError keeps its code; backoff doubles per attempt', async () => {
    const { queue } = await setup({ backoffMs: 100 });
    const job = await queue.enqueue(TENANT, 'flaky', { failures: 2, code: 'source_unavailable' });
    const first = (await until(() => queue.get(TENANT, job.jobId), (r) => r!.attempts === 1 && r!.state === 'pending'))!;
    expect(first.error).toEqual({ code: 'source_unavailable', message: 'attempt 1 refused' });
    const second = (await until(() => queue.get(TENANT, job.jobId), (r) => r!.attempts === 2 && r!.state === 'pending'))!;
    // 100 ms after the first failure, 200 ms after the second (so at least that after each attempt's start).
    expect(first.nextRunAt - first.startedAt!).toBeGreaterThanOrEqual(100);
    expect(second.nextRunAt - second.startedAt!).toBeGreaterThanOrEqual(200);
    expect(second.error).toEqual({ code: 'source_unavailable', message: 'attempt 2 refused' });
    expect((await queue.settled(job.jobId, 5000)).attempts).toBe(3);
  });

  test('after SVC_JOB_MAX_ATTEMPTS attempts the job is dead with its error; no effects', async () => {
    const { env, queue } = await setup({ maxAttempts: 3, backoffMs: 20 });
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
    expect(await queue.get(TENANT, job.jobId)).toEqual(dead); // not run again
  });

  test('a non-retryable JobError in the task fails the job at once', async () => {
    const { env, queue } = await setup();
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
    const { env, queue } = await setup({ backoffMs: 20 }, {
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
    expect(effectCount(env, retried.jobId)).toBe(1); // the two discarded units left nothing
    const refused = await queue.enqueue(TENANT, 'double', { n: 2, applyRefuses: true });
    const failed = await queue.settled(refused.jobId, 5000);
    expect(failed.state).toBe('failed');
    expect(failed.error).toEqual({ code: 'conflict', message: 'The target changed' });
    expect(failed.outputs).toEqual({ derivedNamespaces: [], viewKeys: [] });
    expect(effectCount(env, refused.jobId)).toBe(0);
  });

  test('a worker crash is a retryable failure', async () => {
    const { env, queue } = await setup({ backoffMs: 20 });
    const job = await queue.enqueue(TENANT, 'crashOnce', {});
    const done = await queue.settled(job.jobId, 5000);
    expect(done.state).toBe('completed');
    expect(done.attempts).toBe(2);
    expect(effectCount(env, job.jobId)).toBe(1);
  });

  test('jobs without a worker task (main-thread I/O) run up to SVC_JOB_IO_CONCURRENCY beside the pool jobs', async () => {
    const { queue } = await setup({ concurrency: 1, ioConcurrency: 3 }, { start: false });
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
      apply: async () => ({ derivedNamespaces: [], viewKeys: [] }),
    });
    const io = await Promise.all(Array.from({ length: 7 }, () => queue.enqueue(TENANT, 'io-wait', {})));
    const pooled = await Promise.all(Array.from({ length: 2 }, () => queue.enqueue(TENANT, 'sleep', { ms: 300 })));
    await queue.start();
    const done = await Promise.all([...io, ...pooled].map((j) => queue.settled(j.jobId, 10_000)));
    expect(done.every((r) => r.state === 'completed')).toBe(true);
    expect(peak).toBe(3);
    // The pool lane kept its own bound: its two jobs ran one after the other, while I/O jobs ran.
    const [a, b] = done.slice(7);
    expect(b!.startedAt!).toBeGreaterThanOrEqual(a!.finishedAt!);
    expect(done.slice(0, 7).some((r) => r.startedAt! >= a!.startedAt! && r.startedAt! < a!.finishedAt!)).toBe(true);
  });

  test('at most SVC_JOB_CONCURRENCY jobs run at once; due jobs run in order of nextRunAt, then creation', async () => {
    const { store, queue } = await setup({ concurrency: 2 }, { threads: 4, start: false });
    const jobs: JobRecord[] = [];
    for (let i = 0; i < 6; i++) jobs.push(await queue.enqueue(TENANT, 'sleep', { ms: 150 }));
    let peak = 0;
    const sampler = setInterval(() => {
      void Promise.all(jobs.map((j) => store.get(JOBS, j.jobId))).then((records) => {
        peak = Math.max(peak, records.filter((r) => r!.state === 'running').length);
      });
    }, 5);
    await queue.start();
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

  test("enqueueIn joins the caller's unit: it commits or aborts with it; startNow runs it under this queue's lease once committed", async () => {
    const { env, store, queue } = await setup();
    let aborted: JobRecord | undefined;
    await expect(
      store.run(async (unit) => {
        unit.put(EFFECTS, 'caller-write', 1);
        aborted = queue.enqueueIn(unit, TENANT, 'double', { n: 1 });
        throw new Error('caller aborts');
      }),
    ).rejects.toThrow('caller aborts');
    expect(await queue.get(TENANT, aborted!.jobId)).toBeUndefined();
    expect(effectCount(env, 'caller-write')).toBe(0);
    const committed = await store.run(async (unit) => {
      unit.put(EFFECTS, 'caller-write', 2);
      return queue.enqueueIn(unit, TENANT, 'double', { n: 3 });
    });
    expect(effectCount(env, 'caller-write')).toBe(2);
    expect((await queue.get(TENANT, committed.jobId))?.state).toBeDefined();
    expect((await queue.settled(committed.jobId, 5000)).outputs.derivedNamespaces).toEqual(['urn:test:ns:6']);
    // startNow: recorded running (attempt 1, this queue's lease) in the caller's unit.
    const now = await store.run(async (unit) => queue.enqueueIn(unit, TENANT, 'sleep', { ms: 50 }, { startNow: true }));
    expect(now).toMatchObject({ state: 'running', attempts: 1, lease: { owner: queue.owner } });
    const done = await queue.settled(now.jobId, 5000);
    expect(done).toMatchObject({ state: 'completed', attempts: 1 });
    expect(effectCount(env, now.jobId)).toBe(1);
    // startNow in a unit that aborts: no job, nothing started.
    let gone: JobRecord | undefined;
    await expect(store.run(async (unit) => { gone = queue.enqueueIn(unit, TENANT, 'sleep', { ms: 50 }, { startNow: true }); throw new Error('no'); })).rejects.toThrow('no');
    await delay(200);
    expect(await queue.get(TENANT, gone!.jobId)).toBeUndefined();
    expect(effectCount(env, gone!.jobId)).toBe(0);
  });

  test('a long task keeps its lease renewed and is not taken up again', async () => {
    const { env, queue } = await setup({ leaseMs: 300 });
    // The task runs 3 s from no earlier than the moment it was seen running: 700 ms later it still
    // runs however late that sighting was (up to 2.3 s), and the 300 ms lease was renewed meanwhile.
    const job = await queue.enqueue(TENANT, 'sleep', { ms: 3000 });
    const running = (await until(() => queue.get(TENANT, job.jobId), (r) => r!.state === 'running'))!;
    await delay(700);
    const later = (await queue.get(TENANT, job.jobId))!;
    expect(later.state).toBe('running');
    expect(later.attempts).toBe(1);
    expect(later.lease!.owner).toBe(queue.owner);
    expect(later.lease!.until).toBeGreaterThan(running.lease!.until);
    const done = await queue.settled(job.jobId, 5000);
    expect(done.attempts).toBe(1);
    expect(effectCount(env, job.jobId)).toBe(1);
  });

  test("stop() waits for running jobs; a job a stopped queue left running keeps its lease until it expires, then another node takes it over", async () => {
    const first = await setup({ leaseMs: 60_000 });
    const job = await first.queue.enqueue(TENANT, 'sleep', { ms: 300 });
    await until(() => first.queue.get(TENANT, job.jobId), (r) => r!.state === 'running');
    await first.queue.stop();
    expect((await first.queue.get(TENANT, job.jobId))!.state).toBe('completed');

    const q = await peer(first, { leaseMs: 1500 });
    const j = await q.enqueue(TENANT, 'sleep', { firstMs: 2500, ms: 20 });
    const held = (await until(() => q.get(TENANT, j.jobId), (r) => r!.state === 'running'))!;
    await q.stop(50); // gives up waiting: the job keeps this queue's lease
    const next = await peer(first);
    await delay(Math.max(0, held.lease!.until - Date.now() - 300));
    // Not expired yet: another node leaves it alone (its owner may be alive).
    expect(await next.get(TENANT, j.jobId)).toMatchObject({ state: 'running', attempts: 1, lease: { owner: q.owner } });
    const done = await next.settled(j.jobId, 5000);
    // Taken over about when the lease ended (lease + at most one poll).
    expect(done.startedAt!).toBeGreaterThanOrEqual(held.lease!.until);
    expect(done.startedAt! - held.lease!.until).toBeLessThan(1500);
    expect(done).toMatchObject({ state: 'completed', attempts: 2, error: null });
    await delay(1200); // the abandoned first attempt ends meanwhile: its result is dropped
    expect(effectCount(first.env, j.jobId)).toBe(1);
    expect(await next.get(TENANT, j.jobId)).toEqual(done);
  });

  test('kill -9 while a job runs: the restarted node (same node id) takes its earlier leases over at once, apply once', async () => {
    const root = tempRoot('svc-jobs-kill-');
    cleanups.push(() => fs.rmSync(root, { recursive: true, force: true }));
    const marker = path.join(root, 'started');
    const child = spawn(process.execPath, [CHILD, root, marker, 'node-a', '60000'], { stdio: ['ignore', 'pipe', 'pipe'] });
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
    const { env, queue } = await setup({}, { root, node: 'node-a', start: false });
    const before = (await queue.get(TENANT, jobId))!;
    // Still running under the dead process's 60 s lease...
    expect(before.state).toBe('running');
    expect(before.lease!.owner).toBe(owner);
    expect(owner.startsWith('node-a/')).toBe(true);
    expect(before.lease!.until).toBeGreaterThan(Date.now() + 30_000);
    await queue.start();
    // ...and taken up at once: it is this node's own earlier lease.
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
    const engine = await Engine.open(loadConfig({ SVC_FS_ROOT: root, SVC_DURABILITY: 'relaxed', SVC_WORKERS: '2' }), silent);
    cleanups.push(async () => {
      await engine.close();
      fs.rmSync(root, { recursive: true, force: true });
    });
    defineKinds(engine.jobs);
    const job = await engine.jobs.enqueue(TENANT, 'double', { n: 5 });
    const done = await engine.jobs.settled(job.jobId, 5000);
    expect(done.outputs.derivedNamespaces).toEqual(['urn:test:ns:10']);
    expect(effectCount(engine.catalog, job.jobId)).toBe(1);
  });
});

describe('job queue on a shared store (two nodes)', () => {
  test('40 jobs enqueued on either node run exactly once; both nodes take some', async () => {
    const a = await setup({ concurrency: 2, ioConcurrency: 3 }, { threads: 4, hooks: { beforeApply: () => void applied.a++ } });
    const applied = { a: 0, b: 0 };
    const b = await peer(a, { concurrency: 2, ioConcurrency: 3 }, { hooks: { beforeApply: () => void applied.b++ } });
    const runs = new Map<string, number>();
    for (const queue of [a.queue, b]) {
      queue.define({
        kind: 'counted',
        prepare: async (job) => {
          runs.set(job.jobId, (runs.get(job.jobId) ?? 0) + 1);
          await delay(10);
          return { done: null };
        },
        apply: async (unit, job) => {
          unit.put(EFFECTS, job.jobId, ((await unit.get(EFFECTS, job.jobId)) ?? 0) + 1);
          return { derivedNamespaces: [], viewKeys: [] };
        },
      });
    }
    const jobs = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a.queue : b).enqueue(TENANT, i % 4 < 2 ? 'counted' : 'double', { n: i })));
    const done = await Promise.all(jobs.map((j) => (j.jobId.charCodeAt(35) % 2 ? a.queue : b).settled(j.jobId, 20_000)));
    expect(done.every((r) => r.state === 'completed' && r.attempts === 1)).toBe(true);
    for (const j of jobs) expect(effectCount(a.env, j.jobId)).toBe(1);
    for (const j of jobs.filter((j) => j.kind === 'counted')) expect(runs.get(j.jobId)).toBe(1);
    expect(applied.a + applied.b).toBe(20); // the 'double' jobs
    expect(applied.a).toBeGreaterThan(0);
    expect(applied.b).toBeGreaterThan(0);
  });

  test("a dead node's job is left alone while its lease is renewed, then taken over by the live node once it expires", async () => {
    const live = await setup();
    const dying = await peer(live, { leaseMs: 600 });
    // Enqueued on the dying node with startNow: it runs there (first attempt 4 s).
    const job = await live.store.run(async (unit) => dying.enqueueIn(unit, TENANT, 'sleep', { firstMs: 4000, ms: 20 }, { startNow: true }));
    await delay(1500); // past the first lease: renewed, so the live node leaves it alone
    const held = (await live.queue.get(TENANT, job.jobId))!;
    expect(held).toMatchObject({ state: 'running', attempts: 1, lease: { owner: dying.owner } });
    expect(held.lease!.until).toBeGreaterThan(job.lease!.until);
    await dying.stop(0); // dies: no more renewals, its late result is dropped
    const diedAt = Date.now();
    const done = await live.queue.settled(job.jobId, 5000);
    expect(done).toMatchObject({ state: 'completed', attempts: 2 });
    expect(Date.now() - diedAt).toBeLessThan(600 + 1000 + 500); // lease + one poll (+ slack)
    await delay(2700); // the dead node's first attempt ends meanwhile
    expect(effectCount(live.env, job.jobId)).toBe(1);
  });

  test('a job that ran twice (lease lost during apply) commits its effects once: the completion is conditional on the lease', async () => {
    let s: Setup | undefined;
    let bDone: JobRecord | undefined;
    const hooked: number[] = [];
    s = await setup({}, {
      hooks: {
        beforeApply: async (job) => {
          hooked.push(job.attempts);
          if (job.attempts !== 1) return;
          // While A's completion unit holds its read of the record: the lease is lost (another
          // owner, expired) and B takes the job over and completes it.
          await setLease(s!.store, job.jobId, { owner: 'ghost', until: Date.now() - 1 });
          bDone = await b.settled(job.jobId, 5000);
        },
      },
      start: false,
    });
    const b = await peer(s, {}, { start: false });
    const job = await s.queue.enqueue(TENANT, 'double', { n: 4 });
    await s.queue.start(); // A claims it first
    await until(() => s!.queue.get(TENANT, job.jobId), (r) => r!.state === 'running');
    await b.start();
    const final = await s.queue.settled(job.jobId, 10_000);
    await until(() => bDone, Boolean);
    expect(final).toMatchObject({ state: 'completed', attempts: 2 });
    expect(bDone).toEqual(final);
    expect(hooked).toEqual([1, 2]); // A's apply ran (and was discarded), B's committed
    await delay(100);
    expect(effectCount(s.env, job.jobId)).toBe(1);
    expect(await s.queue.get(TENANT, job.jobId)).toEqual(final);
  });

  test("settled() on one node wakes when another node completes the job (the store's watch, not the poll)", async () => {
    const a = await setup();
    const b = await peer(a, {}, { start: false }); // an API node: not dispatching
    const job = await a.queue.enqueue(TENANT, 'sleep', { ms: 300 });
    const times: Record<string, number> = {};
    const [onA, onB] = await Promise.all([
      a.queue.settled(job.jobId, 5000).then((r) => ((times.a = Date.now()), r)),
      b.settled(job.jobId, 5000).then((r) => ((times.b = Date.now()), r)),
    ]);
    expect(onB).toEqual(onA);
    expect(onB.state).toBe('completed');
    expect(Math.abs(times.b! - times.a!)).toBeLessThan(200); // the poll would be up to 1000 ms later
  });
});

describe('job lists', () => {
  test('by tenant, document and state: newest first, paginated with the last job id', async () => {
    const { queue } = await setup({}, { start: false });
    const made: JobRecord[] = [];
    for (let i = 0; i < 9; i++) {
      const documentId = i % 3 === 0 ? 'doc-1' : i % 3 === 1 ? 'doc-2' : undefined;
      made.push(await queue.enqueue(TENANT, i % 2 ? 'refuse' : 'double', { n: i, code: 'no', message: 'no', ...(documentId ? { documentId } : {}) }));
    }
    await queue.enqueue(OTHER, 'double', { n: 1, documentId: 'doc-1' });
    const ids = (records: JobRecord[]) => records.map((r) => r.jobId);
    const newest = [...made].reverse();
    const pages = async (filter: Parameters<JobQueue['list']>[1], limit: number) => {
      const out: JobRecord[][] = [];
      let after: string | undefined;
      do {
        const page = await queue.list(TENANT, filter, limit, after);
        out.push(page.jobs);
        after = page.next;
        if (after !== undefined) expect(after).toBe(page.jobs[page.jobs.length - 1]!.jobId);
      } while (after !== undefined);
      return out;
    };
    // The tenant's: 4 + 4 + 1.
    const all = await pages({}, 4);
    expect(all.map((p) => p.length)).toEqual([4, 4, 1]);
    expect(ids(all.flat())).toEqual(ids(newest));
    // One document's.
    expect(ids((await pages({ documentId: 'doc-1' }, 2)).flat())).toEqual(ids(newest.filter((r) => (r.input as { documentId?: string }).documentId === 'doc-1')));
    expect((await queue.list(OTHER, { documentId: 'doc-1' }, 10)).jobs).toHaveLength(1);
    // By state, as the jobs run.
    expect(ids((await pages({ state: 'pending' }, 5)).flat())).toEqual(ids(newest));
    await queue.start();
    await Promise.all(made.map((r) => queue.settled(r.jobId, 5000)));
    expect((await queue.list(TENANT, { state: 'pending' }, 5)).jobs).toEqual([]);
    const failed = (await pages({ state: 'failed' }, 3)).flat();
    expect(ids(failed)).toEqual(ids(newest.filter((r) => r.kind === 'refuse')));
    expect(failed.every((r) => r.state === 'failed')).toBe(true);
    const completed = (await pages({ state: 'completed', documentId: 'doc-1' }, 1)).flat();
    expect(ids(completed)).toEqual(ids(newest.filter((r) => r.kind === 'double' && (r.input as { documentId?: string }).documentId === 'doc-1')));
  });

  test('a data directory from before the list indexes: start() builds them from the jobs', async () => {
    const first = await setup({}, { start: false });
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await first.queue.enqueue(TENANT, 'double', { n: i, documentId: 'doc-9' }));
    // As an older version left it: jobs and jobs_due only.
    for (const name of ['jobs_by_tenant', 'jobs_by_document', 'jobs_by_state', 'jobs_meta']) await first.env.database(name).clearAsync();
    const again = await peer(first, {}, { start: false });
    expect((await again.list(TENANT, {}, 10)).jobs).toEqual([]);
    await again.start();
    expect((await again.list(TENANT, {}, 10)).jobs.map((r) => r.jobId)).toEqual(made.map((r) => r.jobId).reverse());
    expect((await again.list(TENANT, { documentId: 'doc-9' }, 2)).next).toBe(made[3]!.jobId);
    await Promise.all(made.map((r) => again.settled(r.jobId, 5000)));
    expect((await again.list(TENANT, { state: 'completed' }, 10)).jobs).toHaveLength(5);
    expect((await again.list(TENANT, { state: 'pending' }, 10)).jobs).toHaveLength(0);
  });
});
