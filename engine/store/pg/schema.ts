// The catalog's schema in PostgreSQL, created and migrated by svc itself. `svc_schema` holds the
// version; every node runs `migrate` at start, and the advisory lock makes nodes that start at
// once apply each migration exactly once (the others wait, then find nothing to do).
import type { PgPool } from './pool.js';

/** Times are milliseconds since the epoch (bigint), as in the embedded catalog's records. */
const V1_BLOB_CATALOG = `
CREATE SEQUENCE blob_seq AS bigint;

-- The database's clock, so that every node's records share one (GC compares ages across nodes).
CREATE FUNCTION svc_now_ms() RETURNS bigint LANGUAGE sql STABLE
  AS $$ SELECT floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint $$;

-- A published manifest, stored once whoever published it; holders counts the tenants holding it
-- (0 only inside the removal that deletes the row).
CREATE TABLE manifests (
  hex bytea NOT NULL CHECK (octet_length(hex) = 32),
  size bigint NOT NULL,
  media_type text NOT NULL,
  chunker text NOT NULL,
  created_at bigint NOT NULL,
  seq bigint NOT NULL,
  refs bytea NOT NULL,
  sizes bytea NOT NULL,
  inline boolean NOT NULL DEFAULT false,
  holders integer NOT NULL CHECK (holders >= 0),
  PRIMARY KEY (hex, size)
);

-- The bytes of a small blob kept in the catalog; they go with its manifest.
CREATE TABLE inline_blobs (
  hex bytea NOT NULL,
  size bigint NOT NULL,
  bytes bytea NOT NULL,
  PRIMARY KEY (hex, size),
  FOREIGN KEY (hex, size) REFERENCES manifests ON DELETE CASCADE
);

-- A tenant's hold on a manifest: its own order, time and media type.
CREATE TABLE tenant_blobs (
  tenant text NOT NULL,
  hex bytea NOT NULL,
  size bigint NOT NULL,
  seq bigint NOT NULL,
  created_at bigint NOT NULL,
  media_type text NOT NULL,
  PRIMARY KEY (tenant, hex, size)
);
-- A tenant's inventory, newest first.
CREATE UNIQUE INDEX tenant_blobs_by_seq ON tenant_blobs (tenant, seq DESC);

-- The bytes of the distinct blobs a tenant holds (its quota's measure); the row is also the
-- lock that orders one tenant's publications and removals.
CREATE TABLE tenant_bytes (
  tenant text PRIMARY KEY,
  bytes bigint NOT NULL CHECK (bytes >= 0)
);

-- The blocks a tenant has referenced (newToTenant).
CREATE TABLE tenant_blocks (
  tenant text NOT NULL,
  key bytea NOT NULL,
  PRIMARY KEY (tenant, key)
);

-- One record per stored block (GC: its age and its state).
CREATE TABLE blocks (
  key bytea PRIMARY KEY CHECK (octet_length(key) = 32),
  size bigint NOT NULL,
  created_at bigint NOT NULL,
  touched_at bigint NOT NULL,
  state text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'quarantined')),
  quarantined_at bigint
);

-- Running totals kept by the transactions that change them, spread over slots so that
-- concurrent publications do not all wait for one row; totals() sums the slots.
CREATE TABLE catalog_totals (
  slot smallint PRIMARY KEY,
  blobs bigint NOT NULL DEFAULT 0,
  blocks bigint NOT NULL DEFAULT 0,
  stored_bytes bigint NOT NULL DEFAULT 0
);
INSERT INTO catalog_totals (slot) SELECT generate_series(0, 15);
`;

/** Applied in order; the schema's version is the number applied. Never edit one that shipped: append. */
export const MIGRATIONS: readonly string[] = [V1_BLOB_CATALOG];

/** Slots of `catalog_totals` (as created by the migrations). */
export const TOTALS_SLOTS = 16;

export class SchemaTooNew extends Error {}

/** Brings the database's schema to the latest version; returns the versions before and after. */
export async function migrate(sql: PgPool): Promise<{ from: number; to: number }> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext('svc_schema'))`;
    await tx`CREATE TABLE IF NOT EXISTS svc_schema (
      only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
      version integer NOT NULL
    )`;
    const [row] = await tx<{ version: number }[]>`SELECT version FROM svc_schema`;
    const from = row?.version ?? 0;
    if (from > MIGRATIONS.length) {
      throw new SchemaTooNew(`the catalog's schema is version ${from}, newer than this svc knows (${MIGRATIONS.length}): upgrade svc`);
    }
    for (const migration of MIGRATIONS.slice(from)) await tx.unsafe(migration);
    await tx`INSERT INTO svc_schema (version) VALUES (${MIGRATIONS.length})
      ON CONFLICT (only_row) DO UPDATE SET version = excluded.version`;
    return { from, to: MIGRATIONS.length };
  });
}
