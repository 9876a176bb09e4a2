// Version 11: commits that announce only the tables someone may watch, and a record written
// where its key holds none.
//
// svc_unit_commit gains `notify_tbls` (an overload; version 9's stays for nodes of that version):
// the written tables that are declared watched (engine/store/unit-store.ts), not every written
// table. A transaction that NOTIFYs takes one lock of the whole database at its commit, so every
// commit that announced went one at a time: the creates of one pg-s3 node were bounded by it.
// And it checks the keys read one at a time, by the primary key: version 9 joined the arrays with
// the table, and the plan each connection cached while the table was small scanned it whole (1.7
// of a commit's 2.5 ms at 13,000 rows, growing with every row).
//
// svc_unit_insert_absent (engine/store/pg/unit-store.ts insertIfAbsent) writes a record
// written only where its key holds none, with the records that go with it, in one round trip and
// no unit (an Idempotency-Key's claim: engine/idempotency). It takes the advisory locks a unit's
// commit of the same writes would take (schema-v9-units.ts): exclusive on each key written,
// shared on each table written, in ascending id order. So a unit that read the key absent and is
// committing either holds its lock first (this then finds its row and writes nothing) or waits,
// then fails its check on the row written here and runs again.
export const V11_UNIT_INSERT = `
-- The advisory locks of a commit (schema-v9-units.ts): on keys (table and key, each exclusive or
-- shared) and on tables (each exclusive or shared), all taken in ascending id order, a lock asked
-- in both modes once, exclusive. One function, so every writer of svc_unit_rows locks alike.
CREATE FUNCTION svc_unit_lock(
  key_tbls text[], key_keys bytea[], key_exclusive boolean[], tbls text[], tbl_exclusive boolean[]
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  wanted record;
BEGIN
  FOR wanted IN
    SELECT id, bool_or(exclusive) AS exclusive FROM (
      SELECT hashtextextended(t || ':' || encode(k, 'hex'), 0) AS id, x AS exclusive FROM unnest(key_tbls, key_keys, key_exclusive) AS l(t, k, x)
      UNION ALL SELECT hashtextextended(t, 9), x FROM unnest(tbls, tbl_exclusive) AS l(t, x)
    ) asked GROUP BY id ORDER BY id
  LOOP
    IF wanted.exclusive THEN
      PERFORM pg_advisory_xact_lock(wanted.id);
    ELSE
      PERFORM pg_advisory_xact_lock_shared(wanted.id);
    END IF;
  END LOOP;
END
$fn$;

CREATE FUNCTION svc_unit_commit(
  point_tbls text[], point_keys bytea[], point_vals bytea[],
  range_tbls text[], range_starts bytea[], range_ends bytea[], range_reverse boolean[], range_limits bigint[], range_counts integer[],
  entry_keys bytea[], entry_vals bytea[],
  write_tbls text[], write_keys bytea[], write_vals bytea[],
  notify_tbls text[]
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
  i integer;
  n integer;
  seen integer := 0;
  now_keys bytea[];
  now_vals bytea[];
  now_val bytea;
BEGIN
  PERFORM svc_unit_lock(
    point_tbls || write_tbls, point_keys || write_keys,
    array_fill(false, ARRAY[cardinality(point_tbls)]) || array_fill(true, ARRAY[cardinality(write_tbls)]),
    range_tbls || write_tbls,
    array_fill(true, ARRAY[cardinality(range_tbls)]) || array_fill(false, ARRAY[cardinality(write_tbls)]));

  -- A key at a time: a join of the arrays with the table is planned once per session, and a plan
  -- made while the table was small scans it whole (version 9's check grew with every row).
  FOR i IN 1 .. coalesce(array_length(point_tbls, 1), 0) LOOP
    SELECT r.value INTO now_val FROM svc_unit_rows r WHERE r.tbl = point_tbls[i] AND r.key = point_keys[i];
    IF now_val IS DISTINCT FROM point_vals[i] THEN
      RETURN false;
    END IF;
  END LOOP;

  FOR i IN 1 .. coalesce(array_length(range_tbls, 1), 0) LOOP
    n := range_counts[i];
    IF range_reverse[i] THEN
      SELECT coalesce(array_agg(s.key ORDER BY s.key DESC), '{}'), coalesce(array_agg(s.value ORDER BY s.key DESC), '{}')
        INTO now_keys, now_vals
        FROM (SELECT r.key, r.value FROM svc_unit_rows r
              WHERE r.tbl = range_tbls[i] AND r.key <= range_starts[i] AND r.key > range_ends[i]
              ORDER BY r.key DESC LIMIT range_limits[i]) s;
    ELSE
      SELECT coalesce(array_agg(s.key ORDER BY s.key), '{}'), coalesce(array_agg(s.value ORDER BY s.key), '{}')
        INTO now_keys, now_vals
        FROM (SELECT r.key, r.value FROM svc_unit_rows r
              WHERE r.tbl = range_tbls[i] AND r.key >= range_starts[i] AND r.key < range_ends[i]
              ORDER BY r.key LIMIT range_limits[i]) s;
    END IF;
    IF now_keys IS DISTINCT FROM coalesce(entry_keys[seen + 1 : seen + n], '{}')
       OR now_vals IS DISTINCT FROM coalesce(entry_vals[seen + 1 : seen + n], '{}') THEN
      RETURN false;
    END IF;
    seen := seen + n;
  END LOOP;

  DELETE FROM svc_unit_rows r USING unnest(write_tbls, write_keys, write_vals) AS w(t, k, v)
    WHERE w.v IS NULL AND r.tbl = w.t AND r.key = w.k;
  INSERT INTO svc_unit_rows (tbl, key, value)
    SELECT w.t, w.k, w.v FROM unnest(write_tbls, write_keys, write_vals) AS w(t, k, v) WHERE w.v IS NOT NULL
    ON CONFLICT (tbl, key) DO UPDATE SET value = excluded.value;

  PERFORM pg_notify('svc_units', d.t) FROM (SELECT DISTINCT t FROM unnest(notify_tbls) AS w(t)) d;
  RETURN true;
END
$fn$;

CREATE FUNCTION svc_unit_insert_absent(
  p_tbl text, p_key bytea, p_val bytea,
  also_tbls text[], also_keys bytea[], also_vals bytea[],
  notify_tbls text[]
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
  inserted integer;
BEGIN
  PERFORM svc_unit_lock(
    array_prepend(p_tbl, also_tbls), array_prepend(p_key, also_keys), array_fill(true, ARRAY[1 + cardinality(also_tbls)]),
    array_prepend(p_tbl, also_tbls), array_fill(false, ARRAY[1 + cardinality(also_tbls)]));

  INSERT INTO svc_unit_rows (tbl, key, value) VALUES (p_tbl, p_key, p_val) ON CONFLICT (tbl, key) DO NOTHING;
  GET DIAGNOSTICS inserted = ROW_COUNT;
  IF inserted = 0 THEN
    RETURN false;
  END IF;
  INSERT INTO svc_unit_rows (tbl, key, value)
    SELECT a.t, a.k, a.v FROM unnest(also_tbls, also_keys, also_vals) AS a(t, k, v)
    ON CONFLICT (tbl, key) DO UPDATE SET value = excluded.value;

  PERFORM pg_notify('svc_units', d.t) FROM (SELECT DISTINCT t FROM unnest(notify_tbls) AS n(t)) d;
  RETURN true;
END
$fn$;
`;
