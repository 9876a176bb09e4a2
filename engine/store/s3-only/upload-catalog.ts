// Resumable sessions of the S3-only backend, in the bucket, so that a part, a commit or a cancel
// may reach any node (as pg-s3's are in PostgreSQL). Layout (keys.ts):
//
//   upload-sessions/<id>                  the record (JSON); every change a compare-and-swap on
//                                         its ETag (If-Match; the first If-None-Match: *)
//   upload-parts/<id>/<index>             an acknowledged part: its id, offset, length and blocks
//   upload-parts/<id>/ids/<partId>/<index>  empty: part `partId` was written at `index`
//
// A part is counted by the record (index < partCount), never by its object alone: the part object
// is written before the record's compare-and-swap that counts it, and an object at an index the
// record does not count yet is an orphan of a lost race (its writer died, or lost its lease),
// overwritten by the next writer there. Only the holder of the session's lease may write at
// `partCount`: the first write is a create (If-None-Match: *); one refused finds an orphan, and
// the writer replaces it (If-Match of the ETag it read) only after reading the record again and
// finding its lease there. So a writer whose lease was taken over can neither replace the part its
// successor wrote (the record no longer names its lease) nor race it unseen (its If-Match names an
// ETag the successor's write changed), and once counted a part object never changes.
//
// hasPart must be exact: a part id replayed answers with the durable offset, one not applied is
// applied once. The record does not list part ids: 8,192 parts (SVC_UPLOAD_MAX_PARTS) of ~40 bytes
// would be rewritten by every lease, renewal and part. Instead each part leaves a marker keyed by
// part id and index; a part id is acknowledged when a marker's index is counted and the part object
// there carries that id (a marker of a lost race points at an uncounted index, or at one whose
// counted part is another's). One listing of a short prefix, usually empty.
//
// A session's tenant is in its record only: an empty marker upload-tenant-sessions/<tenant>/<id>,
// written before the first record and removed once the session is no longer open, lets a tenant's
// staged bytes be read from its own sessions' records (a marker whose record is missing or
// terminal counts nothing, and is removed when seen).
//
// Without conditional writes (a server that ignores them runs one node: refused.ts) the
// conditions are not sent; a queue per session in this process keeps its changes in order.
import type { StoredBlock } from '../block-store.js';
import { KeyQueue } from '../key-queue.js';
import { PART_BLOCK_BYTES, type PartRecord, type SessionRecord, type UploadCatalog, stagedOf, unpackBlocks } from '../upload-catalog.js';
import type { S3OnlyKeys } from './keys.js';
import { type ObjectIo, mapLimited } from './objects.js';

interface SessionDocV1 {
  v: 1;
  record: SessionRecord;
}

/** A part object's header (JSON, one line), before its packed blocks. */
interface PartHeaderV1 {
  v: 1;
  partId: string;
  offset: number;
  length: number;
}

const READ_CONCURRENCY = 16;
/** A tenant marker without its record this long is a creation that never happened (the marker comes first). */
const ORPHAN_MARKER_MS = 60 * 60_000;
/** A compare-and-swap lost this long in a row gives up (the session is changed that hard elsewhere). */
const CAS_GIVE_UP_MS = 30_000;

export class S3OnlyUploadCatalog implements UploadCatalog {
  readonly shared = true;
  /** This process's changes of one session, one at a time: fewer lost swaps, and the only order without conditions. */
  private readonly local = new KeyQueue();

  constructor(
    private readonly io: ObjectIo,
    private readonly keys: S3OnlyKeys,
  ) {}

  async get(id: string): Promise<SessionRecord | undefined> {
    return (await this.read(id))?.record;
  }

  async stagedBytes(tenant: string, now: number, except?: string): Promise<number> {
    const prefix = this.keys.uploadTenantSessionsPrefix(tenant);
    const markers: Array<{ key: string; id: string; lastModifiedMs: number }> = [];
    for await (const page of this.io.pages(prefix)) {
      for (const o of page) {
        const id = decodeURIComponent(o.key.slice(prefix.length));
        if (id !== except) markers.push({ key: o.key, id, lastModifiedMs: o.lastModifiedMs });
      }
    }
    const staged = await mapLimited(markers, READ_CONCURRENCY, async (m) => {
      const record = await this.get(m.id);
      const settled = record ? record.state !== 'Open' && record.state !== 'Committing' : now - m.lastModifiedMs > ORPHAN_MARKER_MS;
      if (settled) await this.io.delete(m.key);
      return record && record.tenant === tenant ? stagedOf(record, now) : 0;
    });
    return staged.reduce((sum, n) => sum + n, 0);
  }

  async hasPart(id: string, partId: string): Promise<boolean> {
    const indexes: number[] = [];
    const prefix = this.keys.uploadPartIdPrefix(id, partId);
    for await (const page of this.io.pages(prefix)) for (const o of page) indexes.push(Number(o.key.slice(prefix.length)));
    if (indexes.length === 0) return false;
    const record = await this.get(id);
    if (!record) return false;
    for (const index of indexes) {
      if (!(index < record.partCount)) continue;
      if ((await this.readPart(id, index))?.header.partId === partId) return true;
    }
    return false;
  }

  update<R extends SessionRecord>(id: string, change: (current: SessionRecord | undefined) => R): Promise<R> {
    return this.local.run(id, async () => {
      const started = Date.now();
      for (let attempt = 0; ; attempt++) {
        const read = await this.read(id);
        // On the latest record: a refused swap reads again and asks `change` again.
        const next = change(read?.record);
        if (read && JSON.stringify(next) === JSON.stringify(read.record)) return next;
        if (!read) await this.io.put(this.keys.uploadTenantSession(next.tenant, id), Buffer.alloc(0), undefined, 'application/octet-stream');
        if ((await this.writeRecord(next, read?.etag)) !== 'refused') {
          if (next.state !== 'Open' && next.state !== 'Committing') await this.io.delete(this.keys.uploadTenantSession(next.tenant, id));
          return next;
        }
        await backoff(id, attempt, started);
      }
    });
  }

  addPart(session: SessionRecord, index: number, part: PartRecord, check: (current: SessionRecord | undefined) => void): Promise<void> {
    return this.local.run(session.id, async () => {
      const started = Date.now();
      let written = false;
      for (let attempt = 0; ; attempt++) {
        const read = await this.current(session.id, index, check);
        if (!written) {
          await this.writePart(session.id, index, part, check, started);
          // The marker after the part: a marker always has its part object (or an orphan's) to read.
          await this.io.put(this.keys.uploadPartId(session.id, part.partId, index), Buffer.alloc(0), undefined, 'application/octet-stream');
          written = true;
        }
        // Nobody else may change the part object now: the record names this lease (see the top).
        if ((await this.writeRecord(session, read.etag)) !== 'refused') return;
        await backoff(session.id, attempt, started);
      }
    });
  }

  async blocks(id: string): Promise<StoredBlock[]> {
    const record = await this.get(id);
    if (!record || record.partCount === 0) return [];
    const parts = await mapLimited(Array.from({ length: record.partCount }, (_, i) => i), READ_CONCURRENCY, (i) => this.readPart(id, i));
    const out: StoredBlock[] = [];
    let offset = 0;
    for (const [i, part] of parts.entries()) {
      // A counted part is never missing or out of place; if one is, the commit must not publish a wrong object.
      if (!part) throw new Error(`upload session ${id}: part ${i} of ${record.partCount} is missing from the bucket`);
      if (part.header.offset !== offset) throw new Error(`upload session ${id}: part ${i} starts at ${part.header.offset}, the parts before it end at ${offset}`);
      offset += part.header.length;
      unpackBlocks(part.blocks, out);
    }
    return out;
  }

  /**
   * Packed blocks (PART_BLOCK_BYTES each) for garbage collection's marks: with `since` 0, the
   * counted parts of every session that may still commit (Open or Committing), and with any
   * `since`, every part object written since then (`fresh`: by its LastModified), counted or not
   * (a part counted after the records were read, or one about to be).
   */
  async *markableParts(since: number, fresh: (lastModifiedMs: number) => boolean): AsyncGenerator<Buffer> {
    const live = new Map<string, number>();
    if (since === 0) for await (const r of this.all()) if (r.state === 'Open' || r.state === 'Committing') live.set(r.id, r.partCount);
    for await (const page of this.io.pages(this.keys.uploadPartsRoot())) {
      const wanted = page.filter((o) => {
        const part = this.keys.parseUploadPart(o.key);
        return part !== undefined && (fresh(o.lastModifiedMs) || part.index < (live.get(part.id) ?? 0));
      });
      const docs = await mapLimited(wanted, READ_CONCURRENCY, (o) => this.io.get(o.key));
      for (const doc of docs) if (doc) yield decodePart(doc.body).blocks;
    }
  }

  dropParts(id: string): Promise<void> {
    return this.local.run(id, () => this.deleteParts(id));
  }

  remove(id: string): Promise<boolean> {
    return this.local.run(id, async () => {
      const record = await this.get(id);
      const existed = record !== undefined;
      if (record) await this.io.delete(this.keys.uploadTenantSession(record.tenant, id));
      if (existed) await this.io.delete(this.keys.uploadSession(id));
      // A part a stale writer left after the parts were dropped goes with the record.
      await this.deleteParts(id);
      return existed;
    });
  }

  async *all(): AsyncGenerator<SessionRecord> {
    for await (const page of this.io.pages(this.keys.uploadSessionsPrefix())) {
      const docs = await mapLimited(page, READ_CONCURRENCY, (o) => this.io.get(o.key));
      for (const doc of docs) if (doc) yield parseSession(doc.body).record;
    }
  }

  private async read(id: string): Promise<{ record: SessionRecord; etag: string } | undefined> {
    const got = await this.io.get(this.keys.uploadSession(id));
    return got ? { record: parseSession(got.body).record, etag: got.etag } : undefined;
  }

  private writeRecord(record: SessionRecord, etag: string | undefined): Promise<{ etag: string } | 'refused'> {
    const doc: SessionDocV1 = { v: 1, record };
    return this.io.put(this.keys.uploadSession(record.id), Buffer.from(JSON.stringify(doc)), etag ? { ifMatch: etag } : { ifNoneMatch: true });
  }

  /** The record, once `check` accepts it (this lease still holds) and it counts `index` parts. */
  private async current(id: string, index: number, check: (current: SessionRecord | undefined) => void): Promise<{ record: SessionRecord; etag: string }> {
    const read = await this.read(id);
    check(read?.record);
    if (!read || read.record.partCount !== index) throw new Error(`upload session ${id}: part ${index} recorded while the session counts ${read?.record.partCount ?? 'no'} parts`);
    return read;
  }

  /** Writes the part at `index`: a create, or over an orphan while the record still names this lease (see the top). */
  private async writePart(id: string, index: number, part: PartRecord, check: (current: SessionRecord | undefined) => void, started: number): Promise<void> {
    const key = this.keys.uploadPart(id, index);
    const body = encodePart(part);
    let put = await this.io.put(key, body, { ifNoneMatch: true }, 'application/octet-stream');
    for (let attempt = 0; put === 'refused'; attempt++) {
      const orphan = await this.io.get(key);
      // Read after the orphan: if the record still names this lease, no successor has written here.
      await this.current(id, index, check);
      put = await this.io.put(key, body, orphan ? { ifMatch: orphan.etag } : { ifNoneMatch: true }, 'application/octet-stream');
      if (put === 'refused') await backoff(id, attempt, started);
    }
  }

  private async readPart(id: string, index: number): Promise<{ header: PartHeaderV1; blocks: Buffer } | undefined> {
    const got = await this.io.get(this.keys.uploadPart(id, index));
    return got ? decodePart(got.body) : undefined;
  }

  private async deleteParts(id: string): Promise<void> {
    const keys: string[] = [];
    for await (const page of this.io.pages(this.keys.uploadParts(id))) for (const o of page) keys.push(o.key);
    await mapLimited(keys, READ_CONCURRENCY, (key) => this.io.delete(key));
  }
}

function parseSession(body: Buffer): SessionDocV1 {
  const doc = JSON.parse(body.toString('utf8')) as SessionDocV1;
  if (doc.v !== 1) throw new Error(`upload session record version ${String(doc.v)} is not known to this svc`);
  return doc;
}

/** One line of JSON, then the packed blocks. */
function encodePart(part: PartRecord): Buffer {
  const header: PartHeaderV1 = { v: 1, partId: part.partId, offset: part.offset, length: part.length };
  return Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), part.blocks]);
}

function decodePart(body: Buffer): { header: PartHeaderV1; blocks: Buffer } {
  const end = body.indexOf(0x0a);
  const header = JSON.parse(body.toString('utf8', 0, end < 0 ? body.length : end)) as PartHeaderV1;
  const blocks = body.subarray(end + 1);
  if (end < 0 || header.v !== 1 || blocks.length % PART_BLOCK_BYTES !== 0) throw new Error('upload part object: not a version-1 part');
  return { header, blocks };
}

/** Waits a little after a lost compare-and-swap; gives up after CAS_GIVE_UP_MS. */
async function backoff(id: string, attempt: number, started: number): Promise<void> {
  if (Date.now() - started > CAS_GIVE_UP_MS) throw new Error(`upload session ${id}: compare-and-swap lost for ${CAS_GIVE_UP_MS} ms`);
  await new Promise((resolve) => setTimeout(resolve, Math.min(200, 5 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random())));
}
