// The durable job queue (document platform, issue 5): the owner of the `jobs` and `jobs_due`
// LMDB databases. No HTTP here.
//
// A job is `pending → running → completed`; a retryable failure returns it to `pending` with an
// exponential backoff, after its last attempt it is `dead`; a non-retryable failure is `failed`.
// A job kind's task (pure, idempotent) runs on the Piscina pool; its `apply` runs on the main
// thread inside the synchronous LMDB transaction that marks the job completed, so the job's
// effects and its completion commit together or not at all. A running job is held by a lease
// naming this process; leases are renewed while the task runs, and a lease of another process
// (an earlier run of the service) or an expired one is dead: its job is taken up again.
// See docs/architecture.md, "The document platform and jobs". One file above 400 lines: the
// claim, renewal, completion and recovery steps share the lease rules and must be read together.

import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Piscina } from 'piscina';
import { v7 as uuidv7 } from 'uuid';
import type { JobConfig } from '../config.js';
import type { Logger } from '../log.js';
import type { OrderedTable, TableCatalog } from '../store/index.js';
import { asJobFailure, type JobFailure } from './errors.js';
import { moduleUrl, type TaskCall, type TaskOutcome } from './task-runner.js';

export { JobError, type JobFailure } from './errors.js';
export type { JobTaskPayload } from './task-runner.js';

type JobState = 'pending' | 'running' | 'completed' | 'failed' | 'dead';

export interface JobOutputs {
  derivedNamespaces: string[];
  /** Of derivedNamespaces, those whose data failed validation and was stored quarantined. */
  quarantinedNamespaces?: string[];
  viewKeys: string[];
}

export interface JobRecord {
  /** UUIDv7. */
  jobId: string;
  tenant: string;
  kind: string;
  input: unknown;
  state: JobState;
  /** Attempts started (a running job's current attempt included). */
  attempts: number;
  maxAttempts: number;
  createdAt: number;
  /** When a pending job is due. */
  nextRunAt: number;
  /** Start of the latest attempt. */
  startedAt?: number;
  /** When the job reached its terminal state. */
  finishedAt?: number;
  /** Held while running: the process (JobQueue.owner) and until when. */
  lease?: { owner: string; until: number };
  /** The latest failure; null when none (and always once completed). */
  error: { code: string; message: string } | null;
  outputs: JobOutputs;
}

interface JobKind<O = unknown> {
  kind: string;
  /**
   * Pure computation run on the worker pool: a module (file URL or absolute path) and the name
   * of its export, called with `{ input, jobId, attempt }` (JobTaskPayload); returns O
   * (structured-cloneable). Must be idempotent: an attempt may run again after a crash. None for
   * a kind whose `prepare` always completes the attempt (its work is the main thread's).
   */
  task?: { filename: string; name: string };
  /**
   * Runs on the main thread INSIDE the synchronous LMDB write transaction that marks the job
   * completed: its writes (to any database of the catalog) and the completion commit together or
   * not at all. Returns the job's outputs. Throwing a JobError with retryable=false fails the job;
   * any other error rolls the transaction back and the attempt is retried.
   */
  apply(job: JobRecord, output: O): JobOutputs;
  /**
   * Main-thread step before the task (async: it may read stored content): what the task gets
   * beside the input (`prepared`, with buffers to transfer), or the attempt's output at once
   * (`done`: nothing to compute, e.g. a repeat whose result is stored). May throw a JobError.
   */
  prepare?(job: JobRecord): Promise<{ prepared: unknown; transfer?: ArrayBuffer[] } | { done: O }>;
  /**
   * Main-thread step after the task, before apply (async: it may store bytes the task made);
   * what it returns is what apply gets. Anything it stores must be safe to leave behind if the
   * attempt is lost (unreferenced blocks are collected).
   */
  store?(job: JobRecord, output: O): Promise<O>;
  /** Attempts of this kind's jobs (default SVC_JOB_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** An attempt whose task runs longer is aborted (its worker thread is replaced) and retried. */
  timeoutMs?: number;
}

interface JobQueueDeps {
  env: TableCatalog;
  pool: Piscina;
  config: JobConfig;
  log: Logger;
}

/** `jobs_due` keys: pending jobs by when they are due, running jobs by when their lease ends. */
type IndexKey = ['due', number, string] | ['lease', number, string];

/**
 * Jobs with a worker task share the pool (SVC_JOB_CONCURRENCY); kinds whose work is the main
 * thread's awaiting I/O (no task: a legacy import streaming a file into the ingest) would idle
 * the pool's slots, so they have a bound of their own (SVC_JOB_IO_CONCURRENCY).
 */
type Lane = 'pool' | 'io';

interface Run {
  lane: Lane;
  attempt: number;
  renewal: NodeJS.Timeout;
  done: Promise<void>;
}

const RUNNER = fileURLToPath(new URL('./task-runner.js', import.meta.url));
const TERMINAL: ReadonlySet<JobState> = new Set(['completed', 'failed', 'dead']);
/** The dispatcher looks again at least this often (jobs enqueued in a caller's asynchronous transaction). */
const IDLE_POLL_MS = 1000;
/** How long stop() waits for running jobs by default. */
const STOP_GRACE_MS = 10_000;
const MAX_TIMER_MS = 2 ** 31 - 1;
const INTERRUPTED = { code: 'interrupted', message: 'The job was interrupted (its process stopped or lost its lease) and runs again' };
const INTERRUPTED_LAST = { code: 'interrupted', message: 'The job was interrupted on its last attempt' };
const INTERNAL = { code: 'internal_error', message: 'The job failed because of an internal error' };

export class JobQueue {
  /** Leases taken by this process; a lease naming another owner belongs to a process that is gone. */
  readonly owner = randomUUID();
  private readonly jobs: OrderedTable<JobRecord, string>;
  private readonly index: OrderedTable<string, IndexKey>;
  private readonly kinds = new Map<string, JobKind>();
  private readonly active = new Map<string, Run>();
  private readonly waiters = new Map<string, Set<(record: JobRecord | Error) => void>>();
  private readonly bounds: Record<Lane, number>;
  private started = false;
  private stopping = false;
  /** After stop(): nothing is written any more (late results of abandoned attempts are dropped). */
  private closed = false;
  private recoverAll = false;
  private pumping?: Promise<void>;
  private again = false;
  private timer?: NodeJS.Timeout;

  constructor(private readonly deps: JobQueueDeps) {
    this.jobs = deps.env.table<JobRecord, string>('jobs');
    this.index = deps.env.table<string, IndexKey>('jobs_due');
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

  /** Records a pending job; durable (committed and flushed) before it resolves. */
  async enqueue(tenant: string, kind: string, input: unknown): Promise<JobRecord> {
    const record = this.newRecord(tenant, kind, input);
    await this.jobs.transaction(() => this.insert(record));
    await this.jobs.flushed;
    this.wake();
    return record;
  }

  /**
   * `enqueue` as a synchronous write, for use inside a caller's LMDB transaction callback (it then
   * runs as a child transaction and commits or aborts with the caller's). Outside any transaction
   * it commits its own. The dispatcher sees the job once the caller's transaction has committed.
   */
  enqueueSync(tenant: string, kind: string, input: unknown, options: { startNow?: boolean } = {}): JobRecord {
    const record = this.newRecord(tenant, kind, input);
    const lane = this.laneOf(kind);
    if (options.startNow && this.started && !this.stopping && this.freeSlots(lane) > 0) {
      // Recorded as running under this process's lease and started once the caller's transaction
      // has committed: no pending round through the dispatcher, one durable write fewer.
      const running = this.jobs.transactionSync(() => this.markRunning(record, Date.now()));
      this.execute(running, this.jobs.committed);
      return running;
    }
    this.jobs.transactionSync(() => this.insert(record));
    // Inside a caller's transaction the job is visible once that commits (the poll is the fallback).
    setImmediate(() => this.wake());
    void this.jobs.committed.then(() => this.wake(), () => {});
    return record;
  }

  /** The job as its tenant sees it; another tenant's job is undefined. */
  get(tenant: string, jobId: string): JobRecord | undefined {
    const record = this.jobs.get(jobId);
    return record && record.tenant === tenant ? record : undefined;
  }

  /**
   * The tenant's jobs newest first (job ids are time-ordered) that `matches` accepts, after job id
   * `after`. It reads at most `budget` records: `next` (the last id read) is set when it stopped
   * there, so a page may be short and still have a next one.
   */
  list(tenant: string, matches: (job: JobRecord) => boolean, limit: number, budget: number, after?: string): { jobs: JobRecord[]; next?: string } {
    const jobs: JobRecord[] = [];
    let read = 0;
    let last: string | undefined;
    for (const { key, value } of this.jobs.getRange({ reverse: true, ...(after === undefined ? {} : { start: after }) })) {
      if (key === after) continue;
      if (jobs.length === limit || read === budget) return { jobs, next: last };
      read++;
      last = key;
      if (value.tenant === tenant && matches(value)) jobs.push(value);
    }
    return { jobs };
  }

  /** Begins dispatching; first returns running jobs of dead leases (other processes, expired) to pending. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.recoverAll = true;
    this.wake();
  }

  /**
   * Takes no new jobs and waits up to `graceMs` for the running ones. Jobs still running then
   * keep their lease; the next start (a new owner) takes them up again.
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
      if (!finished) this.deps.log.warn('jobs: stopped while jobs still ran; they run again at the next start', { jobs: [...this.active.keys()] });
    }
    this.closed = true;
    for (const run of this.active.values()) clearInterval(run.renewal);
    for (const [jobId, set] of this.waiters) for (const notify of set) notify(new Error(`job queue stopped before job ${jobId} settled`));
  }

  /** Resolves with the record once the job is completed, failed or dead; rejects after `timeoutMs`. */
  settled(jobId: string, timeoutMs?: number): Promise<JobRecord> {
    const current = this.jobs.get(jobId);
    if (!current) return Promise.reject(new Error(`no job ${jobId}`));
    if (TERMINAL.has(current.state)) return Promise.resolve(current);
    if (this.closed) return Promise.reject(new Error(`job queue stopped before job ${jobId} settled`));
    return new Promise<JobRecord>((resolve, reject) => {
      let set = this.waiters.get(jobId);
      if (!set) this.waiters.set(jobId, (set = new Set()));
      const notify = (result: JobRecord | Error) => {
        clearTimeout(timeout);
        clearInterval(poll);
        set!.delete(notify);
        if (set!.size === 0) this.waiters.delete(jobId);
        if (result instanceof Error) reject(result);
        else resolve(result);
      };
      set.add(notify);
      const timeout = timeoutMs === undefined ? undefined : setTimeout(() => notify(new Error(`job ${jobId} did not settle within ${timeoutMs} ms`)), timeoutMs);
      // Another queue on the same catalog (another instance, a test) may settle it.
      const poll = setInterval(() => {
        const r = this.jobs.get(jobId);
        if (r && TERMINAL.has(r.state)) notify(r);
      }, IDLE_POLL_MS);
      poll.unref();
    });
  }

  // ---- records ----

  private newRecord(tenant: string, kind: string, input: unknown): JobRecord {
    if (typeof tenant !== 'string' || tenant === '') throw new Error('a job needs a tenant');
    const definition = this.kinds.get(kind);
    if (!definition) throw new Error(`unknown job kind ${kind}`);
    const now = Date.now();
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

  private insert(record: JobRecord): void {
    this.jobs.put(record.jobId, record);
    this.index.put(['due', record.nextRunAt, record.jobId], record.kind);
  }

  /** The record is running under this very attempt of this process. */
  private holds(record: JobRecord | undefined, run: Run): record is JobRecord & { lease: { owner: string; until: number } } {
    return record !== undefined && record.state === 'running' && record.lease?.owner === this.owner && record.attempts === run.attempt;
  }

  private backoff(attempts: number): number {
    return Math.min(this.deps.config.backoffMaxMs, this.deps.config.backoffMs * 2 ** Math.max(0, attempts - 1));
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

  /** One pass: dead leases back to pending, then due jobs claimed up to the concurrency bound. */
  private async pass(): Promise<void> {
    clearTimeout(this.timer);
    const now = Date.now();
    const dead: IndexKey[] = [];
    for (const key of this.index.getKeys({ start: ['lease', 0], end: ['lease', this.recoverAll ? Number.MAX_SAFE_INTEGER : now + 1] })) {
      if (!this.active.has(key[2])) dead.push(key as IndexKey);
    }
    this.recoverAll = false;
    if (dead.length > 0) await this.recover(dead);
    const slots = { pool: this.freeSlots('pool'), io: this.freeSlots('io') };
    if ((slots.pool <= 0 && slots.io <= 0) || this.stopping || !this.anyDue(now)) return;
    const claimed = await this.claim(slots);
    for (const record of claimed) this.execute(record);
  }

  private anyDue(now: number): boolean {
    for (const { value } of this.index.getRange({ start: ['due', 0], end: ['due', now + 1] })) if (this.kinds.has(value)) return true;
    return false;
  }

  /** The timer for the next due job or lease end (at most IDLE_POLL_MS away). */
  private schedule(): void {
    if (!this.started || this.stopping) return;
    clearTimeout(this.timer);
    const now = Date.now();
    let at = now + IDLE_POLL_MS;
    for (const key of this.index.getKeys({ start: ['due', now + 1], end: ['due', Number.MAX_SAFE_INTEGER], limit: 1 })) at = Math.min(at, key[1] as number);
    for (const key of this.index.getKeys({ start: ['lease', 0], end: ['lease', Number.MAX_SAFE_INTEGER] })) {
      if (this.active.has(key[2] as string)) continue;
      at = Math.min(at, (key[1] as number) + 1);
      break;
    }
    this.timer = setTimeout(() => this.wake(), Math.min(MAX_TIMER_MS, Math.max(1, at - now)));
    this.timer.unref();
  }

  /** Running jobs whose lease is dead: pending again at once, or dead if that was their last attempt. */
  private async recover(keys: IndexKey[]): Promise<void> {
    const settled: JobRecord[] = [];
    await this.jobs.transaction(() => {
      const now = Date.now();
      for (const key of keys) {
        const jobId = key[2];
        if (this.active.has(jobId)) continue;
        this.index.remove(key);
        const current = this.jobs.get(jobId);
        if (!current || current.state !== 'running') continue;
        const { lease, ...rest } = current;
        if (lease) this.index.remove(['lease', lease.until, jobId]);
        let next: JobRecord;
        if (current.attempts >= current.maxAttempts) {
          next = { ...rest, state: 'dead', finishedAt: now, error: INTERRUPTED_LAST };
          settled.push(next);
        } else {
          next = { ...rest, state: 'pending', nextRunAt: now, error: INTERRUPTED };
          this.index.put(['due', now, jobId], current.kind);
        }
        this.jobs.put(jobId, next);
        this.deps.log.warn('jobs: a running job lost its lease', { job: jobId, kind: current.kind, attempt: current.attempts, owner: lease?.owner, state: next.state });
      }
    });
    for (const record of settled) this.settle(record);
  }

  /** Inside a transaction: the job's next attempt, running under a lease of this process. */
  private markRunning(record: JobRecord, now: number): JobRecord {
    const lease = { owner: this.owner, until: now + this.deps.config.leaseMs };
    const next: JobRecord = { ...record, state: 'running', attempts: record.attempts + 1, startedAt: now, lease };
    this.jobs.put(next.jobId, next);
    this.index.put(['lease', lease.until, next.jobId], next.kind);
    return next;
  }

  private laneOf(kind: string): Lane {
    return this.kinds.get(kind)?.task ? 'pool' : 'io';
  }

  /** Marks due jobs of known kinds running under a lease of this process, up to each lane's free `slots`. */
  private claim(slots: Record<Lane, number>): Promise<JobRecord[]> {
    return this.jobs.transaction(() => {
      const now = Date.now();
      const free = { ...slots };
      const picked: IndexKey[] = [];
      for (const { key, value } of this.index.getRange({ start: ['due', 0], end: ['due', now + 1] })) {
        if (free.pool <= 0 && free.io <= 0) break;
        if (!this.kinds.has(value)) continue;
        const lane = this.laneOf(value);
        if (free[lane] <= 0) continue;
        free[lane]--;
        picked.push(key as IndexKey);
      }
      const claimed: JobRecord[] = [];
      for (const key of picked) {
        const jobId = key[2];
        this.index.remove(key);
        const current = this.jobs.get(jobId);
        // An index entry that no longer matches its record is stale (the record has its own).
        if (!current || current.state !== 'pending' || current.nextRunAt !== key[1]) continue;
        claimed.push(this.markRunning(current, now));
      }
      return claimed;
    });
  }

  // ---- one attempt ----

  private freeSlots(lane: Lane): number {
    let free = this.bounds[lane];
    for (const run of this.active.values()) if (run.lane === lane) free--;
    return free;
  }

  /** Runs an attempt of a job this process holds; `committed`: once the record's write has committed (and if it did). */
  private execute(record: JobRecord, committed?: Promise<unknown>): void {
    const kind = this.kinds.get(record.kind)!;
    const run = { lane: this.laneOf(record.kind), attempt: record.attempts } as Run;
    run.renewal = setInterval(() => void this.renew(record.jobId, run), Math.max(20, Math.floor(this.deps.config.leaseMs / 3)));
    run.renewal.unref();
    this.active.set(record.jobId, run);
    const begin = async () => {
      if (committed) {
        await committed;
        // The caller's transaction may have been rolled back: then there is no job.
        if (!this.holds(this.jobs.get(record.jobId), run)) return;
      }
      await this.attempt(record, kind, run);
    };
    run.done = begin()
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

  /** apply + completion in one synchronous transaction: both commit or neither does. */
  private async complete(record: JobRecord, kind: JobKind, run: Run, output: unknown): Promise<void> {
    if (this.closed) return;
    let completed: JobRecord | undefined;
    try {
      completed = this.jobs.transactionSync(() => {
        const current = this.jobs.get(record.jobId);
        if (!this.holds(current, run)) return undefined;
        const outputs = checkOutputs(kind.apply(current, output));
        const { lease, ...rest } = current;
        const next: JobRecord = { ...rest, state: 'completed', finishedAt: Date.now(), error: null, outputs };
        this.index.remove(['lease', lease.until, record.jobId]);
        this.jobs.put(record.jobId, next);
        return next;
      });
    } catch (err) {
      return this.fail(record, run, asJobFailure(err) ?? this.internal(record, err, 'apply'));
    }
    if (!completed) {
      this.deps.log.warn('jobs: result dropped, the attempt no longer holds the job', { job: record.jobId, attempt: run.attempt });
      return;
    }
    await this.jobs.flushed;
    this.settle(completed);
  }

  private async fail(record: JobRecord, run: Run, failure: JobFailure): Promise<void> {
    if (this.closed) return;
    let next: JobRecord | undefined;
    await this.jobs.transaction(() => {
      const current = this.jobs.get(record.jobId);
      if (!this.holds(current, run)) return;
      const now = Date.now();
      const { lease, ...rest } = current;
      this.index.remove(['lease', lease.until, record.jobId]);
      const error = { code: failure.code, message: failure.message };
      if (failure.retryable && current.attempts < current.maxAttempts) {
        next = { ...rest, state: 'pending', nextRunAt: now + this.backoff(current.attempts), error };
        this.index.put(['due', next.nextRunAt, record.jobId], current.kind);
      } else {
        next = { ...rest, state: failure.retryable ? 'dead' : 'failed', finishedAt: now, error };
      }
      this.jobs.put(record.jobId, next);
    });
    if (!next) return;
    this.deps.log.info('jobs: attempt failed', { job: record.jobId, kind: record.kind, attempt: run.attempt, code: failure.code, state: next.state, nextRunAt: next.state === 'pending' ? next.nextRunAt : undefined });
    if (TERMINAL.has(next.state)) this.settle(next);
  }

  /** Extends the lease of a running attempt (and moves its index entry). */
  private async renew(jobId: string, run: Run): Promise<void> {
    if (this.closed) return;
    const until = Date.now() + this.deps.config.leaseMs;
    try {
      await this.jobs.transaction(() => {
        const current = this.jobs.get(jobId);
        if (!this.holds(current, run) || current.lease.until >= until) return;
        this.index.remove(['lease', current.lease.until, jobId]);
        this.index.put(['lease', until, jobId], current.kind);
        this.jobs.put(jobId, { ...current, lease: { owner: this.owner, until } });
      });
    } catch (err) {
      this.deps.log.warn('jobs: lease not renewed', { job: jobId, err: String(err) });
    }
  }

  private internal(record: JobRecord, err: unknown, stage: 'prepare' | 'task' | 'store' | 'apply'): JobFailure {
    this.deps.log.error('jobs: attempt failed with an internal error', { job: record.jobId, kind: record.kind, attempt: record.attempts, stage, err: String((err as Error)?.stack ?? err) });
    return { ...INTERNAL, retryable: true };
  }

  private settle(record: JobRecord): void {
    const set = this.waiters.get(record.jobId);
    if (set) for (const notify of [...set]) notify(record);
  }
}

function checkOutputs(outputs: JobOutputs): JobOutputs {
  const strings = (v: unknown) => Array.isArray(v) && v.every((s) => typeof s === 'string');
  if (!outputs || !strings(outputs.derivedNamespaces) || !strings(outputs.viewKeys) || (outputs.quarantinedNamespaces !== undefined && !strings(outputs.quarantinedNamespaces))) {
    throw new Error('apply must return { derivedNamespaces: string[], quarantinedNamespaces?: string[], viewKeys: string[] }');
  }
  const quarantined = outputs.quarantinedNamespaces ? { quarantinedNamespaces: [...outputs.quarantinedNamespaces] } : {};
  return { derivedNamespaces: [...outputs.derivedNamespaces], ...quarantined, viewKeys: [...outputs.viewKeys] };
}
