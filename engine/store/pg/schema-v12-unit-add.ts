// Version 12: counters added in the commit itself (Unit.add, engine/store/unit-store.ts).
//
// svc_unit_commit gains `add_tbls`, `add_keys`, `add_deltas` (an overload; version 11's stays for
// nodes of that version): each counter row becomes its number plus the delta (absent: the delta),
// under the same locks as a write of the key (svc_unit_lock: exclusive on the key, shared on its
// table), with no read and no precondition. Before, the node read every counter it added to (a
// statement each) and committed with the bytes it read as a precondition; the clients of one
// tenant all add to its byte count, so those commits failed one another constantly, and each
// failure cost the counter's read again, the catalog schema's and every point the step read.
//
// A counter's value is msgpack, as every value (engine/store/pg/unit-store.ts, msgpackr with
// useRecords false). svc_msgpack_number decodes the forms a number takes there (positive and
// negative fixint, uint8-32, int8-32, float64; also float32 and 64-bit ints, never written) to
// float8, which holds every integer up to 2^53 exactly; the sum is float8 addition, the double
// addition LMDB's store does in JavaScript. svc_msgpack_number_bytes encodes it as msgpackr would:
// an integer in [-2^31, 2^32) in its smallest form, anything else as float64 (0xcb and 8 bytes).
// msgpackr decodes 0xcf/0xd3 as BigInt, so they are never written. A value that is no number
// raises (the commit fails with it): a counter is only ever written by add.
export const V12_UNIT_ADD = `
CREATE FUNCTION svc_msgpack_number(b bytea) RETURNS float8 LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
DECLARE
  t integer := get_byte(b, 0);
  n integer := length(b) - 1;
  raw bigint;
  e integer;
  m bigint;
  v float8;
BEGIN
  IF t < 128 THEN RETURN t; END IF;          -- positive fixint
  IF t >= 224 THEN RETURN t - 256; END IF;   -- negative fixint
  IF t NOT IN (202, 203, 204, 205, 206, 207, 208, 209, 210, 211) OR n <> (CASE WHEN t IN (204, 208) THEN 1 WHEN t IN (205, 209) THEN 2 WHEN t IN (202, 206, 210) THEN 4 ELSE 8 END) THEN
    RAISE EXCEPTION 'svc_unit_rows: a counter holds no number (msgpack type byte %)', t;
  END IF;
  -- The big-endian bytes after the type byte, unsigned below 8 bytes (8: the 64 bits as they are).
  raw := ('x' || lpad(encode(substring(b FROM 2), 'hex'), 16, '0'))::bit(64)::bigint;
  CASE t
    WHEN 204, 205, 206 THEN RETURN raw;                                          -- uint8, 16, 32
    WHEN 208, 209, 210 THEN                                                      -- int8, 16, 32
      RETURN CASE WHEN raw >= (1::bigint << (8 * n - 1)) THEN raw - (1::bigint << (8 * n)) ELSE raw END;
    WHEN 211 THEN RETURN raw;                                                    -- int64
    WHEN 207 THEN RETURN CASE WHEN raw < 0 THEN raw::float8 + 18446744073709551616::float8 ELSE raw END; -- uint64
    WHEN 202 THEN                                                                -- float32
      e := (raw >> 23) & 255;
      m := raw & 8388607;
      IF e = 255 THEN
        v := CASE WHEN m = 0 THEN 'Infinity'::float8 ELSE 'NaN'::float8 END;
      ELSIF e = 0 THEN
        v := m::float8 * power(2::float8, -149);
      ELSE
        v := (m + 8388608)::float8 * power(2::float8, e - 150);
      END IF;
      RETURN CASE WHEN raw >= 2147483648 THEN -v ELSE v END;
    ELSE                                                                         -- float64
      e := (raw >> 52) & 2047;
      m := raw & 4503599627370495;
      IF e = 2047 THEN
        v := CASE WHEN m = 0 THEN 'Infinity'::float8 ELSE 'NaN'::float8 END;
      ELSIF e = 0 THEN
        v := m::float8 * power(2::float8, -1074);
      ELSE
        v := (m + 4503599627370496)::float8 * power(2::float8, e - 1075);
      END IF;
      RETURN CASE WHEN raw < 0 THEN -v ELSE v END;
  END CASE;
END
$fn$;

CREATE FUNCTION svc_msgpack_number_bytes(x float8) RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
DECLARE
  n bigint;
  b bytea;
BEGIN
  -- NaN equals itself in PostgreSQL: excluded before trunc's test.
  IF x = 'NaN'::float8 OR x <> trunc(x) OR x < -2147483648 OR x >= 4294967296 THEN
    RETURN '\\xcb'::bytea || float8send(x);
  END IF;
  n := x::bigint;
  b := int8send(n); -- big-endian two's complement: its last 1, 2 or 4 bytes are the smaller forms
  IF n >= 0 THEN
    IF n < 128 THEN RETURN substring(b FROM 8); END IF;
    IF n < 256 THEN RETURN '\\xcc'::bytea || substring(b FROM 8); END IF;
    IF n < 65536 THEN RETURN '\\xcd'::bytea || substring(b FROM 7); END IF;
    RETURN '\\xce'::bytea || substring(b FROM 5);
  END IF;
  IF n >= -32 THEN RETURN substring(b FROM 8); END IF;
  IF n >= -128 THEN RETURN '\\xd0'::bytea || substring(b FROM 8); END IF;
  IF n >= -32768 THEN RETURN '\\xd1'::bytea || substring(b FROM 7); END IF;
  RETURN '\\xd2'::bytea || substring(b FROM 5);
END
$fn$;

CREATE FUNCTION svc_unit_commit(
  point_tbls text[], point_keys bytea[], point_vals bytea[],
  range_tbls text[], range_starts bytea[], range_ends bytea[], range_reverse boolean[], range_limits bigint[], range_counts integer[],
  entry_keys bytea[], entry_vals bytea[],
  write_tbls text[], write_keys bytea[], write_vals bytea[],
  add_tbls text[], add_keys bytea[], add_deltas float8[],
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
  -- A counter added to is a key written: exclusive on it, shared on its table.
  PERFORM svc_unit_lock(
    point_tbls || write_tbls || add_tbls, point_keys || write_keys || add_keys,
    array_fill(false, ARRAY[cardinality(point_tbls)]) || array_fill(true, ARRAY[cardinality(write_tbls) + cardinality(add_tbls)]),
    range_tbls || write_tbls || add_tbls,
    array_fill(true, ARRAY[cardinality(range_tbls)]) || array_fill(false, ARRAY[cardinality(write_tbls) + cardinality(add_tbls)]));

  -- As version 11: a key at a time, by the primary key.
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

  -- Absent: 0 + delta, as LMDB's store adds (so -0 becomes 0).
  INSERT INTO svc_unit_rows (tbl, key, value)
    SELECT a.t, a.k, svc_msgpack_number_bytes(0 + a.d) FROM unnest(add_tbls, add_keys, add_deltas) AS a(t, k, d)
    ON CONFLICT (tbl, key) DO UPDATE SET value = svc_msgpack_number_bytes(svc_msgpack_number(svc_unit_rows.value) + svc_msgpack_number(excluded.value));

  PERFORM pg_notify('svc_units', d.t) FROM (SELECT DISTINCT t FROM unnest(notify_tbls) AS w(t)) d;
  RETURN true;
END
$fn$;
`;
