// Array parameters in PostgreSQL's binary array format (what array_recv reads): one Buffer each,
// which pg sends as a binary parameter. pg would send a JavaScript array as a text literal instead,
// each bytea element hex-encoded and quoted: two strings per element and a string twice the bytes'
// size, copied again into the message, all garbage once sent (most of a pg-s3 commit's allocation).
// The statement casts the parameter to its array type (`$1::bytea[]`), and array_recv refuses an
// element type other than that cast's: each encoder writes its type's exact OID. One small
// encoder per element type: each call site stays monomorphic, cheap for V8 to optimize where a
// commit inlines eighteen of them.

const BOOL = 16;
const BYTEA = 17;
const INT8 = 20;
const INT4 = 23;
const TEXT = 25;
const FLOAT8 = 701;

/** A one-dimensional array's header (lower bound 1); returns where the elements start. */
function header(out: Buffer, count: number, nulls: boolean, oid: number): number {
  out.writeInt32BE(count === 0 ? 0 : 1, 0);
  out.writeInt32BE(nulls ? 1 : 0, 4);
  out.writeInt32BE(oid, 8);
  if (count === 0) return 12;
  out.writeInt32BE(count, 12);
  out.writeInt32BE(1, 16);
  return 20;
}

const headerBytes = (count: number) => (count === 0 ? 12 : 20);

/** bytea[]: null or undefined is SQL NULL. */
export function byteaArray(values: ReadonlyArray<Uint8Array | null | undefined>): Buffer {
  let size = headerBytes(values.length);
  let nulls = false;
  for (const v of values) {
    if (v == null) nulls = true;
    size += 4 + (v == null ? 0 : v.length);
  }
  const out = Buffer.allocUnsafe(size);
  let at = header(out, values.length, nulls, BYTEA);
  for (const v of values) {
    if (v == null) {
      at = out.writeInt32BE(-1, at);
      continue;
    }
    at = out.writeInt32BE(v.length, at);
    out.set(v, at);
    at += v.length;
  }
  return out;
}

/** text[] (UTF-8), no NULLs. */
export function textArray(values: readonly string[]): Buffer {
  let size = headerBytes(values.length);
  for (const v of values) size += 4 + Buffer.byteLength(v);
  const out = Buffer.allocUnsafe(size);
  let at = header(out, values.length, false, TEXT);
  for (const v of values) {
    const written = out.write(v, at + 4, 'utf8');
    out.writeInt32BE(written, at);
    at += 4 + written;
  }
  return out;
}

/** Fixed-size elements: `width` bytes each, written by `write`; null or undefined is SQL NULL. */
function fixedArray<T>(values: ReadonlyArray<T | null | undefined>, oid: number, width: number, write: (out: Buffer, v: T, at: number) => void): Buffer {
  let size = headerBytes(values.length);
  let nulls = false;
  for (const v of values) {
    if (v == null) nulls = true;
    size += v == null ? 4 : 4 + width;
  }
  const out = Buffer.allocUnsafe(size);
  let at = header(out, values.length, nulls, oid);
  for (const v of values) {
    if (v == null) {
      at = out.writeInt32BE(-1, at);
      continue;
    }
    at = out.writeInt32BE(width, at);
    write(out, v, at);
    at += width;
  }
  return out;
}

/** boolean[]. */
export const boolArray = (values: ReadonlyArray<boolean | null | undefined>): Buffer => fixedArray(values, BOOL, 1, (out, v, at) => out.writeUInt8(v ? 1 : 0, at));

/** bigint[]: safe integers. */
export const int8Array = (values: ReadonlyArray<number | null | undefined>): Buffer => fixedArray(values, INT8, 8, (out, v, at) => out.writeBigInt64BE(BigInt(v), at));

/** integer[]. */
export const int4Array = (values: ReadonlyArray<number | null | undefined>): Buffer => fixedArray(values, INT4, 4, (out, v, at) => out.writeInt32BE(v, at));

/** float8[]. */
export const float8Array = (values: ReadonlyArray<number | null | undefined>): Buffer => fixedArray(values, FLOAT8, 8, (out, v, at) => out.writeDoubleBE(v, at));
