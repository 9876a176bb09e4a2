// The durable job queue (document platform, issue 5; on units of work for PostgreSQL, "Jobs on
// PostgreSQL"). No HTTP here.
//
// A job is `pending → running → completed`; a retryable failure returns it to `pending` with an
// exponential backoff, after its last attempt it is `dead`; a non-retryable failure is `failed`.
// A job kind's task (pure, idempotent) runs on the Piscina pool; its `apply` runs on the main
// thread in the unit of work that marks the job completed, so the job's effects and its
// completion commit together or not at all.
//
// Design. Jobs are records in the node's UnitStore (`jobs`, the due index `jobs_due`, list
// indexes; engine/jobs/records.ts), not a dedicated queue such as pg-boss or graphile-worker:
// those keep their own tables and transactions, so a job's effects (document, view, workflow
// tables, all in the UnitStore) and its completion could not commit atomically, and the `fs`
// backend has no PostgreSQL at all. Coordination between nodes is by conditional units alone:
// - Claim: a unit scans the due index without a precondition (a scan for candidates), reads each
//   candidate's record (a precondition) and writes it running under a lease naming this queue.
//   Two nodes claiming one job: one unit conflicts, runs again, sees it running and skips it.
// - Lease: renewed by its queue while the attempt runs; one whose `until` has passed is any
//   node's to take over (back to pending, then claimed). A lease that has not expired is left
//   alone even if its owner is unknown here: that owner may be a live node. Only leases of this
//   very node's earlier process (same `node`, other owner) are taken over at once at start.
// - Completion: the unit reads the record (precondition) and commits apply's writes only if
//   this attempt still holds the lease (owner and attempt): an attempt that ran twice commits
//   its effects once.
// - Time: lease ends, due times and stamps are the injected Clock's (the database's on pg-s3).
// - Waking: `store.watch` on `jobs_due` wakes the dispatcher (on PostgreSQL on every node) and
//   on `jobs` the settled() waiters; a poll every IDLE_POLL_MS is the fallback.
// One file above 400 lines: claim, renewal, completion and takeover share the lease rules and
// are read together; records and lists are in records.ts and listing.ts, what a kind is in kinds.ts.

import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { v7 as uuidv7 } from 'uuid';
import { type Clock, systemClock } from '../base/clock.js';
import type { Unit, UnitStore } from '../store/unit-store.js';
import { JobError, asJobFailure, type JobFailure } from './errors.js';
import type { JobKind, JobQueueDeps } from './kinds.js';
import { backfillIndexes, type JobFilter, listJobs } from './listing.js';
import { type DueKey, JOBS, JOBS_DUE, type JobProgress, type JobRecord, TERMINAL, checkOutputs, writeJob } from './records.js';
import { moduleUrl, type TaskCall, type TaskOutcome } from './task-runner.js';

export { JobError, type JobFailure } from './errors.js';
export type { JobTaskPayload } from './task-runner.js';
export type { JobFilter } from './listing.js';
export type { JobOutputs, JobProgress, JobRecord, JobState } from './records.js';
export type { JobKind, JobQueueDeps } from './kinds.js';

/**
 * Jobs with a worker task share the pool (SVC_JOB_CONCURRENCY); kinds whose work is the main
 * thread's awaiting I/O (no task: a legacy import streaming a file into the ingest) would idle
 * the pool's slots, so they have a bound of their own (SVC_JOB_IO_CONCURRENCY).
 */
type Lane = 'pool' | 'io';

interface Run {
  lane: Lane;
  attempt: number;
  renewal?: NodeJS.Timeout;
  done: Promise<void>;
}

type Leased = JobRecord & { lease: { owner: string; until: number } };

const RUNNER = fileURLToPath(new URL('./task-runner.js', import.meta.url));
/** The dispatcher and the settled() waiters look again at least this often (a missed watch event). */
export const IDLE_POLL_MS = 1000;
/** How long stop() waits for running jobs by default. */
const STOP_GRACE_MS = 10_000;
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Candidates one claim unit looks at beyond the free slots (entries of kinds this node lacks). */
const SCAN_SLACK = 32;
const INTERRUPTED = { code: 'interrupted', message: 'The job was interrupted (its process stopped or lost its lease) and runs again' };
const INTERRUPTED_LAST = { code: 'interrupted', message: 'The job was interrupted on its last attempt' };
const INTERNAL = { code: 'internal_error', message: 'The job failed because of an internal error' };

export class JobQueue {
  /** Names this queue's leases; unique per process. */
  readonly owner: string;
  private readonly store: UnitStore;
  private readonly clock: Clock;
  private readonly kinds = new Map<string, JobKind>();
  private readonly active = new Map<string, Run>();
  private readonly waiters = new Map<string, Set<(record: JobRecord | Error) => void>>();
  private readonly bounds: Record<Lane, number>;
  private readonly unwatch: Array<() => void> = [];
  private started = false;
  private stopping = false;
  /** After stop(): nothing is written any more (late results of abandoned attempts are dropped). */
  private closed = false;
  /** The first pass takes over this node's earlier leases (deps.node) whether expired or not. */
  private recoverOwn = false;
  private pumping?: Promise<void>;
  private again = false;
  private timer?: NodeJS.Timeout;
  private checking?: Promise<void>;
  private recheck = false;
  private watchingJobs = false;

  constructor(private readonly deps: JobQueueDeps) {
    this.store = deps.store;
    this.clock = deps.clock ?? systemClock;
    this.owner = deps.node === undefined ? randomUUID() : `${deps.node}/${randomUUID()}`;
    this.bounds = { pool: deps.config.concurrency >= 1 ? deps.config.concurrency : deps.pool.maxThreads, io: deps.config.ioConcurrency };
  }

  /** Registers a kind; its due jobs are dispatched from now on. */
  define<O = unknown>(kind: JobKind<O>): void {
    if (typeof kind.kind !== 'string' || kind.kind === '') throw new Error('a job kind needs a name');
    if (this.kinds.has(kind.kind)) throw new Error(`job kind ${kind.kind} is already defined`);
    if (!kind.task && !kind.prepare) throw new Error(`job kind ${kind.kind} needs a task or a prepare step that completes it`);
    if (kind.task) moduleUrl(kind.task.filename); // a relative path would resolve against the worker's directory
    this.kinds.set(kind.kind, kind as unknown as JobKind);
    this.wake();
  }

  /** Records a pending job (or, startNow, a running one) in a unit of its own; committed before it resolves. */
  async enqueue(tenant: string, kind: string, input: unknown, options: { startNow?: boolean; within?: (unit: Unit, job: JobRecord) => Promise<void> } = {}): Promise<JobRecord> {
    this.newRecord(tenant, kind, input); // refuse an unknown kind or tenant before the unit
    // `within`: the caller's writes in the job's unit (an Idempotency-Key's answer).
    return this.store.run(async (unit) => {
      const job = this.enqueueIn(unit, tenant, kind, input, options);
      await options.within?.(unit, job);
      return job;
    });
  }

  /**
   * Records a job in the caller's unit: it commits (or not) with the caller's writes. `startNow`:
   * recorded as running under this queue's lease when a slot of its lane is free, and started
   * once the unit has committed (no round through the dispatcher); otherwise pending, and the
   * dispatcher is woken once the unit has committed. The unit may run this more than once (a
   * conflict): each run makes a new job id, only the committed one exists.
   */
  enqueueIn(unit: Unit, tenant: string, kind: string, input: unknown, options: { startNow?: boolean } = {}): JobRecord {
    const record = this.newRecord(tenant, kind, input);
    if (options.startNow && this.started && !this.stopping && this.freeSlots(this.laneOf(kind)) > 0) {
      const running = this.running(record, this.clock.now());
      writeJob(unit, undefined, running);
      // Unconditionally once committed: the record is this queue's to run (a few concurrent
      // startNow requests may briefly exceed the lane's bound).
      unit.afterCommit(() => this.execute(running));
      return running;
    }
    writeJob(unit, undefined, record);
    unit.afterCommit(() => this.wake());
    return record;
  }

  /**
   * In `unit` (so the work it stands for and the progress commit together): the running attempt
   * `job` records its progress. A JobError (retryable) once the attempt no longer holds the job.
   */
  async recordProgress(unit: Unit, job: JobRecord, progress: JobProgress): Promise<void> {
    const current = await unit.get(JOBS, job.jobId);
    if (!current || current.state !== 'running' || current.lease?.owner !== this.owner || current.attempts !== job.attempts) {
      throw new JobError('lease_lost', 'The attempt no longer holds the job; another attempt goes on from its last progress', true);
    }
    writeJob(unit, current, { ...current, progress });
  }

  /** The job as its tenant sees it; another tenant's job is undefined. */
  async get(tenant: string, jobId: string): Promise<JobRecord | undefined> {
    const record = await this.store.get(JOBS, jobId);
    return record && record.tenant === tenant ? record : undefined;
  }

  /** The tenant's jobs newest first after job id `after` (engine/jobs/listing.ts). */
  list(tenant: string, filter: JobFilter, limit: number, after?: string): Promise<{ jobs: JobRecord[]; next?: string }> {
    return listJobs(this.store, tenant, filter, limit, after);
  }

  /**
   * Begins dispatching (after building the list indexes of an older data directory). Resolves
   * once dispatching has begun; never rejects (a failed backfill is logged and tried at the next start).
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.recoverOwn = this.deps.node !== undefined;
    this.unwatch.push(this.store.watch(JOBS_DUE.name, () => this.wake()));
    try {
      await backfillIndexes(this.store, this.deps.log);
    } catch (err) {
      this.deps.log.error('jobs: list indexes not built; lists may miss older jobs', { err: String((err as Error)?.stack ?? err) });
    }
    this.wake();
  }

  /**
   * Takes no new jobs and waits up to `graceMs` for the running ones. Jobs still running then
   * keep their lease; once it expires any node (this one after a restart, too) takes them over.
   */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearTimeout(this.timer);
    await this.pumping;
    const runs = [...this.active.values()].map((r) => r.done);
    if (runs.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const finished = await Promise.race([
        Promise.all(runs).then(() => true),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), graceMs))),
      ]);
      clearTimeout(timer);
      if (!finished) this.deps.log.warn('jobs: stopped while jobs still ran; they run again once their lease expires', { jobs: [...this.active.keys()] });
    }
    this.closed = true;
    for (const unwatch of this.unwatch.splice(0)) unwatch();
    for (const run of this.active.values()) clearInterval(run.renewal);
    for (const [jobId, set] of this.waiters) for (const notify of [...set]) notify(new Error(`job queue stopped before job ${jobId} settled`));
  }

  /** Resolves with the record once the job is completed, failed or dead; rejects after `timeoutMs`. */
  async settled(jobId: string, timeoutMs?: number): Promise<JobRecord> {
    const current = await this.store.get(JOBS, jobId);
    if (!current) throw new Error(`no job ${jobId}`);
    if (TERMINAL.has(current.state)) return current;
    if (this.closed) throw new Error(`job queue stopped before job ${jobId} settled`);
    return new Promise<JobRecord>((resolve, reject) => {
      let set = this.waiters.get(jobId);
      if (!set) this.waiters.set(jobId, (set = new Set()));
      const notify = (result: JobRecord | Error) => {
        clearTimeout(timeout);
        clearInterval(poll);
        set!.delete(notify);
        if (set!.size === 0 && this.waiters.get(jobId) === set) this.waiters.delete(jobId);
        if (result instanceof Error) reject(result);
        else resolve(result);
      };
      set.add(notify);
      // Any queue waits (one not started too: an API node reading jobs that others run).
      if (!this.watchingJobs) {
        this.watchingJobs = true;
        this.unwatch.push(this.store.watch(JOBS.name, () => this.checkWaiters()));
      }
      const timeout = timeoutMs === undefined ? undefined : setTimeout(() => notify(new Error(`job ${jobId} did not settle within ${timeoutMs} ms`)), timeoutMs);
      // The fallback for a watch event that did not come (a queue not started, a lost notification).
      const poll = setInterval(() => {
        void this.store.get(JOBS, jobId).then((r) => r && TERMINAL.has(r.state) && notify(r), () => {});
      }, IDLE_POLL_MS);
      poll.unref();
      // Settled between the first read and the watch taking the waiter.
      this.checkWaiters();
    });
  }

  // ---- records ----

  private newRecord(tenant: string, kind: string, input: unknown): JobRecord {
    if (typeof tenant !== 'string' || tenant === '') throw new Error('a job needs a tenant');
    const definition = this.kinds.get(kind);
    if (!definition) throw new Error(`unknown job kind ${kind}`);
    const now = this.clock.now();
    return {
      jobId: uuidv7(),
      tenant,
      kind,
      input,
      state: 'pending',
      attempts: 0,
      maxAttempts: definition.maxAttempts ?? this.deps.config.maxAttempts,
      createdAt: now,
      nextRunAt: now,
      error: null,
      outputs: { derivedNamespaces: [], viewKeys: [] },
    };
  }

  /** The job's next attempt, running under a lease of this queue. */
  private running(record: JobRecord, now: number): Leased {
    return { ...record, state: 'running', attempts: record.attempts + 1, startedAt: now, lease: { owner: this.owner, until: now + this.deps.config.leaseMs } };
  }

  /** The record is running under this very attempt of this queue. */
  private holds(record: JobRecord | undefined, run: Run): record is Leased {
    return record !== undefined && record.state === 'running' && record.lease?.owner === this.owner && record.attempts === run.attempt;
  }

  private backoff(attempts: number): number {
    return Math.min(this.deps.config.backoffMaxMs, this.deps.config.backoffMs * 2 ** Math.max(0, attempts - 1));
  }

  private laneOf(kind: string): Lane {
    return this.kinds.get(kind)?.task ? 'pool' : 'io';
  }

  private freeSlots(lane: Lane): number {
    let free = this.bounds[lane];
    for (const run of this.active.values()) if (run.lane === lane) free--;
    return free;
  }

  // ---- waiters ----

  /** Re-reads the awaited jobs (after a write to `jobs` here or, shared, on another node). */
  private checkWaiters(): void {
    if (this.waiters.size === 0) return;
    if (this.checking) {
      this.recheck = true;
      return;
    }
    this.checking = (async () => {
      for (const jobId of [...this.waiters.keys()]) {
        const record = await this.store.get(JOBS, jobId);
        if (record && TERMINAL.has(record.state)) this.settle(record);
      }
    })()
      .catch((err) => this.deps.log.warn('jobs: awaited jobs not read', { err: String(err) }))
      .finally(() => {
        this.checking = undefined;
        if (this.recheck) {
          this.recheck = false;
          this.checkWaiters();
        }
      });
  }

  private settle(record: JobRecord): void {
    const set = this.waiters.get(record.jobId);
    if (set) for (const notify of [...set]) notify(record);
  }

  // ---- dispatcher ----

  /** Runs the dispatcher now (or again right after the current pass). */
  private wake(): void {
    if (!this.started || this.stopping) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = this.pass()
      .catch((err) => this.deps.log.error('jobs: dispatcher failed', { err: String((err as Error)?.stack ?? err) }))
      .finally(() => {
        this.pumping = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        } else this.schedule();
      });
  }

  /** One pass: expired leases taken over, then due jobs claimed up to the lanes' free slots. */
  private async pass(): Promise<void> {
    clearTimeout(this.timer);
    const now = this.clock.now();
    const own = this.recoverOwn;
    this.recoverOwn = false;
    const leases = await this.store.range(JOBS_DUE, { start: ['lease', 0], end: ['lease', own ? Number.MAX_SAFE_INTEGER : now], ...(own ? {} : { limit: 256 + this.active.size }) });
    const lost = leases.map((e) => e.key).filter((key) => !this.active.has(key[2]));
    if (lost.length > 0) await this.recover(lost, own);
    const slots = { pool: this.freeSlots('pool'), io: this.freeSlots('io') };
    if ((slots.pool <= 0 && slots.io <= 0) || this.stopping) return;
    const claimed = await this.claim(slots);
    for (const record of claimed) this.execute(record);
  }

  /** The timer for the next due job or lease end (at most IDLE_POLL_MS away). */
  private schedule(): void {
    if (!this.started || this.stopping) return;
    clearTimeout(this.timer);
    const now = this.clock.now();
    let delay = IDLE_POLL_MS;
    const arm = () => {
      if (this.stopping || this.pumping) return;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.wake(), Math.min(MAX_TIMER_MS, Math.max(1, delay)));
      this.timer.unref();
    };
    arm();
    // Sooner when a job falls due or a lease of another queue ends before the poll.
    void (async () => {
      const [due] = await this.store.range(JOBS_DUE, { start: ['due', now + 1], end: ['due', Number.MAX_SAFE_INTEGER], limit: 1 });
      let at = due ? due.key[1] : Infinity;
      for (const { key } of await this.store.range(JOBS_DUE, { start: ['lease', 0], end: ['lease', Number.MAX_SAFE_INTEGER], limit: this.active.size + 1 })) {
        if (this.active.has(key[2])) continue;
        at = Math.min(at, key[1] + 1);
        break;
      }
      if (at - now < delay) {
        delay = at - this.clock.now();
        arm();
      }
    })().catch(() => {});
  }

  /**
   * Running jobs whose lease is lost (expired; `own`: also this node's earlier process's): pending
   * again at once, or dead if that was their last attempt. One unit per job, so a job another
   * node renews or takes over meanwhile conflicts alone.
   */
  private async recover(keys: DueKey[], own: boolean): Promise<void> {
    const mine = `${this.deps.node}/`;
    await Promise.all(
      keys.map(async (key) => {
        const jobId = key[2];
        const settled = await this.store.run(async (unit) => {
          if (this.active.has(jobId)) return undefined;
          const current = await unit.get(JOBS, jobId);
          if (!current || current.state !== 'running' || !current.lease || current.lease.until !== key[1]) {
            unit.remove(JOBS_DUE, key); // stale: the record has moved on (and has its own entry)
            return undefined;
          }
          const now = this.clock.now();
          const expired = current.lease.until < now;
          const earlierSelf = own && current.lease.owner !== this.owner && current.lease.owner.startsWith(mine);
          if (!expired && !earlierSelf) return undefined; // a live node's
          const { lease, ...rest } = current;
          const next: JobRecord = current.attempts >= current.maxAttempts
            ? { ...rest, state: 'dead', finishedAt: now, error: INTERRUPTED_LAST }
            : { ...rest, state: 'pending', nextRunAt: now, error: INTERRUPTED };
          writeJob(unit, current, next);
          unit.afterCommit(() => this.deps.log.warn('jobs: a running job lost its lease', { job: jobId, kind: current.kind, attempt: current.attempts, owner: lease.owner, state: next.state }));
          return next;
        });
        if (settled && TERMINAL.has(settled.state)) this.settle(settled);
      }),
    );
  }

  /**
   * Marks due jobs of kinds this queue defines running under its lease, up to each lane's free
   * `slots`. The due index is scanned without a precondition (claims of other jobs do not
   * conflict with this one); each candidate's record is read, so two queues claiming one job
   * conflict and the second, run again, finds it gone from the index or running.
   */
  private claim(slots: Record<Lane, number>): Promise<Leased[]> {
    return this.store.run(async (unit) => {
      const now = this.clock.now();
      const free = { ...slots };
      const candidates = await unit.range(JOBS_DUE, { start: ['due', 0], end: ['due', now + 1], limit: free.pool + free.io + SCAN_SLACK, precondition: false });
      const claimed: Leased[] = [];
      for (const { key, value: kind } of candidates) {
        if (free.pool <= 0 && free.io <= 0) break;
        if (!this.kinds.has(kind)) continue;
        const lane = this.laneOf(kind);
        if (free[lane] <= 0) continue;
        const current = await unit.get(JOBS, key[2]);
        if (!current || current.state !== 'pending' || current.nextRunAt !== key[1]) {
          unit.remove(JOBS_DUE, key); // stale: the record has its own entry
          continue;
        }
        free[lane]--;
        const next = this.running(current, now);
        writeJob(unit, current, next);
        claimed.push(next);
      }
      return claimed;
    });
  }

  // ---- one attempt ----

  /** Runs an attempt of a job this queue holds (its record committed). */
  private execute(record: Leased): void {
    if (this.closed) return; // its lease expires and it is taken over
    const kind = this.kinds.get(record.kind)!;
    const run = { lane: this.laneOf(record.kind), attempt: record.attempts } as Run;
    run.renewal = setInterval(() => void this.renew(record.jobId, run), Math.max(20, Math.floor(this.deps.config.leaseMs / 3)));
    run.renewal.unref();
    this.active.set(record.jobId, run);
    run.done = this.attempt(record, kind, run)
      .catch((err) => this.deps.log.error('jobs: attempt not recorded', { job: record.jobId, err: String((err as Error)?.stack ?? err) }))
      .finally(() => {
        clearInterval(run.renewal);
        this.active.delete(record.jobId);
        this.wake();
      });
  }

  private async attempt(record: JobRecord, kind: JobKind, run: Run): Promise<void> {
    let prepared: { prepared: unknown; transfer?: ArrayBuffer[] } | { done: unknown } = { prepared: undefined };
    try {
      if (kind.prepare) prepared = await kind.prepare(record);
    } catch (err) {
      if (this.closed) return;
      return this.fail(record, run, asJobFailure(err) ?? this.internal(record, err, 'prepare'));
    }
    if ('done' in prepared) return this.complete(record, kind, run, prepared.done);
    if (!kind.task) return this.fail(record, run, this.internal(record, new Error(`job kind ${kind.kind} has no task and its prepare did not complete the attempt`), 'prepare'));
    const call: TaskCall = { filename: kind.task.filename, name: kind.task.name, payload: { input: record.input, jobId: record.jobId, attempt: record.attempts, prepared: prepared.prepared } };
    const abort = kind.timeoutMs === undefined ? undefined : new AbortController();
    const timer = abort && setTimeout(() => abort.abort(), kind.timeoutMs);
    let outcome: TaskOutcome;
    try {
      outcome = await this.deps.pool.run(call, { filename: RUNNER, name: 'runJobTask', signal: abort?.signal, transferList: prepared.transfer });
    } catch (err) {
      if (this.closed) return;
      if (abort?.signal.aborted) return this.fail(record, run, { code: 'timeout', message: `The job's task ran longer than ${kind.timeoutMs} ms`, retryable: true });
      return this.fail(record, run, this.internal(record, err, 'task'));
    } finally {
      clearTimeout(timer);
    }
    if (!outcome.ok) return this.fail(record, run, outcome.failure);
    let output = outcome.output;
    try {
      if (kind.store) output = await kind.store(record, output);
    } catch (err) {
      if (this.closed) return;
      return this.fail(record, run, asJobFailure(err) ?? this.internal(record, err, 'store'));
    }
    return this.complete(record, kind, run, output);
  }

  /** apply + completion in one unit, conditional on this attempt's lease: both commit or neither does. */
  private async complete(record: JobRecord, kind: JobKind, run: Run, output: unknown): Promise<void> {
    if (this.closed) return;
    let completed: JobRecord | undefined;
    try {
      completed = await this.store.run(async (unit) => {
        const current = await unit.get(JOBS, record.jobId);
        if (!this.holds(current, run)) return undefined;
        const outputs = checkOutputs(await kind.apply(unit, current, output));
        const { lease: _lease, ...rest } = current;
        const next: JobRecord = { ...rest, state: 'completed', finishedAt: this.clock.now(), error: null, outputs };
        writeJob(unit, current, next);
        return next;
      });
    } catch (err) {
      return this.fail(record, run, asJobFailure(err) ?? this.internal(record, err, 'apply'));
    }
    if (!completed) {
      this.deps.log.warn('jobs: result dropped, the attempt no longer holds the job', { job: record.jobId, attempt: run.attempt });
      return;
    }
    this.settle(completed);
  }

  private async fail(record: JobRecord, run: Run, failure: JobFailure): Promise<void> {
    if (this.closed) return;
    const next = await this.store.run(async (unit) => {
      const current = await unit.get(JOBS, record.jobId);
      if (!this.holds(current, run)) return undefined;
      const now = this.clock.now();
      const { lease: _lease, ...rest } = current;
      const error = { code: failure.code, message: failure.message };
      const next: JobRecord = failure.retryable && current.attempts < current.maxAttempts
        ? { ...rest, state: 'pending', nextRunAt: now + this.backoff(current.attempts), error }
        : { ...rest, state: failure.retryable ? 'dead' : 'failed', finishedAt: now, error };
      writeJob(unit, current, next);
      return next;
    });
    if (!next) return;
    this.deps.log.info('jobs: attempt failed', { job: record.jobId, kind: record.kind, attempt: run.attempt, code: failure.code, state: next.state, nextRunAt: next.state === 'pending' ? next.nextRunAt : undefined });
    if (TERMINAL.has(next.state)) this.settle(next);
  }

  /** Extends the lease of a running attempt (and moves its due-index entry). */
  private async renew(jobId: string, run: Run): Promise<void> {
    if (this.closed) return;
    const until = this.clock.now() + this.deps.config.leaseMs;
    try {
      await this.store.run(async (unit) => {
        const current = await unit.get(JOBS, jobId);
        if (!this.holds(current, run) || current.lease.until >= until) return;
        writeJob(unit, current, { ...current, lease: { owner: this.owner, until } });
      });
    } catch (err) {
      this.deps.log.warn('jobs: lease not renewed', { job: jobId, err: String(err) });
    }
  }

  private internal(record: JobRecord, err: unknown, stage: 'prepare' | 'task' | 'store' | 'apply'): JobFailure {
    this.deps.log.error('jobs: attempt failed with an internal error', { job: record.jobId, kind: record.kind, attempt: record.attempts, stage, err: String((err as Error)?.stack ?? err) });
    return { ...INTERNAL, retryable: true };
  }
}
