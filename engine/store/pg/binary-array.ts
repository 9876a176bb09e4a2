// An array parameter in PostgreSQL's binary array format (what array_recv reads): one Buffer, which
// pg sends as a binary parameter. pg would send a JavaScript array as a text literal instead, each
// bytea element hex-encoded and quoted: two strings per element and a string twice the bytes' size,
// copied again into the message, all garbage once sent (most of a pg-s3 commit's allocation).
// The statement casts the parameter to its array type (`$1::bytea[]`), and array_recv refuses an
// element type other than that cast's: each element kind below carries its exact OID.

export type ArrayElement = 'bytea' | 'text' | 'bool' | 'int8' | 'int4' | 'float8';

type Value<E extends ArrayElement> = E extends 'bytea' ? Uint8Array : E extends 'text' ? string : E extends 'bool' ? boolean : number;

const OID: Record<ArrayElement, number> = { bool: 16, bytea: 17, int8: 20, int4: 23, text: 25, float8: 701 };
/** The bytes of a fixed-size element. */
const FIXED: Partial<Record<ArrayElement, number>> = { bool: 1, int8: 8, int4: 4, float8: 8 };

/**
 * `values` as a one-dimensional array of `element`, from index 1 (null or undefined: SQL NULL).
 * int8 values must be safe integers; text is UTF-8.
 */
export function binaryArray<E extends ArrayElement>(element: E, values: ReadonlyArray<Value<E> | null | undefined>): Buffer {
  const fixed = FIXED[element];
  // The header: dimensions, has-nulls, element type; then, with one dimension, its length and lower bound.
  let size = values.length === 0 ? 12 : 20;
  let nulls = 0;
  for (const v of values) {
    if (v === null || v === undefined) {
      nulls = 1;
      size += 4;
    } else size += 4 + (fixed ?? (element === 'text' ? Buffer.byteLength(v as string) : (v as Uint8Array).length));
  }
  const out = Buffer.allocUnsafe(size);
  out.writeInt32BE(values.length === 0 ? 0 : 1, 0);
  out.writeInt32BE(nulls, 4);
  out.writeInt32BE(OID[element], 8);
  if (values.length === 0) return out;
  out.writeInt32BE(values.length, 12);
  out.writeInt32BE(1, 16);
  let at = 20;
  for (const v of values) {
    if (v === null || v === undefined) {
      at = out.writeInt32BE(-1, at);
      continue;
    }
    switch (element) {
      case 'bytea':
        at = out.writeInt32BE((v as Uint8Array).length, at);
        out.set(v as Uint8Array, at);
        at += (v as Uint8Array).length;
        break;
      case 'text': {
        const written = out.write(v as string, at + 4, 'utf8');
        out.writeInt32BE(written, at);
        at += 4 + written;
        break;
      }
      case 'bool':
        at = out.writeInt32BE(1, at);
        at = out.writeUInt8(v ? 1 : 0, at);
        break;
      case 'int4':
        at = out.writeInt32BE(4, at);
        at = out.writeInt32BE(v as number, at);
        break;
      case 'int8':
        at = out.writeInt32BE(8, at);
        at = out.writeBigInt64BE(BigInt(v as number), at);
        break;
      case 'float8':
        at = out.writeInt32BE(8, at);
        at = out.writeDoubleBE(v as number, at);
        break;
    }
  }
  return out;
}
