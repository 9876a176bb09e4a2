import type { Database } from 'lmdb';
import type { StoredBlock } from '../block-store.js';
import { type CommittingSession, type OpenSession, PART_BLOCK_BYTES, type PartRecord, type SessionRecord, type UploadCatalog, stagedOf, unpackBlocks } from '../upload-catalog.js';
import type { CatalogEnv } from './env.js';

/** What `upload_staged` keeps of an open or committing session: what stagedOf reads. */
type StagedEntry = Pick<OpenSession | CommittingSession, 'state' | 'declaredLength' | 'offset' | 'expiresAt'>;

/**
 * Sessions in the `uploads` database, their parts in `upload_parts` and `upload_part_ids`; the
 * open sessions by tenant in `upload_staged` (written in the transaction that writes the record,
 * rebuilt at open), so a tenant's staged bytes are a short range, not a walk of every session.
 */
export class LmdbUploadCatalog implements UploadCatalog {
  readonly shared = false;
  private readonly sessions: Database<SessionRecord, string>;
  private readonly parts: Database<PartRecord, [string, number]>;
  private readonly partIds: Database<number, [string, string]>;
  private readonly staged: Database<StagedEntry, [string, string]>;

  constructor(env: CatalogEnv) {
    this.sessions = env.database<SessionRecord, string>('uploads');
    this.parts = env.database<PartRecord, [string, number]>('upload_parts') as unknown as Database<PartRecord, [string, number]>;
    this.partIds = env.database<number, [string, string]>('upload_part_ids') as unknown as Database<number, [string, string]>;
    this.staged = env.database<StagedEntry, [string, string]>('upload_staged') as unknown as Database<StagedEntry, [string, string]>;
    // Sessions written by a version without the index (or an index a crash left behind): rebuilt from the records.
    this.staged.transactionSync(() => {
      for (const key of this.staged.getKeys()) this.staged.remove(key);
      for (const { value } of this.sessions.getRange()) this.index(value);
    });
  }

  async stagedBytes(tenant: string, now: number, except?: string): Promise<number> {
    let sum = 0;
    for (const { key, value } of this.staged.getRange({ start: [tenant, ''], end: [tenant, '\uffff'] })) if (key[1] !== except) sum += stagedOf(value, now);
    return sum;
  }

  /** The session's entry in `upload_staged`, inside the transaction that writes its record. */
  private index(record: SessionRecord): void {
    if (record.state === 'Open' || record.state === 'Committing') {
      this.staged.put([record.tenant, record.id], { state: record.state, declaredLength: record.declaredLength, offset: record.offset, expiresAt: record.expiresAt });
    } else {
      this.staged.remove([record.tenant, record.id]);
    }
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    return this.sessions.get(id);
  }

  /** Whether `partId` was acknowledged in the session. */
  async hasPart(id: string, partId: string): Promise<boolean> {
    return this.partIds.doesExist([id, partId]);
  }

  /** Runs `change` on the current record in one transaction; it returns the new record or throws. */
  update<R extends SessionRecord>(id: string, change: (current: SessionRecord | undefined) => R): Promise<R> {
    return this.sessions.transaction(() => {
      const next = change(this.sessions.get(id));
      this.sessions.put(id, next);
      this.index(next);
      return next;
    });
  }

  updateSync<R extends SessionRecord>(id: string, change: (current: SessionRecord | undefined) => R): R {
    return this.sessions.transactionSync(() => {
      const next = change(this.sessions.get(id));
      this.sessions.putSync(id, next);
      this.index(next);
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
      this.index(session);
    });
  }

  /** Every block the session's acknowledged parts cut, in order. */
  async blocks(id: string): Promise<StoredBlock[]> {
    const out: StoredBlock[] = [];
    for (const { value } of this.parts.getRange({ start: [id, 0], end: [id, Number.MAX_SAFE_INTEGER] })) unpackBlocks(value.blocks, out);
    return out;
  }

  /** The digests of every block cut by sessions that may still commit (Open or Committing). */
  *liveBlockDigests(): Generator<Buffer> {
    for (const { value: session } of this.sessions.getRange()) {
      if (session.state !== 'Open' && session.state !== 'Committing') continue;
      for (const { value } of this.parts.getRange({ start: [session.id, 0], end: [session.id, Number.MAX_SAFE_INTEGER] })) {
        for (let at = 0; at < value.blocks.length; at += PART_BLOCK_BYTES) yield value.blocks.subarray(at, at + 32);
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
    return this.sessions.transaction(() => {
      const record = this.sessions.get(id);
      if (!record) return false;
      this.staged.remove([record.tenant, record.id]);
      this.sessions.remove(id);
      return true;
    });
  }

  async *all(): AsyncGenerator<SessionRecord> {
    // A snapshot: the caller awaits between records, and a read transaction must not stay open meanwhile.
    const records = [...this.sessions.getRange()].map(({ value }) => value);
    yield* records;
  }
}
