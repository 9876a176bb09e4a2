// Version 9: units of work (engine/store/pg/unit-store.ts). Every table of the UnitStore is rows
// of one table, keyed by ordered-binary bytes: bytea compares as memcmp, then shorter first,
// which is LMDB's key order, so ranges answer what the node's LMDB answers.
//
// svc_unit_commit is a unit's commit in one round trip: lock, check every precondition, write,
// notify; false (nothing written) when a precondition no longer holds. Locks, all transaction-
// scoped advisory locks taken in ascending id order (so two commits cannot wait on each other):
//   - a key read:     shared on the key (readers of one key that write elsewhere do not wait)
//   - a key written:  exclusive on the key (two commits that both saw it, or its absence, serialize;
//                     the second then sees the first's write and fails its check)
//   - a range read:   exclusive on its table
//   - a table written: shared on the table (writers of a table do not wait on each other, only on
//                     a range reader, whose range cannot then change between its check and commit)
// A lock id asked in both modes is taken once, exclusive. Under READ COMMITTED each statement of
// this (volatile) function reads a snapshot taken after the locks were granted: the checks see
// every commit that held a conflicting lock before.
//
// Ranges travel flattened: range i has its bounds (the store fills absent ones with '\\x' and
// '\\xff', below and above every ordered-binary key), its direction, its limit (NULL: none) and
// range_counts[i] expected entries, the next ones of entry_keys/entry_vals in the order read.
export const V9_UNITS = `
CREATE TABLE svc_unit_rows (
  tbl text COLLATE "C" NOT NULL,
  key bytea NOT NULL,
  value bytea NOT NULL,
  PRIMARY KEY (tbl, key)
);

CREATE FUNCTION svc_unit_commit(
  point_tbls text[], point_keys bytea[], point_vals bytea[],
  range_tbls text[], range_starts bytea[], range_ends bytea[], range_reverse boolean[], range_limits bigint[], range_counts integer[],
  entry_keys bytea[], entry_vals bytea[],
  write_tbls text[], write_keys bytea[], write_vals bytea[]
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
  wanted record;
  i integer;
  n integer;
  seen integer := 0;
  now_keys bytea[];
  now_vals bytea[];
BEGIN
  FOR wanted IN
    SELECT id, bool_or(exclusive) AS exclusive FROM (
      SELECT hashtextextended(t || ':' || encode(k, 'hex'), 0) AS id, false AS exclusive FROM unnest(point_tbls, point_keys) AS p(t, k)
      UNION ALL SELECT hashtextextended(t || ':' || encode(k, 'hex'), 0), true FROM unnest(write_tbls, write_keys) AS w(t, k)
      UNION ALL SELECT hashtextextended(t, 9), true FROM unnest(range_tbls) AS r(t)
      UNION ALL SELECT hashtextextended(t, 9), false FROM unnest(write_tbls) AS w(t)
    ) asked GROUP BY id ORDER BY id
  LOOP
    IF wanted.exclusive THEN
      PERFORM pg_advisory_xact_lock(wanted.id);
    ELSE
      PERFORM pg_advisory_xact_lock_shared(wanted.id);
    END IF;
  END LOOP;

  IF EXISTS (
    SELECT 1 FROM unnest(point_tbls, point_keys, point_vals) AS p(t, k, v)
    LEFT JOIN svc_unit_rows r ON r.tbl = p.t AND r.key = p.k
    WHERE r.value IS DISTINCT FROM p.v
  ) THEN
    RETURN false;
  END IF;

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

  PERFORM pg_notify('svc_units', d.t) FROM (SELECT DISTINCT t FROM unnest(write_tbls) AS w(t)) d;
  RETURN true;
END
$fn$;
`;
