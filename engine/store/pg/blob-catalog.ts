import { type BlobCatalog, type Publication, type PublishOptions, seqOfCursor } from '../blob-catalog.js';
import type { StoredBlock } from '../block-store.js';
import type { ClockReading } from '../../base/clock.js';
import type { CatalogJournal } from '../catalog-journal.js';
import { contentIdOf, formatContentId } from '../../base/content-id.js';
import { type BlobSummary, Manifest, type ManifestRecord, pack } from '../manifest.js';
import { DEFAULT_TENANT } from '../tenants.js';
import { blockArrays } from './block-arrays.js';
import { JournalFlusher } from './journal-flusher.js';
import { ManifestRecordCache } from './manifest-cache.js';
import { type PgPool, openPool } from './pool.js';
import { PG_NOTIFY_QUEUE_MAX_USAGE } from '../../base/limits.js';
import { migrate } from './schema.js';
import { PgUploadCatalog } from './upload-catalog.js';
import { PgGcCatalog } from './gc-catalog.js';
import { PgModelRegistry, type WatchOptions } from './model-registry.js';
import { PgDevSecretStore } from './dev-secret.js';
import { PgUnitStore, type PgUnitStoreOptions } from './unit-store.js';

export interface PgCatalogOptions {
  /** Connections in the pool (SVC_PG_POOL). */
  poolSize: number;
  /**
   * Where the catalog's journal of holdings goes (pg-s3: the bucket), so that the catalog can be
   * rebuilt from it. Without one the entries stay in journal_outbox.
   */
  journal?: CatalogJournal;
  /** A flush of the journal failed (its entries wait in the catalog for the next). */
  onJournalError?: (err: unknown) => void;
  /** SVC_PG_STATEMENT_TIMEOUT (default DEFAULT_STATEMENT_TIMEOUT_MS). */
  statementTimeoutMs?: number;
  /** This node's id: its LISTEN connections are named after it (pool.ts). */
  nodeId?: string;
}

/** A manifest's primary key: the id's digest as 32 bytes, and its size. */
interface BlobKey {
  hex: Buffer;
  size: number;
}

function keyOf(id: string): BlobKey | undefined {
  const parsed = contentIdOf(id);
  return parsed && { hex: Buffer.from(parsed.hex, 'hex'), size: parsed.size };
}

/** SQLSTATE svc_publish raises for a publication past the tenant's quota. */
const QUOTA_REFUSED = 'SVQ01';

/** A tenant's hold on a manifest and the manifest's record (refs and sizes null when the caller's cached record is current). */
interface HeldRow {
  seq: number;
  createdAt: number;
  mediaType: string;
  recordSeq: number;
  recordCreatedAt: number;
  recordMediaType: string;
  chunker: string;
  inline: boolean;
  refs: Buffer | null;
  sizes: Buffer | null;
}

interface PublishRow extends HeldRow {
  outcome: 'existed' | 'created' | 'added';
  newKeys: Buffer[] | null;
}

/** The manifest as a tenant published it (its own time, media type and order). */
function view(id: string, record: ManifestRecord, held: { seq: number; createdAt: number; mediaType: string }): Manifest {
  return new Manifest(id, { ...record, seq: held.seq, createdAt: held.createdAt, mediaType: held.mediaType });
}

/**
 * The blob catalog in PostgreSQL, shared by every node on the database. Each mutation is one call
 * of a function of the schema (schema-v1-functions.ts: one statement, one transaction, row locks
 * taken in one order), so racing nodes stay exact:
 * - a tenant's publications and removals are serialized by its `tenant_bytes` row, which also
 *   makes the quota check exact;
 * - a manifest's `holders` changes only under its row's lock: a removal that drops the last hold
 *   deletes the row while a racing publication of the same id by another tenant waits, and that
 *   publication's `INSERT ... ON CONFLICT` then inserts the manifest anew.
 * - svc_publish and svc_remove journal each new hold and each removal in their own transaction
 *   (journal_outbox, schema-v4-journal.ts), numbered after the tenant's row is locked, so the
 *   journal's order is commit order; a JournalFlusher takes the entries to the bucket.
 * Manifest records are immutable per incarnation and cached here; holdings never are (another
 * node may remove one at any time).
 */
export class PgBlobCatalog implements BlobCatalog {
  private readonly records = new ManifestRecordCache();
  /** Takes the journal's entries to the bucket (with a journal). */
  private readonly flusher?: JournalFlusher;

  private constructor(
    private readonly sql: PgPool,
    journal?: CatalogJournal,
    onJournalError: (err: unknown) => void = () => {},
  ) {
    if (journal) this.flusher = new JournalFlusher(sql, journal, onJournalError);
  }

  /** Opens a pool on `url` and brings the schema to the current version. */
  static async open(url: string, options: PgCatalogOptions): Promise<PgBlobCatalog> {
    const sql = openPool(url, options.poolSize, { statementTimeoutMs: options.statementTimeoutMs, nodeId: options.nodeId });
    try {
      await migrate(sql);
    } catch (err) {
      await sql.end({ timeout: 5 });
      throw err;
    }
    return new PgBlobCatalog(sql, options.journal, options.onJournalError);
  }

  async close(): Promise<void> {
    await this.flusher?.close();
    await this.sql.end({ timeout: 5 });
  }

  /** Resumable sessions, shared by every node on the database, on the same pool. */
  uploadCatalog(): PgUploadCatalog {
    return new PgUploadCatalog(this.sql);
  }

  /** The model registry every node shares, on the same pool (its watches LISTEN on connections of their own). */
  modelRegistry(options?: WatchOptions): PgModelRegistry {
    return new PgModelRegistry(this.sql, options);
  }

  /** Units of work every node shares, on the same pool (its LISTEN connection is its own: close it before this catalog). */
  unitStore(options?: PgUnitStoreOptions): PgUnitStore {
    return new PgUnitStore(this.sql, options);
  }

  /** The generated development secret every node shares, on the same pool. */
  devSecret(): PgDevSecretStore {
    return new PgDevSecretStore(this.sql);
  }

  /** Garbage collection's side of this catalog, on the same pool. */
  gcCatalog(): PgGcCatalog {
    return new PgGcCatalog(this.sql);
  }

  async get(id: string, tenant = DEFAULT_TENANT): Promise<Manifest | undefined> {
    const key = keyOf(id);
    if (!key) return undefined;
    const cached = this.records.peek(id);
    const cachedSeq = cached?.seq ?? -1;
    const [row] = await this.sql<HeldRow[]>`
      SELECT h.seq, h.created_at AS "createdAt", h.media_type AS "mediaType",
        m.seq AS "recordSeq", m.created_at AS "recordCreatedAt", m.media_type AS "recordMediaType", m.chunker, m.inline,
        CASE WHEN m.seq = ${cachedSeq} THEN NULL ELSE m.refs END AS refs,
        CASE WHEN m.seq = ${cachedSeq} THEN NULL ELSE m.sizes END AS sizes
      FROM tenant_blobs h JOIN manifests m ON m.hex = h.hex AND m.size = h.size
      WHERE h.tenant = ${tenant} AND h.hex = ${key.hex} AND h.size = ${key.size}`;
    return row && view(id, this.recordOf(id, key.size, row, cached), row);
  }

  /** The record a row describes: read from it, or `cached` when the row left the blocks out (it is that incarnation). */
  private recordOf(id: string, size: number, row: HeldRow, cached: ManifestRecord | undefined): ManifestRecord {
    if ((!row.refs || !row.sizes) && cached) return cached;
    if (!row.refs || !row.sizes) throw new Error(`manifest ${id}: the catalog left out the blocks of a record not cached`);
    const record: ManifestRecord = {
      size,
      mediaType: row.recordMediaType,
      chunker: row.chunker,
      createdAt: row.recordCreatedAt,
      seq: row.recordSeq,
      refs: row.refs,
      sizes: row.sizes,
      ...(row.inline ? { inline: true as const } : {}),
    };
    this.records.remember(id, record);
    return record;
  }

  async inlineBytes(id: string): Promise<Buffer | undefined> {
    const key = keyOf(id);
    if (!key) return undefined;
    const [row] = await this.sql<{ bytes: Buffer }[]>`SELECT bytes FROM inline_blobs WHERE hex = ${key.hex} AND size = ${key.size}`;
    return row?.bytes;
  }

  async publish(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[], inlineBytes?: Uint8Array, options: PublishOptions = {}): Promise<Publication> {
    const publication = await this.commitPublication(hex, size, mediaType, chunker, blocks, inlineBytes, options);
    // svc_publish journaled the new hold in its transaction: the flusher takes it to the bucket.
    if (!publication.existed) this.flusher?.nudge();
    return publication;
  }

  /** svc_publish: the rows of the publication, in one transaction. */
  private async commitPublication(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[], inlineBytes: Uint8Array | undefined, options: PublishOptions): Promise<Publication> {
    const id = formatContentId(hex, size);
    const key: BlobKey = { hex: Buffer.from(hex, 'hex'), size };
    const tenant = options.tenant ?? DEFAULT_TENANT;
    const { refs, sizes } = pack(blocks);
    const recorded = blockArrays(inlineBytes ? [] : blocks);
    const claimed = options.tenantBlocks ? blockArrays(blocks).keys : undefined;
    const quota = options.quotaBytes !== undefined && Number.isFinite(options.quotaBytes) ? Math.floor(options.quotaBytes) : null;
    const cached = this.records.peek(id);
    let row: PublishRow;
    try {
      [row] = await this.sql<PublishRow[]>`
        SELECT outcome, seq, created_at AS "createdAt", media_type AS "mediaType", record_seq AS "recordSeq",
          record_created_at AS "recordCreatedAt", record_media_type AS "recordMediaType", chunker, inline, refs, sizes,
          new_keys AS "newKeys"
        FROM svc_publish(${tenant}, ${key.hex}, ${size}, ${mediaType}, ${chunker}, ${refs}, ${sizes},
          ${inlineBytes ? Buffer.from(inlineBytes) : null}, ${recorded.keys}, ${recorded.sizes},
          ${claimed ?? null}, ${quota}, ${cached?.seq ?? -1})`;
    } catch (err) {
      if ((err as { code?: unknown }).code !== QUOTA_REFUSED) throw err;
      // The function's transaction is gone: the count as it stands now (the refusal's numbers).
      const retained = await this.retainedBytes(tenant).catch(() => NaN);
      throw options.quotaExceeded?.(retained) ?? new Error('quota exceeded');
    }
    // A new manifest is ours: the function does not send its blocks back.
    const record = row.outcome === 'created'
      ? { size, mediaType, chunker, createdAt: row.recordCreatedAt, seq: row.recordSeq, refs, sizes, ...(inlineBytes ? { inline: true as const } : {}) }
      : this.recordOf(id, size, row, cached);
    if (row.outcome === 'created') this.records.remember(id, record);
    const publication: Publication = { manifest: view(id, record, row), existed: row.outcome === 'existed' };
    if (claimed && row.newKeys) {
      // The first reference to a block new to the tenant is new; a repeat within the blob is not.
      const fresh = new Set(row.newKeys.map((k) => k.toString('hex')));
      publication.newToTenant = blocks.map((b) => fresh.delete(b.hex));
    }
    return publication;
  }

  async recordUnlisted(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[]): Promise<{ id: string; record: ManifestRecord }> {
    const { refs, sizes } = pack(blocks);
    const recorded = blockArrays(blocks);
    const [row] = await this.sql<{ createdAt: number }[]>`
      SELECT svc_record_unlisted(${recorded.keys}, ${recorded.sizes}) AS "createdAt"`;
    return { id: formatContentId(hex, size), record: { size, mediaType, chunker, createdAt: row.createdAt, seq: 0, refs, sizes } };
  }

  async remove(id: string, tenant = DEFAULT_TENANT): Promise<boolean> {
    const key = keyOf(id);
    if (!key) return false;
    const removed = await this.commitRemoval(tenant, key);
    if (removed) this.flusher?.nudge();
    return removed;
  }

  private async commitRemoval(tenant: string, key: BlobKey): Promise<boolean> {
    const [row] = await this.sql<{ removed: boolean }[]>`SELECT svc_remove(${tenant}, ${key.hex}, ${key.size}) AS removed`;
    return row.removed;
  }

  /** The tenant's blobs, most recently published first, below the sequence number `cursor`. */
  async page(limit: number, cursor?: string, tenant = DEFAULT_TENANT): Promise<{ summaries: BlobSummary[]; next?: string }> {
    const beforeSeq = cursor === undefined ? undefined : seqOfCursor(cursor);
    const shown = Math.max(0, limit);
    const rows = await this.sql<{ hex: Buffer; size: number; seq: number; createdAt: number; mediaType: string; chunker: string; blockCount: number }[]>`
      SELECT h.hex, h.size, h.seq, h.created_at AS "createdAt", h.media_type AS "mediaType",
        m.chunker, octet_length(m.sizes) / 4 AS "blockCount"
      FROM tenant_blobs h JOIN manifests m ON m.hex = h.hex AND m.size = h.size
      WHERE h.tenant = ${tenant} AND h.seq < ${beforeSeq ?? Number.MAX_SAFE_INTEGER}
      ORDER BY h.seq DESC LIMIT ${shown + 1}`;
    const page = rows.slice(0, shown);
    const summaries = page.map((row) => ({
      id: formatContentId(row.hex.toString('hex'), row.size),
      size: row.size,
      mediaType: row.mediaType,
      chunker: row.chunker,
      blockCount: row.blockCount,
      createdAt: new Date(row.createdAt).toISOString(),
    }));
    const last = rows.length > shown ? page.at(-1)?.seq : undefined;
    return { summaries, next: last === undefined ? undefined : String(last) };
  }

  async retainedBytes(tenant: string): Promise<number> {
    const [row] = await this.sql<{ bytes: number }[]>`SELECT bytes FROM tenant_bytes WHERE tenant = ${tenant}`;
    return row?.bytes ?? 0;
  }

  /** The tenant's kept total and a count over its range of `tenant_blobs_by_seq` (an index-only count of its own rows). */
  async tenantUsage(tenant: string): Promise<{ bytes: number; objects: number }> {
    const [row] = await this.sql<{ bytes: number; objects: number }[]>`
      SELECT coalesce((SELECT bytes FROM tenant_bytes WHERE tenant = ${tenant}), 0)::int8 AS bytes,
             (SELECT count(*) FROM tenant_blobs WHERE tenant = ${tenant})::int8 AS objects`;
    return { bytes: Number(row?.bytes ?? 0), objects: Number(row?.objects ?? 0) };
  }

  /** Sums the running totals' slots: no table is counted. */
  async totals(): Promise<{ blobs: number; blocks: number; storedBytes: number }> {
    const [row] = await this.sql<{ blobs: number; blocks: number; storedBytes: number }[]>`
      SELECT coalesce(sum(blobs), 0)::int8 AS blobs, coalesce(sum(blocks), 0)::int8 AS blocks,
        coalesce(sum(stored_bytes), 0)::int8 AS "storedBytes"
      FROM catalog_totals`;
    return row;
  }

  /**
   * PostgreSQL answers, and its notification queue is not filling up (a listener that stopped
   * reading holds it; once full, every commit that notifies fails).
   */
  async probe(): Promise<void> {
    const [row] = await this.sql<{ usage: number }[]>`SELECT pg_notification_queue_usage() AS usage`;
    if (row!.usage > PG_NOTIFY_QUEUE_MAX_USAGE) {
      throw new Error(`PostgreSQL's notification queue is ${Math.round(row!.usage * 100)}% full: a LISTEN connection is not reading (commits fail once it is full)`);
    }
  }

  /**
   * The database's clock (ms since the epoch, with fractions) and when (this process's
   * performance.now()) the query was sent and answered: the reference every pg-s3 node's clock
   * follows (engine/base/clock.ts). Timed on a connection already taken from the pool, so waiting
   * for one is no part of the round trip; clock_timestamp(), not the transaction's time.
   */
  async clockReading(): Promise<ClockReading> {
    const conn = await this.sql.reserve();
    try {
      const sent = performance.now();
      const [row] = await conn<{ ms: number }[]>`SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS ms`;
      return { reference: row!.ms, sent, received: performance.now() };
    } finally {
      conn.release();
    }
  }
}
