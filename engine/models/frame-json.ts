// JSON forms of field types and values (MLeap / reference runtime encoding).
//
// Types: a shorthand string is a nullable scalar ("double", "int" or "integer", ...);
// {"type":"basic","base":"double","isNullable":false}; {"type":"list","base":"string"};
// {"type":"tensor","base":"double","dimensions":[3]}. Object forms are nullable unless
// "isNullable": false. Encoding back: nullable scalars as the shorthand, others as objects.
// Tensor values are written {"dimensions":[n],"values":[...]} (dense) or with "indices"
// (sparse, one coordinate list per value).

import { frameError } from './errors.js';
import { BASIC_TYPES, type BasicType, type DataType, type Field, type Tensor, type Value } from './types.js';

export function parseFieldType(raw: unknown, where: string): DataType {
  if (typeof raw === 'string') return { shape: 'scalar', base: basicType(raw, where), nullable: true };
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw frameError(`${where}: "type" is missing or not a type`);
  const t = raw as Record<string, unknown>;
  const base = basicType(t.base, where);
  if (t.isNullable !== undefined && typeof t.isNullable !== 'boolean') throw frameError(`${where}: "isNullable" is not a boolean`);
  const nullable = t.isNullable !== false;
  switch (t.type) {
    case 'basic':
      return { shape: 'scalar', base, nullable };
    case 'list':
      return { shape: 'list', base, nullable };
    case 'tensor': {
      if (t.dimensions === undefined) return { shape: 'tensor', base, nullable };
      if (!Array.isArray(t.dimensions) || !t.dimensions.every((d) => Number.isInteger(d))) {
        throw frameError(`${where}: tensor "dimensions" is not a list of integers`);
      }
      return { shape: 'tensor', base, nullable, dims: t.dimensions as number[] };
    }
    default:
      throw frameError(`${where}: unknown type ${JSON.stringify(t.type)} (basic, list or tensor)`);
  }
}

function basicType(raw: unknown, where: string): BasicType {
  const name = raw === 'integer' ? 'int' : raw;
  if (typeof name !== 'string' || !(BASIC_TYPES as readonly string[]).includes(name)) {
    throw frameError(`${where}: unknown base type ${JSON.stringify(raw)} (one of ${BASIC_TYPES.join(', ')})`);
  }
  return name as BasicType;
}

export function encodeFieldType(type: DataType): unknown {
  if (type.shape === 'scalar') {
    return type.nullable ? type.base : { type: 'basic', base: type.base, isNullable: false };
  }
  const out: Record<string, unknown> = { type: type.shape, base: type.base };
  if (type.shape === 'tensor' && type.dims) out.dimensions = type.dims;
  if (!type.nullable) out.isNullable = false;
  return out;
}

export function encodeSchema(fields: Field[]): unknown {
  return { fields: fields.map((f) => ({ name: f.name, type: encodeFieldType(f.type) })) };
}

/** A cell as JSON-ready data (tensors to their object form; non-finite numbers become null via JSON). */
function encodeValue(v: Value): unknown {
  if (typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(encodeValue);
  return encodeTensor(v);
}

function encodeTensor(t: Tensor): unknown {
  if (t.kind === 'dense') return { dimensions: t.dims, values: t.values };
  return { dimensions: t.dims, indices: t.indices.map((offset) => coordinates(offset, t.dims)), values: t.values };
}

/** A sparse tensor's flat row-major offset as its coordinates, e.g. 5 in [2, 3] → [1, 2]. */
export function coordinates(offset: number, dims: number[]): number[] {
  const out = new Array<number>(dims.length);
  for (let k = dims.length - 1; k >= 0; k--) {
    const d = dims[k]!;
    out[k] = offset % d;
    offset = Math.floor(offset / d);
  }
  return out;
}

export function encodeRow(row: Value[]): unknown[] {
  const out = new Array<unknown>(row.length);
  for (let i = 0; i < row.length; i++) {
    const v = row[i]!;
    out[i] = typeof v === 'object' ? encodeValue(v) : v;
  }
  return out;
}
