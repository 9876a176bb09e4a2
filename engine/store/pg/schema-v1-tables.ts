// Version 1 of the catalog's schema: the blob catalog's tables. Times are milliseconds since the
// epoch (bigint), as in the embedded catalog's records, from the database's clock (svc_now_ms).
export const V1_TABLES = `
CREATE SEQUENCE blob_seq AS bigint;

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
