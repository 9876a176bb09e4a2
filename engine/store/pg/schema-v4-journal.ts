// Version 4: the catalog journals itself. svc_publish and svc_remove (replaced here, otherwise as
// in version 1) add an entry to `journal_outbox` in their own transaction: a put with the tenant's
// new hold as the catalog keeps it, a remove when a hold goes. Every node's flusher
// (engine/store/pg/journal-flusher.ts) moves the entries to segments in the bucket. A tenant's
// publications and removals are serialized by its tenant_bytes row, taken before the entry's
// number is drawn: for each (tenant, blob), number order is commit order.
export const V4_JOURNAL = `
CREATE SEQUENCE journal_seq;

CREATE TABLE journal_outbox (
  seq bigint PRIMARY KEY DEFAULT nextval('journal_seq'),
  op text NOT NULL CHECK (op IN ('put', 'remove')),
  tenant text NOT NULL,
  hex bytea NOT NULL,
  size bigint NOT NULL,
  created_at bigint,
  media_type text,
  chunker text,
  refs bytea,
  sizes bytea,
  inline bytea,
  claims boolean
);

CREATE OR REPLACE FUNCTION svc_publish(
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
  -- The tenant's new hold, as the catalog keeps it (the stored manifest may be another tenant's).
  INSERT INTO journal_outbox (op, tenant, hex, size, created_at, media_type, chunker, refs, sizes, inline, claims)
    SELECT 'put', p_tenant, p_hex, p_size, v_created_at, p_media_type, m.chunker, m.refs, m.sizes,
      CASE WHEN m.inline THEN (SELECT i.bytes FROM inline_blobs i WHERE i.hex = p_hex AND i.size = p_size) END,
      p_claim_keys IS NOT NULL
    FROM manifests m WHERE m.hex = p_hex AND m.size = p_size;

  RETURN QUERY SELECT CASE WHEN v_created THEN 'created' ELSE 'added' END, v_seq, v_created_at, p_media_type,
      m.seq, m.created_at, m.media_type, m.chunker, m.inline,
      CASE WHEN v_created OR m.seq = p_cached_seq THEN NULL ELSE m.refs END,
      CASE WHEN v_created OR m.seq = p_cached_seq THEN NULL ELSE m.sizes END, v_new_keys
    FROM manifests m WHERE m.hex = p_hex AND m.size = p_size;
END $$;

CREATE OR REPLACE FUNCTION svc_remove(p_tenant text, p_hex bytea, p_size bigint) RETURNS boolean
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
  INSERT INTO journal_outbox (op, tenant, hex, size) VALUES ('remove', p_tenant, p_hex, p_size);
  IF v_holders = 0 THEN
    DELETE FROM manifests m WHERE m.hex = p_hex AND m.size = p_size;
    PERFORM svc_add_totals(-1, 0, 0);
  END IF;
  RETURN true;
END $$;
`;
