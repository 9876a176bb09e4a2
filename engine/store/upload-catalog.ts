// Resumable upload sessions: a session's record holds its state, offset, lease and the staged
// tail; each acknowledged part keeps the blocks it cut, so a commit only reads what is durable.
import type { ChunkerSpec } from '../base/chunker-spec.js';
import type { StoredBlock } from './block-store.js';

export type LeaseKind = 'part' | 'commit';

/** A lease on a session: a part's (the session stays Open) or a commit's (the session is Committing). */
export interface LeaseOf<K extends LeaseKind> {
  kind: K;
  /** The process that holds it (a lease of an earlier process is dead). */
  owner: string;
  /** This lease among those of the same process. */
  token: string;
  until: number;
}

/** Either lease, told apart by `kind`; `Lease<'part'>` is a part's alone. */
export type Lease<K extends LeaseKind = LeaseKind> = K extends LeaseKind ? LeaseOf<K> : never;

/**
 * Fields of other states that a state does not hold. A move that ends one leaves its key
 * undefined (`{ ...record, lease: undefined }`), so a record may carry the key, never a value.
 */
type Unset<K extends PropertyKey> = { [P in K]?: undefined };

/** What a session holds in every state. */
interface SessionFacts {
  id: string;
  tenant: string;
  /** Bytes acknowledged. */
  offset: number;
  declaredLength?: number;
  partCount: number;
  contentType?: string;
  createdAt: number;
  expiresAt: number;
  /** Object offset where the staged tail (bytes after the last cut) begins. */
  tailStart: number;
  /**
   * The staged file holding the tail; absent while the tail is empty. A session that ended keeps
   * the name its last part wrote, though its staged files are removed.
   */
  tail?: string;
  /** Chunker and media type, once the object's first 4 KiB decided them. */
  decided?: { spec: ChunkerSpec; mediaType: string };
  /** A session created through tus (server/tus-api.ts): what the protocol shows of it again. */
  tus?: TusFacts;
}

/** Taking parts; a part running holds a part's lease (one that expired or whose holder died stays until replaced). */
export interface OpenSession extends SessionFacts, Unset<'pendingBlob' | 'committedBlob'> {
  state: 'Open';
  lease?: Lease<'part'>;
}

/** Open with a part's lease: the session a part is being received into. */
export type PartLeasedSession = OpenSession & { lease: Lease<'part'> };

/** A commit is cutting the tail and publishing, under its lease (the cleanup settles one whose holder died). */
export interface CommittingSession extends SessionFacts, Unset<'committedBlob'> {
  state: 'Committing';
  lease: Lease<'commit'>;
  /** The blob id the commit is publishing (recovery after a crash during commit). */
  pendingBlob?: string;
}

/** Published: final. */
export interface CommittedSession extends SessionFacts, Unset<'lease' | 'pendingBlob'> {
  state: 'Committed';
  committedBlob: string;
}

/** Cancelled by its client, or expired unfinished: final, its staged bytes gone. */
export interface EndedSession<S extends 'Cancelled' | 'Expired' = 'Cancelled' | 'Expired'> extends SessionFacts, Unset<'lease' | 'pendingBlob' | 'committedBlob'> {
  state: S;
}

/**
 * A resumable session's record, one type per state (`state` tells them apart; every change is a
 * move of engine/uploads/session-machine.ts). The stored form is these objects as they are.
 */
export type SessionRecord = OpenSession | CommittingSession | CommittedSession | EndedSession;

export type SessionState = SessionRecord['state'];

/** A session under a lease: a part's (Open) or a commit's (Committing). */
export type LeasedSession = PartLeasedSession | CommittingSession;

/** What a tus creation said of its upload. */
export interface TusFacts {
  /** `Upload-Metadata` as sent (checked), shown again on HEAD. */
  metadata?: string;
  /** `Upload-Concat: partial`, or a final upload's partial uploads (session ids, in order). */
  concat?: 'partial' | string[];
}

export interface PartRecord {
  partId: string;
  offset: number;
  length: number;
  /** The blocks this part cut: per block 32-byte digest, 8-byte xxh64, 4-byte size, 1 byte fresh. */
  blocks: Buffer;
}

/** Bytes per block in a part record's `blocks`. */
export const PART_BLOCK_BYTES = 45;

export function packBlocks(blocks: readonly StoredBlock[]): Buffer {
  const out = Buffer.allocUnsafe(blocks.length * PART_BLOCK_BYTES);
  blocks.forEach((b, i) => {
    const at = i * PART_BLOCK_BYTES;
    out.write(b.hex, at, 'hex');
    out.writeBigUInt64LE(b.checksum, at + 32);
    out.writeUInt32LE(b.size, at + 40);
    out[at + 44] = b.fresh ? 1 : 0;
  });
  return out;
}

/**
 * Where sessions are kept: the node's LMDB (fs), PostgreSQL (pg-s3) or the bucket (s3): with the
 * last two every node sees every session, and a part may reach any of them. Every call may go to
 * another process.
 */
export function unpackBlocks(packed: Buffer, into: StoredBlock[]): void {
  for (let at = 0; at < packed.length; at += PART_BLOCK_BYTES) {
    into.push({ hex: packed.toString('hex', at, at + 32), checksum: packed.readBigUInt64LE(at + 32), size: packed.readUInt32LE(at + 40), fresh: packed[at + 44] === 1 });
  }
}

/**
 * The bytes an open session holds in its tenant's quota: its declared length (reserved at
 * creation, or when a deferred length is declared), else the bytes it received. Nothing once it
 * is committed, cancelled or expired (an open session past its expiry is expired, cleaned up or not).
 */
export function stagedOf(record: Pick<SessionRecord, 'state' | 'declaredLength' | 'offset' | 'expiresAt'>, now: number): number {
  if (record.state === 'Committing') return record.declaredLength ?? record.offset;
  if (record.state !== 'Open' || now >= record.expiresAt) return 0;
  return record.declaredLength ?? record.offset;
}

export interface UploadCatalog {
  /** Other processes share the catalog: a lease of another owner is alive until it expires. */
  readonly shared: boolean;
  /**
   * What the tenant's open sessions hold (stagedOf, summed) at `now`, the session `except` left
   * out (a part or commit of that session is judged against the others'). Read from the records
   * every node shares, so a reservation holds whichever node answers.
   */
  stagedBytes(tenant: string, now: number, except?: string): Promise<number>;
  get(id: string): Promise<SessionRecord | undefined>;
  /** Whether `partId` was acknowledged in the session. */
  hasPart(id: string, partId: string): Promise<boolean>;
  /** Runs `change` on the current record atomically (the record locked meanwhile); it returns the new record or throws. */
  update<R extends SessionRecord>(id: string, change: (current: SessionRecord | undefined) => R): Promise<R>;
  /**
   * `update` committed before it returns, where the catalog can (embedded): a lease taken this
   * way costs no wait for an asynchronous commit while the part's body is held.
   */
  updateSync?<R extends SessionRecord>(id: string, change: (current: SessionRecord | undefined) => R): R;
  /** Records an acknowledged part and the session's new state together, once `check` accepts the current record. */
  addPart(session: SessionRecord, index: number, part: PartRecord, check: (current: SessionRecord | undefined) => void): Promise<void>;
  /** Every block the session's acknowledged parts cut, in order. */
  blocks(id: string): Promise<StoredBlock[]>;
  /**
   * The digests of every block cut by sessions that may still commit (Open or Committing), for
   * the embedded garbage collector; a shared catalog marks them in its own collector's mark step.
   */
  liveBlockDigests?(): Iterable<Buffer>;
  /** Forgets the session's parts (after commit, cancel or expiry); the record stays. */
  dropParts(id: string): Promise<void>;
  remove(id: string): Promise<boolean>;
  all(): AsyncIterable<SessionRecord>;
}

/**
 * The staged tails of resumable sessions: per session, the bytes after its last recorded block,
 * in one of two names that parts take in turn (a part writes the name its session's record does
 * not name, durably, before the part is recorded). In the data directory (fs) or in the
 * bucket (pg-s3, s3, where the next part may reach another node).
 */
export interface TailStaging {
  /** Writes `pieces` (in order) as the session's file `name`, replacing it whole; durable when it resolves. */
  overwrite(id: string, name: string, pieces: readonly Uint8Array[]): Promise<void>;
  /** The file's bytes, in a buffer from `take(size)`; an empty buffer for no name. */
  read(id: string, name: string | undefined, take?: (size: number) => Buffer): Promise<Buffer>;
  /** Removes one file of the session (absent is fine). */
  removeFile(id: string, name: string): Promise<void>;
  /** Removes the session's files other than `keep` (only while no part of the session runs). */
  prune(id: string, keep: string | undefined): Promise<void>;
  remove(id: string): Promise<void>;
  /** Sessions that have staged files. */
  sessions(): Promise<string[]>;
}
