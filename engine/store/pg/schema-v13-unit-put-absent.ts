// Version 13: records a unit puts only where their key holds none (Unit.putIfAbsent,
// engine/store/unit-store.ts), each with a counter added to only if it was written; and the blob
// catalog's records of blocks written by a unit's commit (Unit.recordBlocks).
//
// svc_unit_commit gains `absent_tbls`, `absent_keys`, `absent_vals` (the records) and `counted_of`,
// `counted_tbls`, `counted_keys`, `counted_deltas` (counters, each naming the record by its place,
// from 1): an overload; version 12's stays for nodes of that version (nodes of this one call this
// overload for every commit, with or without such records). It takes every lock of the commit at
// once, in one order (each such record's key and counter exclusive, their tables shared: as a write
// of them), then runs version 12's checks and writes (whose own locks are then held already), then
// inserts each record where its key holds none and adds the counters of those it inserted. So two
// units that put one key both commit, one writes, and its counter is added to once; a unit that
// read the key absent and commits after fails its check and runs again. Before, the bytes' PUT read
// the tenant's content ledger and the content key in a statement of its own to decide these writes.
//
// `block_keys`, `block_sizes` (each digest once, sorted): recorded last, as svc_record_unlisted
// records them (schema-v1-functions.ts: block rows in key order, then a slot of the totals), only
// once the checks passed. The bytes' PUT made that call a statement of its own before its unit;
// now the unit that names the blocks records them. Locks: the unit's advisory locks first, then
// block rows, then a totals slot; no transaction takes them the other way round (the catalog's
// functions take no advisory lock of the units), so no cycle.
export const V13_UNIT_PUT_ABSENT = `
CREATE FUNCTION svc_unit_commit(
  point_tbls text[], point_keys bytea[], point_vals bytea[],
  range_tbls text[], range_starts bytea[], range_ends bytea[], range_reverse boolean[], range_limits bigint[], range_counts integer[],
  entry_keys bytea[], entry_vals bytea[],
  write_tbls text[], write_keys bytea[], write_vals bytea[],
  add_tbls text[], add_keys bytea[], add_deltas float8[],
  absent_tbls text[], absent_keys bytea[], absent_vals bytea[],
  counted_of integer[], counted_tbls text[], counted_keys bytea[], counted_deltas float8[],
  block_keys bytea[], block_sizes bigint[],
  notify_tbls text[]
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
  i integer;
  inserted integer;
  written integer[] := '{}';
  added_blocks bigint;
  added_bytes bigint;
  exclusive_tbls text[] := write_tbls || add_tbls || absent_tbls || counted_tbls;
  exclusive_keys bytea[] := write_keys || add_keys || absent_keys || counted_keys;
BEGIN
  PERFORM svc_unit_lock(
    point_tbls || exclusive_tbls, point_keys || exclusive_keys,
    array_fill(false, ARRAY[cardinality(point_tbls)]) || array_fill(true, ARRAY[cardinality(exclusive_tbls)]),
    range_tbls || exclusive_tbls,
    array_fill(true, ARRAY[cardinality(range_tbls)]) || array_fill(false, ARRAY[cardinality(exclusive_tbls)]));

  IF NOT svc_unit_commit(point_tbls, point_keys, point_vals, range_tbls, range_starts, range_ends, range_reverse, range_limits, range_counts,
      entry_keys, entry_vals, write_tbls, write_keys, write_vals, add_tbls, add_keys, add_deltas, notify_tbls) THEN
    RETURN false;
  END IF;

  FOR i IN 1 .. coalesce(array_length(absent_tbls, 1), 0) LOOP
    INSERT INTO svc_unit_rows (tbl, key, value) VALUES (absent_tbls[i], absent_keys[i], absent_vals[i]) ON CONFLICT (tbl, key) DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    IF inserted > 0 THEN
      written := written || i;
    END IF;
  END LOOP;

  -- One row per counter (a statement may not update a row twice), as version 12 adds.
  INSERT INTO svc_unit_rows (tbl, key, value)
    SELECT c.t, c.k, svc_msgpack_number_bytes(0 + sum(c.d)) FROM unnest(counted_of, counted_tbls, counted_keys, counted_deltas) AS c(i, t, k, d)
    WHERE c.i = ANY(written) GROUP BY c.t, c.k
    ON CONFLICT (tbl, key) DO UPDATE SET value = svc_msgpack_number_bytes(svc_msgpack_number(svc_unit_rows.value) + svc_msgpack_number(excluded.value));

  IF cardinality(block_keys) > 0 THEN
    SELECT r.added_blocks, r.added_bytes INTO added_blocks, added_bytes FROM svc_record_blocks(block_keys, block_sizes) r;
    PERFORM svc_add_totals(0, added_blocks, added_bytes);
  END IF;
  RETURN true;
END
$fn$;
`;
