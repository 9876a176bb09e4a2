// What a job kind is, and what a queue is given: the contract between the queue (queue.ts) and
// the services that define kinds (documents, views, workflows, legacy imports).

import type { Piscina } from 'piscina';
import type { Clock } from '../base/clock.js';
import type { JobConfig } from '../base/config.js';
import type { Logger } from '../base/log.js';
import type { Unit, UnitStore } from '../store/unit-store.js';
import type { JobOutputs, JobRecord } from './records.js';

export interface JobKind<O = unknown> {
  kind: string;
  /**
   * Pure computation run on the worker pool: a module (file URL or absolute path) and the name
   * of its export, called with `{ input, jobId, attempt }` (JobTaskPayload); returns O
   * (structured-cloneable). Must be idempotent: an attempt may run again after a crash or on
   * another node. None for a kind whose `prepare` always completes the attempt.
   */
  task?: { filename: string; name: string };
  /**
   * Runs on the main thread in the unit that marks the job completed: its reads and writes join
   * that unit, so they and the completion commit together or not at all, and only while this
   * attempt holds the job's lease. The unit may run it again (a conflict): no effects outside
   * `unit` (use `unit.afterCommit`). Returns the job's outputs. A JobError with retryable=false
   * fails the job; any other error discards the unit and the attempt is retried.
   */
  apply(unit: Unit, job: JobRecord, output: O): Promise<JobOutputs>;
  /**
   * Main-thread step before the task (it may read stored content): what the task gets beside
   * the input (`prepared`, with buffers to transfer), or the attempt's output at once (`done`).
   * May throw a JobError.
   */
  prepare?(job: JobRecord): Promise<{ prepared: unknown; transfer?: ArrayBuffer[] } | { done: O }>;
  /**
   * Main-thread step after the task, before apply (it may store bytes the task made); what it
   * returns is what apply gets. Anything it stores must be safe to leave behind if the attempt
   * is lost (unreferenced blocks are collected).
   */
  store?(job: JobRecord, output: O): Promise<O>;
  /** Attempts of this kind's jobs (default SVC_JOB_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** An attempt whose task runs longer is aborted (its worker thread is replaced) and retried. */
  timeoutMs?: number;
}

export interface JobQueueDeps {
  store: UnitStore;
  pool: Piscina;
  config: JobConfig;
  log: Logger;
  /**
   * Optional: this node's stable id (SVC_NODE_ID or the data directory's). Leases are then named
   * `<node>/<uuid>`, and at start() the unexpired leases of this node's earlier process are
   * taken over at once instead of after they expire (a restart of a single `fs` node).
   */
  node?: string;
  /** The time leases and due times are judged by (the database's on pg-s3); default the system clock. */
  clock?: Clock;
}
