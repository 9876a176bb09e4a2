// The job queue's records and tables on the UnitStore, and the one function that writes a job:
// every change of a record moves its due-index entry and its list-index entries in the same
// unit, so the indexes never disagree with a committed record.

import type { Unit } from '../store/unit-store.js';
import { table } from '../store/unit-store.js';

export type JobState = 'pending' | 'running' | 'completed' | 'failed' | 'dead';

export const TERMINAL: ReadonlySet<JobState> = new Set(['completed', 'failed', 'dead']);

export interface JobOutputs {
  derivedNamespaces: string[];
  /** Of derivedNamespaces, those whose data failed validation and was stored quarantined. */
  quarantinedNamespaces?: string[];
  viewKeys: string[];
  /** A bulk migration's tally: documents given a new version, left alone, and those that failed (the first 100). */
  migration?: { migrated: number; skipped: number; failed: number; failures: Array<{ documentId: string; code: string; message: string }> };
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
  /** Held while running: the queue (JobQueue.owner) and until when. */
  lease?: { owner: string; until: number };
  /** The latest failure; null when none (and always once completed). */
  error: { code: string; message: string } | null;
  outputs: JobOutputs;
  /** A long job's progress, recorded by its running attempt (JobQueue.recordProgress). */
  progress?: JobProgress;
}

export interface JobProgress {
  done: number;
  total: number;
  /** Where an attempt that takes over goes on (the kind's own token). */
  resumeAfter?: string;
}

/** `jobs_due` keys: pending jobs by when they are due, running jobs by when their lease ends. */
export type DueKey = ['due', number, string] | ['lease', number, string];

// The names and shapes `jobs` and `jobs_due` have always had (old data directories read as before).
export const JOBS = table<JobRecord, string>('jobs', { watched: true });
/** Value: the job's kind (the dispatcher skips kinds this node does not define without reading the record). */
export const JOBS_DUE = table<string, DueKey>('jobs_due', { watched: true });
// List indexes (values unused): newest first within a prefix, since job ids are UUIDv7.
export const JOBS_BY_TENANT = table<1, [string, string]>('jobs_by_tenant');
export const JOBS_BY_DOCUMENT = table<1, [string, string, string]>('jobs_by_document');
export const JOBS_BY_STATE = table<1, [string, JobState, string]>('jobs_by_state');
/** `indexes`: the list indexes hold every job (written when a backfill of an older directory ends). */
export const JOBS_META = table<{ version: number; at: number }, string>('jobs_meta');
export const INDEX_VERSION = 1;

/** The document a job is about: its input's `documentId`, when a string. */
export function documentOf(record: JobRecord): string | undefined {
  const id = (record.input as { documentId?: unknown } | null | undefined)?.documentId;
  return typeof id === 'string' ? id : undefined;
}

export function dueKey(record: JobRecord): DueKey | undefined {
  if (record.state === 'pending') return ['due', record.nextRunAt, record.jobId];
  if (record.state === 'running' && record.lease) return ['lease', record.lease.until, record.jobId];
  return undefined;
}

const sameKey = (a: DueKey | undefined, b: DueKey | undefined) => a === b || (a !== undefined && b !== undefined && a[0] === b[0] && a[1] === b[1] && a[2] === b[2]);

/**
 * Writes `next` in `unit` with its index entries; `prev` is the committed record the unit read
 * (undefined: a new job). The unit's read of `prev` is what makes this conditional.
 */
export function writeJob(unit: Unit, prev: JobRecord | undefined, next: JobRecord): void {
  unit.put(JOBS, next.jobId, next);
  const [before, after] = [prev && dueKey(prev), dueKey(next)];
  if (!sameKey(before, after)) {
    if (before) unit.remove(JOBS_DUE, before);
    if (after) unit.put(JOBS_DUE, after, next.kind);
  }
  indexLists(unit, prev, next);
}

/** The list-index entries of `next` (and `prev`'s removed when its state differs). */
export function indexLists(unit: Unit, prev: JobRecord | undefined, next: JobRecord): void {
  if (!prev) {
    unit.put(JOBS_BY_TENANT, [next.tenant, next.jobId], 1);
    const documentId = documentOf(next);
    if (documentId !== undefined) unit.put(JOBS_BY_DOCUMENT, [next.tenant, documentId, next.jobId], 1);
  }
  if (prev?.state !== next.state) {
    if (prev) unit.remove(JOBS_BY_STATE, [prev.tenant, prev.state, prev.jobId]);
    unit.put(JOBS_BY_STATE, [next.tenant, next.state, next.jobId], 1);
  }
}

export function checkOutputs(outputs: JobOutputs): JobOutputs {
  const strings = (v: unknown) => Array.isArray(v) && v.every((s) => typeof s === 'string');
  if (!outputs || !strings(outputs.derivedNamespaces) || !strings(outputs.viewKeys) || (outputs.quarantinedNamespaces !== undefined && !strings(outputs.quarantinedNamespaces))) {
    throw new Error('apply must return { derivedNamespaces: string[], quarantinedNamespaces?: string[], viewKeys: string[] }');
  }
  const quarantined = outputs.quarantinedNamespaces ? { quarantinedNamespaces: [...outputs.quarantinedNamespaces] } : {};
  const migration = outputs.migration ? { migration: structuredClone(outputs.migration) } : {};
  return { derivedNamespaces: [...outputs.derivedNamespaces], ...quarantined, viewKeys: [...outputs.viewKeys], ...migration };
}
