import type { BlobCatalog, Publication, PublishOptions } from '../blob-catalog.js';
import type { StoredBlock } from '../block-store.js';
import { formatContentId } from '../../cas/content-id.js';
import { type BlobSummary, Manifest, type ManifestRecord, pack } from '../manifest.js';
import { DEFAULT_TENANT } from '../tenants.js';
import { recordBlocks } from './block-records.js';
import { addTotals, readTotals } from './catalog-totals.js';
import { ManifestRecordCache } from './manifest-cache.js';
import { BYTEA, type PgPool, type PgQueryable, type PgTransaction, openPool } from './pool.js';
import { migrate } from './schema.js';

export interface PgCatalogOptions {
  /** Connections in the pool (SVC_PG_POOL). */
  poolSize: number;
}

/** A manifest's primary key: the id's digest as 32 bytes, and its size. */
interface BlobKey {
  hex: Buffer;
  size: number;
}

const CONTENT_ID = /^sha-256:([0-9a-f]{64}):([1-9][0-9]{0,15})$/;

function keyOf(id: string): BlobKey | undefined {
  const m = CONTENT_ID.exec(id);
  return m ? { hex: Buffer.from(m[1], 'hex'), size: Number(m[2]) } : undefined;
}

/** A tenant's hold on a manifest, with the manifest's record (refs and sizes null when the cached record is current). */
interface HeldRow {
  seq: number;
  createdAt: number;
  mediaType: string;
  recordSeq: number;
  recordCreatedAt: number;
  recordMediaType: string;
  size: number;
  chunker: string;
  inline: boolean;
  refs: Buffer | null;
  sizes: Buffer | null;
}

/** The manifest as a tenant published it (its own time, media type and order). */
function view(id: string, record: ManifestRecord, held: { seq: number; createdAt: number; mediaType: string }): Manifest {
  return new Manifest(id, { ...record, seq: held.seq, createdAt: held.createdAt, mediaType: held.mediaType });
}

/**
 * The blob catalog in PostgreSQL (schema.ts), shared by every node on the database. Each mutation
 * is one transaction, and transactions take their row locks in one order — the tenant's
 * `tenant_bytes` row, the manifest's row, block rows by key, then the tenant's own rows, and a
 * `catalog_totals` slot last — so racing nodes wait for each other but never deadlock:
 * - a tenant's publications and removals are serialized by its `tenant_bytes` row, which also
 *   makes the quota check exact;
 * - a manifest's `holders` changes only under its row's lock: a removal that drops the last hold
 *   deletes the row while a racing publication of the same id by another tenant waits, and that
 *   publication's `INSERT ... ON CONFLICT` then inserts the manifest anew.
 */
export class PgBlobCatalog implements BlobCatalog {
  private readonly records = new ManifestRecordCache();

  private constructor(private readonly sql: PgPool) {}

  /** Opens a pool on `url` and brings the schema to the current version. */
  static async open(url: string, options: PgCatalogOptions): Promise<PgBlobCatalog> {
    const sql = openPool(url, options.poolSize);
    try {
      await migrate(sql);
    } catch (err) {
      await sql.end({ timeout: 5 });
      throw err;
    }
    return new PgBlobCatalog(sql);
  }

  async close(): Promise<void> {
    await this.sql.end({ timeout: 5 });
  }

  async get(id: string, tenant = DEFAULT_TENANT): Promise<Manifest | undefined> {
    const key = keyOf(id);
    if (!key) return undefined;
    const held = await this.readHeld(this.sql, id, key, tenant);
    return held && view(id, held.record, held);
  }

  /**
   * The tenant's hold and the manifest's record in one query. The record's blocks are read only
   * when the cache does not hold this incarnation of the manifest.
   */
  private async readHeld(q: PgQueryable, id: string, key: BlobKey, tenant: string): Promise<{ seq: number; createdAt: number; mediaType: string; record: ManifestRecord } | undefined> {
    const cached = this.records.peek(id);
    const [row] = await q<HeldRow[]>`
      SELECT h.seq, h.created_at AS "createdAt", h.media_type AS "mediaType",
        m.seq AS "recordSeq", m.created_at AS "recordCreatedAt", m.media_type AS "recordMediaType",
        m.size, m.chunker, m.inline,
        CASE WHEN m.seq = ${cached?.seq ?? -1} THEN NULL ELSE m.refs END AS refs,
        CASE WHEN m.seq = ${cached?.seq ?? -1} THEN NULL ELSE m.sizes END AS sizes
      FROM tenant_blobs h JOIN manifests m ON m.hex = h.hex AND m.size = h.size
      WHERE h.tenant = ${tenant} AND h.hex = ${key.hex} AND h.size = ${key.size}`.execute();
    if (!row) return undefined;
    let record = cached;
    if (row.refs && row.sizes) {
      record = {
        size: row.size,
        mediaType: row.recordMediaType,
        chunker: row.chunker,
        createdAt: row.recordCreatedAt,
        seq: row.recordSeq,
        refs: row.refs,
        sizes: row.sizes,
        ...(row.inline ? { inline: true as const } : {}),
      };
      this.records.remember(id, record);
    }
    return { seq: row.seq, createdAt: row.createdAt, mediaType: row.mediaType, record: record! };
  }

  async inlineBytes(id: string): Promise<Buffer | undefined> {
    const key = keyOf(id);
    if (!key) return undefined;
    const [row] = await this.sql<{ bytes: Buffer }[]>`SELECT bytes FROM inline_blobs WHERE hex = ${key.hex} AND size = ${key.size}`;
    return row?.bytes;
  }

  async publish(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[], inlineBytes?: Uint8Array, options: PublishOptions = {}): Promise<Publication> {
    const id = formatContentId(hex, size);
    const key: BlobKey = { hex: Buffer.from(hex, 'hex'), size };
    const tenant = options.tenant ?? DEFAULT_TENANT;
    return this.sql.begin(async (tx) => {
      // The tenant's row first (created when new): locked, it orders the tenant's writes.
      const [[retained], held] = await Promise.all([
        tx<{ bytes: number }[]>`INSERT INTO tenant_bytes (tenant, bytes) VALUES (${tenant}, 0)
          ON CONFLICT (tenant) DO UPDATE SET bytes = tenant_bytes.bytes RETURNING bytes`.execute(),
        this.readHeld(tx, id, key, tenant),
      ]);
      if (held) return { manifest: view(id, held.record, held), existed: true };
      if (options.quotaBytes !== undefined && retained.bytes + size > options.quotaBytes) {
        throw options.quotaExceeded?.() ?? new Error('quota exceeded');
      }
      const { refs, sizes } = pack(blocks);
      const inline = inlineBytes !== undefined;
      // Stored once for every tenant: a manifest another tenant holds only gains a holder.
      const [stored] = await tx<{ holders: number; seq: number; createdAt: number }[]>`
        INSERT INTO manifests (hex, size, media_type, chunker, created_at, seq, refs, sizes, inline, holders)
        VALUES (${key.hex}, ${size}, ${mediaType}, ${chunker}, svc_now_ms(), nextval('blob_seq'), ${refs}, ${sizes}, ${inline}, 1)
        ON CONFLICT (hex, size) DO UPDATE SET holders = manifests.holders + 1
        RETURNING holders, seq, created_at AS "createdAt"`;
      const created = stored.holders === 1;
      const recorded = created && !inline ? await recordBlocks(tx, blocks) : { blocks: 0, bytes: 0 };

      const [, [mine], , newKeys, record] = await Promise.all([
        created && inlineBytes ? tx`INSERT INTO inline_blobs (hex, size, bytes) VALUES (${key.hex}, ${size}, ${Buffer.from(inlineBytes)})`.execute() : undefined,
        tx<{ seq: number; createdAt: number }[]>`
          INSERT INTO tenant_blobs (tenant, hex, size, seq, created_at, media_type)
          VALUES (${tenant}, ${key.hex}, ${size}, coalesce(${created ? stored.seq : null}::int8, nextval('blob_seq')), svc_now_ms(), ${mediaType})
          RETURNING seq, created_at AS "createdAt"`.execute(),
        tx`UPDATE tenant_bytes SET bytes = bytes + ${size} WHERE tenant = ${tenant}`.execute(),
        options.tenantBlocks ? this.claimBlocks(tx, tenant, blocks) : undefined,
        created ? undefined : this.readRecord(tx, id, key),
        addTotals(tx, { blobs: created ? 1 : 0, ...recorded }),
      ]);
      const ours: ManifestRecord = { size, mediaType, chunker, createdAt: stored.createdAt, seq: stored.seq, refs, sizes, ...(inline ? { inline: true as const } : {}) };
      if (created) this.records.remember(id, ours);
      const publication: Publication = { manifest: view(id, record ?? ours, { ...mine, mediaType }), existed: false };
      if (newKeys) publication.newToTenant = blocks.map((b) => newKeys.delete(b.hex));
      return publication;
    });
  }

  /** Inside a publication: the digests among `blocks` the tenant had never referenced (now recorded as its own). */
  private claimBlocks(tx: PgTransaction, tenant: string, blocks: readonly StoredBlock[]): Promise<Set<string>> {
    const keys = [...new Set(blocks.map((b) => b.hex))].sort().map((hex) => Buffer.from(hex, 'hex'));
    return tx<{ key: Buffer }[]>`
      INSERT INTO tenant_blocks (tenant, key) SELECT ${tenant}, key FROM unnest(${tx.array(keys, BYTEA)}) AS input(key) ORDER BY key
      ON CONFLICT DO NOTHING RETURNING key`
      .execute()
      .then((rows) => new Set(rows.map((row) => row.key.toString('hex'))));
  }

  /** The stored record of a manifest (inside the transaction that holds its row). */
  private async readRecord(tx: PgTransaction, id: string, key: BlobKey): Promise<ManifestRecord> {
    const cached = this.records.peek(id);
    const [row] = await tx<{ seq: number; createdAt: number; mediaType: string; chunker: string; inline: boolean; refs: Buffer | null; sizes: Buffer | null }[]>`
      SELECT seq, created_at AS "createdAt", media_type AS "mediaType", chunker, inline,
        CASE WHEN seq = ${cached?.seq ?? -1} THEN NULL ELSE refs END AS refs,
        CASE WHEN seq = ${cached?.seq ?? -1} THEN NULL ELSE sizes END AS sizes
      FROM manifests WHERE hex = ${key.hex} AND size = ${key.size}`.execute();
    if (!row.refs || !row.sizes) return cached!;
    const record: ManifestRecord = {
      size: key.size,
      mediaType: row.mediaType,
      chunker: row.chunker,
      createdAt: row.createdAt,
      seq: row.seq,
      refs: row.refs,
      sizes: row.sizes,
      ...(row.inline ? { inline: true as const } : {}),
    };
    this.records.remember(id, record);
    return record;
  }

  async recordUnlisted(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[]): Promise<{ id: string; record: ManifestRecord }> {
    const { refs, sizes } = pack(blocks);
    const createdAt = await this.sql.begin(async (tx) => {
      const recorded = await recordBlocks(tx, blocks);
      const [[now]] = await Promise.all([
        tx<{ now: number }[]>`SELECT svc_now_ms() AS now`.execute(),
        addTotals(tx, { blobs: 0, ...recorded }),
      ]);
      return now.now;
    });
    return { id: formatContentId(hex, size), record: { size, mediaType, chunker, createdAt, seq: 0, refs, sizes } };
  }

  async remove(id: string, tenant = DEFAULT_TENANT): Promise<boolean> {
    const key = keyOf(id);
    if (!key) return false;
    return this.sql.begin(async (tx) => {
      const [, removed] = await Promise.all([
        tx`SELECT 1 FROM tenant_bytes WHERE tenant = ${tenant} FOR UPDATE`.execute(),
        tx`DELETE FROM tenant_blobs WHERE tenant = ${tenant} AND hex = ${key.hex} AND size = ${key.size} RETURNING seq`.execute(),
      ]);
      if (removed.length === 0) return false;
      const [manifest] = await tx<{ holders: number }[]>`
        UPDATE manifests SET holders = holders - 1 WHERE hex = ${key.hex} AND size = ${key.size} RETURNING holders`;
      if (!manifest) throw new Error(`blob catalog inconsistent: ${id} held by ${tenant} has no manifest`);
      const last = manifest.holders === 0;
      // The manifest goes with its last holder (its inline bytes with it); blocks stay for GC.
      await Promise.all([
        tx`UPDATE tenant_bytes SET bytes = bytes - ${key.size} WHERE tenant = ${tenant}`.execute(),
        last ? tx`DELETE FROM manifests WHERE hex = ${key.hex} AND size = ${key.size}`.execute() : undefined,
        addTotals(tx, { blobs: last ? -1 : 0, blocks: 0, bytes: 0 }),
      ]);
      return true;
    });
  }

  async page(limit: number, beforeSeq?: number, tenant = DEFAULT_TENANT): Promise<{ summaries: BlobSummary[]; nextSeq?: number }> {
    const rows = await this.sql<{ hex: Buffer; size: number; seq: number; createdAt: number; mediaType: string; chunker: string; blockCount: number }[]>`
      SELECT h.hex, h.size, h.seq, h.created_at AS "createdAt", h.media_type AS "mediaType",
        m.chunker, octet_length(m.sizes) / 4 AS "blockCount"
      FROM tenant_blobs h JOIN manifests m ON m.hex = h.hex AND m.size = h.size
      WHERE h.tenant = ${tenant} AND h.seq < ${beforeSeq ?? Number.MAX_SAFE_INTEGER}
      ORDER BY h.seq DESC LIMIT ${Math.max(0, limit) + 1}`;
    const more = rows.length > limit;
    const shown = rows.slice(0, Math.max(0, limit));
    const summaries = shown.map((row) => ({
      id: formatContentId(row.hex.toString('hex'), row.size),
      size: row.size,
      mediaType: row.mediaType,
      chunker: row.chunker,
      blockCount: row.blockCount,
      createdAt: new Date(row.createdAt).toISOString(),
    }));
    return { summaries, nextSeq: more ? shown.at(-1)?.seq : undefined };
  }

  async retainedBytes(tenant: string): Promise<number> {
    const [row] = await this.sql<{ bytes: number }[]>`SELECT bytes FROM tenant_bytes WHERE tenant = ${tenant}`;
    return row?.bytes ?? 0;
  }

  totals(): Promise<{ blobs: number; blocks: number; storedBytes: number }> {
    return readTotals(this.sql);
  }

  async probe(): Promise<void> {
    await this.sql`SELECT 1`;
  }
}
