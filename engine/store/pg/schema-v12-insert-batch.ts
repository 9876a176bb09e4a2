// Version 12: records written where their keys hold none, many in one call.
//
// svc_unit_insert_absent_many (engine/store/pg/insert-batches.ts) is version 11's
// svc_unit_insert_absent for a batch: each record i is written only where its key holds none, with
// the records that go with it (`also_of` = i), and the answer says which were written. It takes
// the advisory locks of every key and table of the batch at once, in ascending id order, as one
// commit of those writes would (schema-v11-unit-insert.ts svc_unit_lock): two batches, or a batch
// and a unit's commit, never wait on each other in a circle. A key twice in one batch is written
// once (its second record finds the first). Idempotency keys' claims come in such batches when
// many creates run at once: one statement, one transaction, for all of them.
export const V12_INSERT_BATCH = `
CREATE FUNCTION svc_unit_insert_absent_many(
  p_tbls text[], p_keys bytea[], p_vals bytea[],
  also_of integer[], also_tbls text[], also_keys bytea[], also_vals bytea[],
  notify_tbls text[]
) RETURNS boolean[] LANGUAGE plpgsql AS $fn$
DECLARE
  i integer;
  inserted integer;
  written boolean[] := '{}';
BEGIN
  PERFORM svc_unit_lock(
    p_tbls || also_tbls, p_keys || also_keys, array_fill(true, ARRAY[cardinality(p_tbls) + cardinality(also_tbls)]),
    p_tbls || also_tbls, array_fill(false, ARRAY[cardinality(p_tbls) + cardinality(also_tbls)]));

  FOR i IN 1 .. coalesce(array_length(p_tbls, 1), 0) LOOP
    INSERT INTO svc_unit_rows (tbl, key, value) VALUES (p_tbls[i], p_keys[i], p_vals[i]) ON CONFLICT (tbl, key) DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    written := written || (inserted = 1);
    IF inserted = 1 THEN
      INSERT INTO svc_unit_rows (tbl, key, value)
        SELECT a.t, a.k, a.v FROM unnest(also_of, also_tbls, also_keys, also_vals) AS a(o, t, k, v) WHERE a.o = i
        ON CONFLICT (tbl, key) DO UPDATE SET value = excluded.value;
    END IF;
  END LOOP;

  IF true = ANY(written) THEN
    PERFORM pg_notify('svc_units', d.t) FROM (SELECT DISTINCT t FROM unnest(notify_tbls) AS n(t)) d;
  END IF;
  RETURN written;
END
$fn$;
`;
