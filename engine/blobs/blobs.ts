// The blob API's reads and deletes over the published manifests (GET /api/v1/blobs and under
// /api/v1/blobs/{id}): a tenant's manifest, its inventory a page at a time, a blob's blocks a page
// at a time, a verification of the stored bytes, a delete. Uploads are ingests (engine/cas).
import { createHash } from 'node:crypto';
import type { Piscina } from 'piscina';
import type { CursorSeal, Principal } from '../auth/index.js';
import { type ContentId, formatContentId, type VerifyTask, type VerifyTaskResult } from '../cas/index.js';
import { blobInUse, blobNotFound, invalidPagination, verificationFailure } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { Stats } from '../ops/index.js';
import { type BlobCatalog, type BlobSummary, type BlockStore, DEFAULT_TENANT, InvalidCursorError, type Manifest } from '../store/index.js';

/** The blob contract (interface.md, errors) answers a malformed cursor 400 invalid_pagination. */
const BLOB_CURSORS = { malformed: invalidPagination };

/** What else names a tenant's blobs: its S3 objects (engine/s3/blob-refs.ts BlobRefs). */
export interface BlobNames {
  /** Runs `removeHold` unless the tenant's S3 objects name the blob (the check and the removal one unit to writers); else their count. */
  removeUnlessNamed(tenant: string, blobId: string, now: number, removeHold: () => Promise<boolean>): Promise<{ removed: boolean } | { named: number }>;
}

export interface BlobsDeps {
  manifests: BlobCatalog;
  /** Where verification reads the block bytes (a worker task opens the store by its location). */
  blocks: Pick<BlockStore, 'location'>;
  cursors: CursorSeal;
  pool: Pick<Piscina, 'run'>;
  /** Corrupt blocks found by a verification are recorded here. */
  stats: Stats;
  log: Logger;
  /** The tenant's S3 objects: a blob they name is not deleted here (409 blob_in_use). */
  names?: BlobNames;
  /** `names`' clock (the pending release it records). */
  now?: () => number;
}

export class Blobs {
  constructor(private readonly deps: BlobsDeps) {}

  /**
   * The tenant's blob (another tenant's, or none: 404 blob_not_found alike). Synchronous on an
   * embedded catalog. `id` a string: an id as svc formats it (an S3 object's record names one).
   */
  manifest(id: ContentId | string, tenant = DEFAULT_TENANT): Manifest | Promise<Manifest> {
    const key = typeof id === 'string' ? id : formatContentId(id.hex, id.size);
    const found = (m: Manifest | undefined): Manifest => {
      if (!m) throw blobNotFound(key);
      return m;
    };
    const m = this.deps.manifests.get(key, tenant);
    return m instanceof Promise ? m.then(found) : found(m);
  }

  /**
   * GET /api/v1/blobs: the caller's tenant's blobs. The catalog's position (a sequence number, or
   * an S3 key) travels sealed for this caller; a token not even shaped like a cursor is the blob
   * contract's 400 invalid_pagination, one that does not open 400 invalid_cursor.
   */
  async list(limit: number, cursor?: string, principal?: Principal): Promise<{ blobs: BlobSummary[]; nextCursor?: string }> {
    const cursors = this.deps.cursors.of('blobs', principal, BLOB_CURSORS);
    const after = cursors.open(null, cursor);
    let page;
    try {
      page = await this.deps.manifests.page(limit, after, principal?.tenant ?? DEFAULT_TENANT);
    } catch (err) {
      if (err instanceof InvalidCursorError) throw invalidPagination(err.message);
      throw err;
    }
    return { blobs: page.summaries, nextCursor: page.next === undefined ? undefined : cursors.seal(null, page.next) };
  }

  /** GET /api/v1/blobs/{id}/metadata: the blob's blocks a page at a time; a cursor is bound to the blob and the caller. */
  async metadata(id: ContentId, limit: number, cursor?: string, principal?: Principal) {
    const m = await this.manifest(id, principal?.tenant ?? DEFAULT_TENANT);
    const cursors = this.deps.cursors.of('blocks', principal, BLOB_CURSORS);
    let from = 0;
    const position = cursors.open(m.id, cursor);
    if (position !== undefined) {
      from = Number(position);
      if (!/^[0-9]{1,16}$/.test(position) || from >= m.blockCount) throw invalidPagination('cursor does not belong to this blob');
    }
    const to = Math.min(m.blockCount, from + limit);
    const blocks = [];
    for (let i = from; i < to; i++) {
      const b = m.block(i);
      blocks.push({ index: i, contentId: formatContentId(b.hex, b.size), offset: b.offset, size: b.size });
    }
    return { summary: m.summary(), blocks, nextCursor: to < m.blockCount ? cursors.seal(m.id, String(to)) : undefined };
  }

  /** POST /api/v1/blobs/{id}/verify: reads the stored bytes back and hashes them; corrupt blocks are recorded. */
  async verify(id: ContentId, tenant = DEFAULT_TENANT): Promise<{ id: string; verified: boolean; bytesChecked: number }> {
    const { manifests, stats, log } = this.deps;
    const m = await this.manifest(id, tenant);
    if (m.record.inline) {
      // At most SVC_INLINE_MAX_BYTES (64 KiB): hashing here is cheaper than a worker hop.
      const bytes = await manifests.inlineBytes(m.id);
      if (!bytes) throw verificationFailure();
      const verified = createHash('sha256').update(bytes).digest('hex') === id.hex && bytes.length === id.size;
      if (!verified) stats.recordCorrupt(m.id);
      return { id: m.id, verified, bytesChecked: bytes.length };
    }
    const blocks = [];
    for (let i = 0; i < m.blockCount; i++) {
      const b = m.block(i);
      blocks.push({ hex: b.hex, size: b.size });
    }
    let result: VerifyTaskResult;
    try {
      const task: VerifyTask = { store: this.deps.blocks.location, blocks, expectedHex: id.hex };
      result = await this.deps.pool.run(task, { name: 'verify' });
    } catch (err) {
      log.error('verify: persisted bytes could not be read', { blob: m.id, err: String(err) });
      throw verificationFailure();
    }
    for (const c of result.corruptBlocks) stats.recordCorrupt(c);
    return { id: m.id, verified: result.digestHex === id.hex && result.bytesRead === id.size, bytesChecked: result.bytesRead };
  }

  /**
   * DELETE /api/v1/blobs/{id}: the tenant's hold of the manifest only; garbage collection removes
   * the blocks nothing references. Refused (409 blob_in_use) while S3 objects of the tenant name
   * the blob: they would answer NoSuchKey (delete them, and the last one releases the hold).
   */
  async delete(id: ContentId, tenant = DEFAULT_TENANT): Promise<void> {
    const key = formatContentId(id.hex, id.size);
    const { manifests, names, now = Date.now } = this.deps;
    const remove = () => manifests.remove(key, tenant);
    // An empty S3 object names the id of zero bytes, which is never a blob here.
    const outcome = names && id.size > 0 ? await names.removeUnlessNamed(tenant, key, now(), remove) : { removed: await remove() };
    if ('named' in outcome) throw blobInUse(key, outcome.named);
    if (!outcome.removed) throw blobNotFound(key);
  }
}
