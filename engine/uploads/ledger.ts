// Resumable upload sessions in LMDB: the owner of the `uploads`, `upload_parts` and
// `upload_part_ids` databases. A session's record holds its state, offset, lease and the staged
// tail; each acknowledged part keeps the blocks it cut, so a commit only reads what is durable.

import type { Database } from 'lmdb';
import type { StoredBlock } from '../cas/block-task.js';
import type { Decision } from '../cas/ingest.js';
import type { CatalogEnv } from '../store/catalog.js';

export type SessionState = 'Open' | 'Committing' | 'Committed' | 'Cancelled' | 'Expired';

export interface Lease {
  kind: 'part' | 'commit';
  /** The process that holds it (a lease of an earlier process is dead). */
  owner: string;
  /** This lease among those of the same process. */
  token: string;
  until: number;
}

export interface SessionRecord {
  id: string;
  tenant: string;
  state: SessionState;
  /** Bytes acknowledged. */
  offset: number;
  declaredLength?: number;
  partCount: number;
  contentType?: string;
  createdAt: number;
  expiresAt: number;
  committedBlob?: string;
  lease?: Lease;
  /** Object offset where the staged tail (bytes after the last cut) begins. */
  tailStart: number;
  /** The staged file holding the tail; absent while the tail is empty. */
  tail?: string;
  /** Chunker and media type, once the object's first 4 KiB decided them. */
  decided?: Decision;
  /** The blob id a commit is publishing (recovery after a crash during commit). */
  pendingBlob?: string;
}

interface PartRecord {
  partId: string;
  offset: number;
  length: number;
  /** The blocks this part cut: per block 32-byte digest, 8-byte xxh64, 4-byte size, 1 byte fresh. */
  blocks: Buffer;
}

const BLOCK_BYTES = 45;

export function packBlocks(blocks: readonly StoredBlock[]): Buffer {
  const out = Buffer.allocUnsafe(blocks.length * BLOCK_BYTES);
  blocks.forEach((b, i) => {
    const at = i * BLOCK_BYTES;
    out.write(b.hex, at, 'hex');
    out.writeBigUInt64LE(b.checksum, at + 32);
    out.writeUInt32LE(b.size, at + 40);
    out[at + 44] = b.fresh ? 1 : 0;
  });
  return out;
}

function unpackBlocks(packed: Buffer, into: StoredBlock[]): void {
  for (let at = 0; at < packed.length; at += BLOCK_BYTES) {
    into.push({ hex: packed.toString('hex', at, at + 32), checksum: packed.readBigUInt64LE(at + 32), size: packed.readUInt32LE(at + 40), fresh: packed[at + 44] === 1 });
  }
}

export class UploadLedger {
  private readonly sessions: Database<SessionRecord, string>;
  private readonly parts: Database<PartRecord, [string, number]>;
  private readonly partIds: Database<number, [string, string]>;

  constructor(env: CatalogEnv) {
    this.sessions = env.database<SessionRecord, string>('uploads');
    this.parts = env.database<PartRecord, [string, number]>('upload_parts') as unknown as Database<PartRecord, [string, number]>;
    this.partIds = env.database<number, [string, string]>('upload_part_ids') as unknown as Database<number, [string, string]>;
  }

  get(id: string): SessionRecord | undefined {
    return this.sessions.get(id);
  }

  /** Whether `partId` was acknowledged in the session. */
  hasPart(id: string, partId: string): boolean {
    return this.partIds.doesExist([id, partId]);
  }

  /** Runs `change` on the current record in one transaction; it returns the new record or throws. */
  update(id: string, change: (current: SessionRecord | undefined) => SessionRecord): Promise<SessionRecord> {
    return this.sessions.transaction(() => {
      const next = change(this.sessions.get(id));
      this.sessions.put(id, next);
      return next;
    });
  }

  /** `update` as one synchronous transaction (a lease is taken before a request body is read). */
  updateSync(id: string, change: (current: SessionRecord | undefined) => SessionRecord): SessionRecord {
    return this.sessions.transactionSync(() => {
      const next = change(this.sessions.get(id));
      this.sessions.putSync(id, next);
      return next;
    });
  }

  /** Records an acknowledged part and the session's new state together, once `check` accepts the current record. */
  addPart(session: SessionRecord, index: number, part: PartRecord, check: (current: SessionRecord | undefined) => void): Promise<void> {
    return this.sessions.transaction(() => {
      check(this.sessions.get(session.id));
      this.parts.put([session.id, index], part);
      this.partIds.put([session.id, part.partId], index);
      this.sessions.put(session.id, session);
    });
  }

  /** Every block the session's acknowledged parts cut, in order. */
  blocks(id: string): StoredBlock[] {
    const out: StoredBlock[] = [];
    for (const { value } of this.parts.getRange({ start: [id, 0], end: [id, Number.MAX_SAFE_INTEGER] })) unpackBlocks(value.blocks, out);
    return out;
  }

  /** The digests of every block cut by sessions that may still commit (Open or Committing). */
  *liveBlockDigests(): Generator<Buffer> {
    for (const { value: session } of this.sessions.getRange()) {
      if (session.state !== 'Open' && session.state !== 'Committing') continue;
      for (const { value } of this.parts.getRange({ start: [session.id, 0], end: [session.id, Number.MAX_SAFE_INTEGER] })) {
        for (let at = 0; at < value.blocks.length; at += BLOCK_BYTES) yield value.blocks.subarray(at, at + 32);
      }
    }
  }

  /** Forgets the session's parts (after commit, cancel or expiry); the record stays. */
  dropParts(id: string): Promise<void> {
    return this.sessions.transaction(() => {
      for (const key of this.parts.getKeys({ start: [id, 0], end: [id, Number.MAX_SAFE_INTEGER] })) this.parts.remove(key);
      for (const key of this.partIds.getKeys({ start: [id, ''], end: [id, '\uffff'] })) this.partIds.remove(key);
    });
  }

  remove(id: string): Promise<boolean> {
    return this.sessions.remove(id);
  }

  *all(): Generator<SessionRecord> {
    for (const { value } of this.sessions.getRange()) yield value;
  }
}

export { type PartRecord };
