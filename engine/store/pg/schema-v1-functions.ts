// Version 1 of the catalog's schema: the blob catalog's mutations as functions, so that each is
// one statement — one round trip and one transaction — and the tenant's row stays locked only
// while the function runs, not across client round trips (one tenant's publications queue on it).
//
// Every function takes row locks in one order: the tenant's `tenant_bytes` row, the manifest's
// row, block rows by key, the tenant's own rows, and a `catalog_totals` slot last. So racing
// nodes wait for each other but never in a cycle. A volatile PL/pgSQL function reads with a fresh
// snapshot per statement: after waiting for a lock it sees what the holder committed.
export const V1_FUNCTIONS = `
-- The database's clock, so that every node's records share one (GC compares ages across nodes).
CREATE FUNCTION svc_now_ms() RETURNS bigint LANGUAGE sql STABLE
  AS $$ SELECT floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint $$;

-- Adds to a random slot of the totals; called last, as the slot's row stays locked until commit.
CREATE FUNCTION svc_add_totals(p_blobs bigint, p_blocks bigint, p_bytes bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_slot smallint := floor(random() * 16);
BEGIN
  IF p_blobs = 0 AND p_blocks = 0 AND p_bytes = 0 THEN RETURN; END IF;
  UPDATE catalog_totals SET blobs = blobs + p_blobs, blocks = blocks + p_blocks, stored_bytes = stored_bytes + p_bytes
    WHERE slot = v_slot;
END $$;

-- The block records a publication references (distinct keys, sorted): a new block gets a record,
-- a reused one a fresher touched_at at most once a minute (GC's minimum age counts from the last
-- reference), a quarantined one is live again. Their rows stay locked until commit. Returns what
-- was added to the live blocks.
CREATE FUNCTION svc_record_blocks(p_keys bytea[], p_sizes bigint[], OUT added_blocks bigint, OUT added_bytes bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint := svc_now_ms();
  v_restored_blocks bigint;
  v_restored_bytes bigint;
BEGIN
  SELECT count(*) FILTER (WHERE locked.state = 'quarantined'), coalesce(sum(locked.size) FILTER (WHERE locked.state = 'quarantined'), 0)
    INTO v_restored_blocks, v_restored_bytes
    FROM (SELECT b.size, b.state FROM blocks b WHERE b.key = ANY(p_keys) ORDER BY b.key FOR UPDATE) AS locked;
  UPDATE blocks b SET touched_at = v_now, state = 'live', quarantined_at = NULL
    WHERE b.key = ANY(p_keys) AND (b.state = 'quarantined' OR b.touched_at < v_now - 60000);
  -- In key order too; a block another transaction inserted meanwhile is counted by that one.
  WITH inserted AS (
    INSERT INTO blocks (key, size, created_at, touched_at)
    SELECT input.key, input.size, v_now, v_now FROM unnest(p_keys, p_sizes) AS input(key, size) ORDER BY input.key
    ON CONFLICT (key) DO NOTHING
    RETURNING blocks.size)
  SELECT v_restored_blocks + count(*), v_restored_bytes + coalesce(sum(inserted.size), 0)
    INTO added_blocks, added_bytes FROM inserted;
END $$;

-- A publication by p_tenant. Outcomes: 'existed' (the tenant held it: nothing changed),
-- 'created' (the manifest is new) or 'added' (another tenant's manifest gains this holder: the
-- stored record is returned). A publication past p_quota raises SQLSTATE SVQ01 (nothing written).
-- refs and sizes come back only when the caller's cached record (p_cached_seq) is not this one.
CREATE FUNCTION svc_publish(
  p_tenant text, p_hex bytea, p_size bigint, p_media_type text, p_chunker text, p_refs bytea, p_sizes bytea,
  p_inline bytea, p_block_keys bytea[], p_block_sizes bigint[], p_claim_keys bytea[], p_quota bigint, p_cached_seq bigint)
RETURNS TABLE (outcome text, seq bigint, created_at bigint, media_type text, record_seq bigint, record_created_at bigint,
  record_media_type text, chunker text, inline boolean, refs bytea, sizes bytea, new_keys bytea[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_retained bigint;
  v_holders integer;
  v_record_seq bigint;
  v_created boolean;
  v_added_blocks bigint := 0;
  v_added_bytes bigint := 0;
  v_seq bigint;
  v_created_at bigint;
  v_new_keys bytea[];
BEGIN
  INSERT INTO tenant_bytes AS t (tenant, bytes) VALUES (p_tenant, 0)
    ON CONFLICT (tenant) DO UPDATE SET bytes = t.bytes RETURNING t.bytes INTO v_retained;

  RETURN QUERY SELECT 'existed'::text, h.seq, h.created_at, h.media_type, m.seq, m.created_at, m.media_type, m.chunker, m.inline,
      CASE WHEN m.seq = p_cached_seq THEN NULL ELSE m.refs END, CASE WHEN m.seq = p_cached_seq THEN NULL ELSE m.sizes END, NULL::bytea[]
    FROM tenant_blobs h JOIN manifests m ON m.hex = h.hex AND m.size = h.size
    WHERE h.tenant = p_tenant AND h.hex = p_hex AND h.size = p_size;
  IF FOUND THEN RETURN; END IF;

  IF p_quota IS NOT NULL AND v_retained + p_size > p_quota THEN
    RAISE EXCEPTION 'quota exceeded' USING ERRCODE = 'SVQ01';
  END IF;

  -- Stored once for every tenant; a racing removal that deleted the row makes this an insert.
  INSERT INTO manifests AS m (hex, size, media_type, chunker, created_at, seq, refs, sizes, inline, holders)
    VALUES (p_hex, p_size, p_media_type, p_chunker, svc_now_ms(), nextval('blob_seq'), p_refs, p_sizes, p_inline IS NOT NULL, 1)
    ON CONFLICT (hex, size) DO UPDATE SET holders = m.holders + 1
    RETURNING m.holders, m.seq INTO v_holders, v_record_seq;
  v_created := v_holders = 1;
  IF v_created AND p_inline IS NOT NULL THEN
    INSERT INTO inline_blobs (hex, size, bytes) VALUES (p_hex, p_size, p_inline);
  ELSIF v_created THEN
    SELECT r.added_blocks, r.added_bytes INTO v_added_blocks, v_added_bytes FROM svc_record_blocks(p_block_keys, p_block_sizes) r;
  END IF;

  INSERT INTO tenant_blobs (tenant, hex, size, seq, created_at, media_type)
    VALUES (p_tenant, p_hex, p_size, CASE WHEN v_created THEN v_record_seq ELSE nextval('blob_seq') END, svc_now_ms(), p_media_type)
    RETURNING seq, created_at INTO v_seq, v_created_at;
  UPDATE tenant_bytes SET bytes = bytes + p_size WHERE tenant = p_tenant;
  IF p_claim_keys IS NOT NULL THEN
    WITH claimed AS (
      INSERT INTO tenant_blocks (tenant, key) SELECT p_tenant, input.key FROM unnest(p_claim_keys) AS input(key) ORDER BY input.key
      ON CONFLICT DO NOTHING RETURNING tenant_blocks.key)
    SELECT coalesce(array_agg(claimed.key), '{}') INTO v_new_keys FROM claimed;
  END IF;
  PERFORM svc_add_totals(CASE WHEN v_created THEN 1 ELSE 0 END, v_added_blocks, v_added_bytes);

  RETURN QUERY SELECT CASE WHEN v_created THEN 'created' ELSE 'added' END, v_seq, v_created_at, p_media_type,
      m.seq, m.created_at, m.media_type, m.chunker, m.inline,
      CASE WHEN v_created OR m.seq = p_cached_seq THEN NULL ELSE m.refs END,
      CASE WHEN v_created OR m.seq = p_cached_seq THEN NULL ELSE m.sizes END, v_new_keys
    FROM manifests m WHERE m.hex = p_hex AND m.size = p_size;
END $$;

-- Block records written as for a publication, nothing else (document content keeps its own
-- manifest record). Returns the time recorded.
CREATE FUNCTION svc_record_unlisted(p_keys bytea[], p_sizes bigint[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_added_blocks bigint;
  v_added_bytes bigint;
BEGIN
  SELECT r.added_blocks, r.added_bytes INTO v_added_blocks, v_added_bytes FROM svc_record_blocks(p_keys, p_sizes) r;
  PERFORM svc_add_totals(0, v_added_blocks, v_added_bytes);
  RETURN svc_now_ms();
END $$;

-- Drops p_tenant's hold; the manifest (and its inline bytes) goes with the last holder, blocks
-- stay for GC. False when the tenant does not hold it.
CREATE FUNCTION svc_remove(p_tenant text, p_hex bytea, p_size bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_holders integer;
BEGIN
  PERFORM 1 FROM tenant_bytes t WHERE t.tenant = p_tenant FOR UPDATE;
  DELETE FROM tenant_blobs h WHERE h.tenant = p_tenant AND h.hex = p_hex AND h.size = p_size;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE manifests m SET holders = m.holders - 1 WHERE m.hex = p_hex AND m.size = p_size RETURNING m.holders INTO v_holders;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'blob catalog inconsistent: a hold on a manifest that is not there';
  END IF;
  UPDATE tenant_bytes t SET bytes = t.bytes - p_size WHERE t.tenant = p_tenant;
  IF v_holders = 0 THEN
    DELETE FROM manifests m WHERE m.hex = p_hex AND m.size = p_size;
    PERFORM svc_add_totals(-1, 0, 0);
  END IF;
  RETURN true;
END $$;
`;
