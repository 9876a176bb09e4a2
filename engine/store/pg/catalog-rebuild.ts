// The PostgreSQL side of `svc catalog rebuild`: the journal's records and the bucket's block
// objects are loaded into temporary tables a segment at a time, then each catalog table is derived
// from them in one statement, all in one transaction (a rebuild that fails leaves the catalog
// empty, as before).
import type { JournalRecord } from '../catalog-journal.js';
import { type PgSql, openPool } from './pool.js';
import { migrate } from './schema.js';

export interface RebuildSources {
  /** Every journal record, a segment at a time. */
  records: AsyncIterable<JournalRecord[]>;
  /** The block objects of an area of the bucket, a page at a time. */
  blockObjects(area: 'blocks' | 'quarantine'): AsyncIterable<{ hex: string; size: number }[]>;
  /** Moves a quarantined block back to the live area. */
  restore(hex: string, size: number): Promise<'live' | 'restored' | 'missing'>;
  progress(line: string): void;
}

export interface RebuildSummary {
  blobs: number;
  /** Holdings the journal leaves (its last entry for a tenant's blob is a put). */
  holdings: number;
  /** Journal entries read (puts and removals). */
  entries: number;
  blocks: number;
  /** Bytes of the blocks recorded (the catalog's stored bytes). */
  bytes: number;
  tenants: number;
  /** Referenced blocks found only in GC's quarantine, moved back. */
  restoredBlocks: number;
  /** Referenced blocks with no object in the bucket: their blobs cannot be read. */
  missingBlocks: number;
}

/** The catalog holds manifests: a rebuild would mix two catalogs. */
export class CatalogNotEmpty extends Error {}

/** The tables a rebuild fills (with --force they are emptied first). */
const CATALOG_TABLES = 'manifests, inline_blobs, tenant_blobs, tenant_bytes, tenant_blocks, blocks, gc_marks';

export async function rebuildPgCatalog(url: string, sources: RebuildSources, options: { force: boolean }): Promise<RebuildSummary> {
  const sql = openPool(url, 2);
  try {
    await migrate(sql);
    return await sql.begin(async (tx) => {
      // Nodes publishing meanwhile would wait on this lock rather than interleave (run none).
      await tx`LOCK TABLE manifests, tenant_blobs IN EXCLUSIVE MODE`;
      const [held] = await tx<{ n: number }[]>`SELECT (SELECT count(*) FROM manifests) + (SELECT count(*) FROM tenant_blobs) AS n`;
      if (held.n > 0 && !options.force) {
        throw new CatalogNotEmpty(`the catalog is not empty (${held.n} manifests and holdings): rebuild needs an empty database, or --force to empty it first`);
      }
      if (options.force) {
        await tx.unsafe(`TRUNCATE ${CATALOG_TABLES}; UPDATE catalog_totals SET blobs = 0, blocks = 0, stored_bytes = 0`);
      }
      await tx.unsafe(`
        CREATE TEMP TABLE rebuild_entries (seq bigint PRIMARY KEY, removed boolean, tenant text, hex bytea, size bigint,
          created_at bigint, media_type text, chunker text, refs bytea, sizes bytea, inline bytea, claims boolean) ON COMMIT DROP;
        CREATE TEMP TABLE rebuild_holdings (tenant text, hex bytea, size bigint, created_at bigint, media_type text,
          chunker text, refs bytea, sizes bytea, inline bytea, claims boolean, PRIMARY KEY (tenant, hex, size)) ON COMMIT DROP;
        CREATE TEMP TABLE rebuild_objects (key bytea, area text, PRIMARY KEY (key, area)) ON COMMIT DROP`);
      const entries = await loadEntries(tx, sources);
      const holdings = await lastEntries(tx);
      await loadObjects(tx, sources);
      sources.progress(`${holdings} holdings read; deriving the catalog`);
      await derive(tx);
      const { restoredBlocks, missingBlocks } = await restoreBlocks(tx, sources);
      const [totals] = await tx<{ blobs: number; blocks: number; bytes: number; tenants: number }[]>`
        SELECT (SELECT count(*) FROM manifests) AS blobs, (SELECT count(*) FROM blocks) AS blocks,
          (SELECT coalesce(sum(size), 0) FROM blocks)::int8 AS bytes, (SELECT count(*) FROM tenant_bytes) AS tenants`;
      return { ...totals, holdings, entries, restoredBlocks, missingBlocks };
    }, { unbounded: true });
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function loadEntries(tx: PgSql, sources: RebuildSources): Promise<number> {
  let n = 0;
  let segments = 0;
  for await (const page of sources.records) {
    if (page.length === 0) continue;
    const holding = (r: JournalRecord) => (r.entry.op === 'put' ? r.entry.holding : undefined);
    const tenantOf = (r: JournalRecord) => (r.entry.op === 'put' ? r.entry.holding.tenant : r.entry.tenant);
    const idOf = (r: JournalRecord) => (r.entry.op === 'put' ? r.entry.holding.id : r.entry.id);
    await tx`
      INSERT INTO rebuild_entries
      SELECT * FROM unnest(${page.map((r) => r.seq)}::int8[], ${page.map((r) => r.entry.op === 'remove')}::boolean[], ${page.map(tenantOf)}::text[],
        ${page.map((r) => Buffer.from(idOf(r).slice(8, 72), 'hex'))}::bytea[], ${page.map((r) => Number(idOf(r).slice(73)))}::int8[],
        ${page.map((r) => holding(r)?.createdAt ?? null)}::int8[], ${page.map((r) => holding(r)?.mediaType ?? null)}::text[],
        ${page.map((r) => holding(r)?.chunker ?? null)}::text[], ${page.map((r) => holding(r)?.refs ?? null)}::bytea[],
        ${page.map((r) => holding(r)?.sizes ?? null)}::bytea[], ${page.map((r) => holding(r)?.inline ?? null)}::bytea[],
        ${page.map((r) => holding(r)?.claims === true)}::boolean[])
      ON CONFLICT DO NOTHING`;
    n += page.length;
    if (++segments % 100 === 0) sources.progress(`${n} journal entries read`);
  }
  // New entries must come after every one found.
  await tx`SELECT setval('journal_seq', greatest((SELECT max(seq) FROM rebuild_entries), 1), (SELECT count(*) > 0 FROM rebuild_entries))`;
  return n;
}

/** The holdings the journal leaves: for each tenant's blob, its last entry, when that is a put. */
async function lastEntries(tx: PgSql): Promise<number> {
  const [row] = await tx<{ n: number }[]>`
    WITH inserted AS (
      INSERT INTO rebuild_holdings
      SELECT tenant, hex, size, created_at, media_type, chunker, refs, sizes, inline, claims FROM (
        SELECT DISTINCT ON (tenant, hex, size) * FROM rebuild_entries ORDER BY tenant, hex, size, seq DESC
      ) last WHERE NOT removed
      RETURNING 1)
    SELECT count(*)::int8 AS n FROM inserted`;
  return row!.n;
}

async function loadObjects(tx: PgSql, sources: RebuildSources): Promise<void> {
  for (const area of ['blocks', 'quarantine'] as const) {
    let n = 0;
    for await (const page of sources.blockObjects(area)) {
      if (page.length === 0) continue;
      await tx`INSERT INTO rebuild_objects SELECT unnest(${page.map((o) => Buffer.from(o.hex, 'hex'))}::bytea[]), ${area} ON CONFLICT DO NOTHING`;
      n += page.length;
    }
    sources.progress(`${n} objects listed in ${area}/`);
  }
}

/** Each table from the holdings, as svc_publish would have left it had they been published in createdAt order. */
async function derive(tx: PgSql): Promise<void> {
  await tx.unsafe(`
    -- Fresh seqs in publication order (ties broken by tenant, then id).
    INSERT INTO tenant_blobs (tenant, hex, size, seq, created_at, media_type)
    SELECT tenant, hex, size, row_number() OVER (ORDER BY created_at, tenant, hex, size), created_at, media_type
    FROM rebuild_holdings;

    -- A manifest is its first holder's publication (the record svc_publish stored), held by all.
    INSERT INTO manifests (hex, size, media_type, chunker, created_at, seq, refs, sizes, inline, holders)
    SELECT DISTINCT ON (h.hex, h.size) h.hex, h.size, h.media_type, h.chunker, h.created_at, t.seq, h.refs, h.sizes,
      h.inline IS NOT NULL, count(*) OVER (PARTITION BY h.hex, h.size)
    FROM rebuild_holdings h JOIN tenant_blobs t ON t.tenant = h.tenant AND t.hex = h.hex AND t.size = h.size
    ORDER BY h.hex, h.size, h.created_at, h.tenant;

    INSERT INTO inline_blobs (hex, size, bytes)
    SELECT DISTINCT ON (h.hex, h.size) h.hex, h.size, h.inline
    FROM rebuild_holdings h JOIN manifests m ON m.hex = h.hex AND m.size = h.size
    WHERE m.inline AND h.inline IS NOT NULL
    ORDER BY h.hex, h.size, h.created_at;

    INSERT INTO tenant_bytes (tenant, bytes) SELECT tenant, sum(size) FROM rebuild_holdings GROUP BY tenant;

    INSERT INTO tenant_blocks (tenant, key)
    SELECT DISTINCT h.tenant, substring(h.refs FROM i * 40 + 1 FOR 32)
    FROM rebuild_holdings h CROSS JOIN LATERAL generate_series(0, length(h.refs) / 40 - 1) AS i
    WHERE h.claims;

    -- A block record per block of a stored manifest: created with its first reference, touched
    -- by its last (GC's minimum age counts from there). Sizes are uint32 little-endian.
    INSERT INTO blocks (key, size, created_at, touched_at)
    SELECT substring(m.refs FROM i * 40 + 1 FOR 32),
      max(get_byte(m.sizes, i * 4)::int8 + (get_byte(m.sizes, i * 4 + 1)::int8 << 8)
        + (get_byte(m.sizes, i * 4 + 2)::int8 << 16) + (get_byte(m.sizes, i * 4 + 3)::int8 << 24)),
      min(t.created_at), max(t.created_at)
    FROM manifests m JOIN tenant_blobs t ON t.hex = m.hex AND t.size = m.size
      CROSS JOIN LATERAL generate_series(0, length(m.refs) / 40 - 1) AS i
    WHERE NOT m.inline
    GROUP BY 1;

    -- Totals in one slot: the others start at zero.
    UPDATE catalog_totals SET blobs = 0, blocks = 0, stored_bytes = 0;
    UPDATE catalog_totals SET blobs = (SELECT count(*) FROM manifests), blocks = (SELECT count(*) FROM blocks),
      stored_bytes = (SELECT coalesce(sum(size), 0) FROM blocks)
    WHERE slot = 0;

    SELECT setval('blob_seq', greatest((SELECT max(seq) FROM tenant_blobs), 1), (SELECT count(*) > 0 FROM tenant_blobs))`);
}

/** Referenced blocks found only in quarantine go back to the live area; those found nowhere are counted. */
async function restoreBlocks(tx: PgSql, sources: RebuildSources): Promise<{ restoredBlocks: number; missingBlocks: number }> {
  const absent = await tx<{ key: Buffer; size: number; quarantined: boolean }[]>`
    SELECT b.key, b.size, EXISTS (SELECT 1 FROM rebuild_objects q WHERE q.key = b.key AND q.area = 'quarantine') AS quarantined
    FROM blocks b WHERE NOT EXISTS (SELECT 1 FROM rebuild_objects o WHERE o.key = b.key AND o.area = 'blocks')`;
  let restoredBlocks = 0;
  let missingBlocks = 0;
  for (const block of absent) {
    const outcome = block.quarantined ? await sources.restore(block.key.toString('hex'), block.size) : 'missing';
    if (outcome === 'missing') missingBlocks++;
    else restoredBlocks++;
  }
  if (absent.length > 0) sources.progress(`${restoredBlocks} quarantined blocks moved back, ${missingBlocks} missing from the bucket`);
  return { restoredBlocks, missingBlocks };
}
