// A resumable session's record changes only through moveSession: each event names one legal step
// of its state, so a record that moved on under a step (another node, the cleanup, a lost lease)
// is refused instead of overwritten. Leases, offsets and tokens are the caller's to check first
// (Uploads): this is the last guard, and it knows states only.
//
//   (none)      create                   → Open
//   (none)      concatenated             → Committed (a tus final upload, assembled from its partial uploads' blobs)
//   Open        take (part lease)        → Open
//   Open        take (commit lease)      → Committing
//   Open        renew, part, release     → Open
//   Open        declare (length unknown) → Open
//   Open        cancel                   → Cancelled
//   Open        expire                   → Expired
//   Committing  renew, publishing        → Committing
//   Committing  release                  → Open        (the commit abandoned)
//   Committing  published                → Committed
//   Committing  recover                  → Committed with its pendingBlob, or Open
//   Committed, Cancelled, Expired: final.

import { SvcError } from '../base/errors.js';
import type {
  CommittedSession, CommittingSession, EndedSession, Lease, LeasedSession, OpenSession, PartLeasedSession, SessionRecord, SessionState, TusFacts,
} from '../store/index.js';

export type SessionEvent =
  | { type: 'create'; id: string; tenant: string; declaredLength?: number; contentType?: string; tus?: TusFacts; now: number; ttlMs: number }
  /** A tus final upload: its partial uploads' blobs assembled into `blob` before the record is written. */
  | { type: 'concatenated'; id: string; tenant: string; length: number; blob: string; contentType?: string; tus: TusFacts; now: number; ttlMs: number }
  /** A length declared after creation (tus creation-defer-length): once, and not below the offset. */
  | { type: 'declare'; length: number }
  /** A part's or a commit's lease taken (a dead lease before it is replaced). */
  | { type: 'take'; lease: Lease }
  /** The holder keeps its lease longer. */
  | { type: 'renew'; until: number }
  /** A part recorded: `length` bytes acknowledged, the last `tailBytes` of them staged as `tail`; the lease ends. */
  | { type: 'part'; length: number; tailBytes: number; tail: string | undefined; decided?: OpenSession['decided'] }
  /** The lease's holder gives the session back: a part's, or a commit's that gave up (its pendingBlob forgotten). */
  | { type: 'release' }
  /** A commit is about to publish `blob` (kept so that a crash after the publication is recovered as Committed). */
  | { type: 'publishing'; blob: string }
  | { type: 'published'; blob: string }
  | { type: 'cancel' }
  | { type: 'expire' }
  /** A commit a crash interrupted, settled by the cleanup: `blob` when its pendingBlob was published (Committed), else Open. */
  | { type: 'recover'; blob?: string };

/** The record an event leaves, by the event (a `take` by its lease's kind, when the caller's type knows it). */
export type SessionAfter<E extends SessionEvent> = E extends { type: 'create' | 'declare' | 'part' | 'release' }
  ? OpenSession
  : E extends { type: 'concatenated' | 'published' }
    ? CommittedSession
    : E extends { type: 'publishing' }
      ? CommittingSession
      : E extends { type: 'take' }
        ? E['lease'] extends Lease<'part'> ? PartLeasedSession : E['lease'] extends Lease<'commit'> ? CommittingSession : LeasedSession
        : E extends { type: 'renew' }
          ? OpenSession | CommittingSession
          : E extends { type: 'cancel' }
            ? EndedSession<'Cancelled'>
            : E extends { type: 'expire' }
              ? EndedSession<'Expired'>
              : E extends { type: 'recover' }
                ? OpenSession | CommittedSession
                : SessionRecord;

/** What an event tries, as a refusal names it (the words of the refusals Uploads gives before it). */
function attempt(event: SessionEvent): string {
  switch (event.type) {
    case 'create': return 'be created again';
    case 'declare': return 'declare its length';
    case 'concatenated': return 'be created again';
    case 'take': return event.lease.kind === 'part' ? 'add a part' : 'commit';
    case 'renew': return 'renew its lease';
    case 'part': return 'record a part';
    case 'release': return 'give its lease back';
    case 'publishing': return 'publish';
    case 'published': return 'be marked committed';
    case 'cancel': return 'cancel';
    case 'expire': return 'expire';
    case 'recover': return 'recover a commit';
  }
}

/**
 * A step the session's state does not allow. Only a concurrent change reaches it in a running
 * service (the callers refuse what they can see first), so it is the 409 `upload_state` a client
 * already gets for a session that is not Open.
 */
export class IllegalSessionMove extends SvcError {
  constructor(
    readonly from: SessionState | undefined,
    readonly event: SessionEvent['type'],
    action: string,
  ) {
    super('conflict', 'upload_state', `The upload session is ${from ?? 'gone'}: cannot ${action}`);
  }
}

/** The record after `event`, or IllegalSessionMove when the record's state (undefined: no session) does not allow it. */
export function moveSession<E extends SessionEvent>(record: SessionRecord | undefined, event: E): SessionAfter<E>;
export function moveSession(record: SessionRecord | undefined, event: SessionEvent): SessionRecord {
  switch (event.type) {
    case 'create': {
      if (record) break;
      const { id, tenant, declaredLength, contentType, tus, now, ttlMs } = event;
      const created: OpenSession = { id, tenant, state: 'Open', offset: 0, declaredLength, partCount: 0, contentType, createdAt: now, expiresAt: now + ttlMs, tailStart: 0 };
      return tus ? { ...created, tus } : created;
    }
    case 'concatenated': {
      if (record) break;
      const { id, tenant, length, blob, contentType, tus, now, ttlMs } = event;
      return { id, tenant, state: 'Committed', offset: length, declaredLength: length, partCount: 0, contentType, createdAt: now, expiresAt: now + ttlMs, tailStart: length, committedBlob: blob, tus };
    }
    case 'declare':
      if (record?.state !== 'Open' || record.declaredLength !== undefined || event.length < record.offset) break;
      return { ...record, declaredLength: event.length };
    case 'take': {
      if (record?.state !== 'Open') break;
      const lease = event.lease;
      return lease.kind === 'commit' ? { ...record, state: 'Committing', lease } : { ...record, state: 'Open', lease };
    }
    case 'renew':
      if (record?.state === 'Committing') return { ...record, lease: { ...record.lease, until: event.until } };
      if (record?.state !== 'Open') break;
      return { ...record, lease: record.lease && { ...record.lease, until: event.until } };
    case 'part': {
      if (record?.state !== 'Open') break;
      const offset = record.offset + event.length;
      return { ...record, offset, partCount: record.partCount + 1, tailStart: offset - event.tailBytes, tail: event.tail, decided: event.decided ?? record.decided, lease: undefined };
    }
    case 'release':
      if (record?.state === 'Open') return { ...record, lease: undefined };
      if (record?.state !== 'Committing') break;
      return { ...record, state: 'Open', pendingBlob: undefined, lease: undefined };
    case 'publishing':
      if (record?.state !== 'Committing') break;
      return { ...record, pendingBlob: event.blob };
    case 'published':
      if (record?.state !== 'Committing') break;
      return { ...record, state: 'Committed', committedBlob: event.blob, pendingBlob: undefined, lease: undefined };
    case 'cancel':
      if (record?.state !== 'Open') break;
      return { ...record, state: 'Cancelled', lease: undefined };
    case 'expire':
      if (record?.state !== 'Open') break;
      return { ...record, state: 'Expired', lease: undefined };
    case 'recover':
      if (record?.state !== 'Committing') break;
      return event.blob
        ? { ...record, state: 'Committed', committedBlob: event.blob, pendingBlob: undefined, lease: undefined }
        : { ...record, state: 'Open', committedBlob: undefined, pendingBlob: undefined, lease: undefined };
  }
  throw new IllegalSessionMove(record?.state, event.type, attempt(event));
}
