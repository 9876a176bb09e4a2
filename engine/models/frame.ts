// Request frames: the four shapes (Leap, Cartesian, Context, Prefixed) decoded from JSON and
// flattened to one leap frame. Nulls of nullable fields are imputed on decode.

import { frameError } from './errors.js';
import { parseFieldType } from './frame-json.js';
import { NUMERIC_TYPES, type DataType, type Field, type LeapFrame, type Row, type Tensor, type Value } from './types.js';

export interface FrameLimits {
  /** Most rows a flattened frame may have (a Cartesian product grows fast). */
  maxRows: number;
}

const MAX_NESTING = 16;

type Json = Record<string, unknown>;

/** Which share of a frame's rows one task handles: part `index` of `count` equal ranges. */
export interface FramePart {
  index: number;
  count: number;
}

/** A frame's rows of one part; `first` is the flattened index of its first row. */
export interface FrameSlice extends LeapFrame {
  first: number;
  /** Rows of the whole flattened frame. */
  total: number;
}

export function decodeFrame(json: unknown, limits: FrameLimits): LeapFrame {
  return flatten(json, limits, 0);
}

/** Row range [start, end) of part `index` of `count` over `total` rows. */
function partRange(total: number, part: FramePart): [number, number] {
  return [Math.floor((total * part.index) / part.count), Math.floor((total * (part.index + 1)) / part.count)];
}

/**
 * Decodes one part's rows. A Leap frame at the top decodes only those rows (the other parts
 * check the rest); the other shapes are flattened whole, then sliced.
 */
export function decodeFramePart(json: unknown, limits: FrameLimits, part: FramePart): FrameSlice {
  if (isObject(json) && 'schema' in json && 'rows' in json) return leapFrame(json, limits, part);
  const whole = flatten(json, limits, 0);
  const [start, end] = partRange(whole.rows.length, part);
  return { fields: whole.fields, rows: whole.rows.slice(start, end), first: start, total: whole.rows.length };
}

/**
 * Decodes a part of a split Leap frame (frame-split.ts): `json` holds the schema and only this
 * part's rows, the `first` of the `total` rows of the frame.
 */
export function decodeSplitPart(json: unknown, limits: FrameLimits, first: number, total: number): FrameSlice {
  const { schema, rows } = json as { schema: unknown; rows: unknown[] };
  const fields = schemaFields(schema, 'schema');
  checkRows(total, limits);
  const out = new Array<Row>(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = decodeRow(rows[i], fields, `row ${first + i}`);
  return { fields, rows: out, first, total };
}

function flatten(json: unknown, limits: FrameLimits, depth: number): LeapFrame {
  if (depth > MAX_NESTING) throw frameError(`frames nested deeper than ${MAX_NESTING}`);
  if (!isObject(json)) throw frameError('the body is not a frame object');
  if ('schema' in json && 'rows' in json) return leapFrame(json, limits);
  if ('contextFrame' in json && 'targetFrame' in json) return cartesian(json, limits, depth);
  if ('contextSchema' in json && 'targetSchema' in json && 'rows' in json) return contextFrame(json, limits);
  if ('frame' in json && 'prefix' in json) return prefixed(json, limits, depth);
  throw frameError('the body is none of the frame shapes: Leap {schema, rows}, Cartesian {contextFrame, targetFrame}, Context {contextSchema, targetSchema, rows}, Prefixed {frame, prefix}');
}

/** A Leap frame's rows of `part` (all of them by default), decoded; the schema always whole. */
function leapFrame(json: Json, limits: FrameLimits, part: FramePart = WHOLE): FrameSlice {
  const fields = schemaFields(json.schema, 'schema');
  if (!Array.isArray(json.rows)) throw frameError('"rows" is not a list');
  checkRows(json.rows.length, limits);
  const [start, end] = partRange(json.rows.length, part);
  const rows = new Array<Row>(end - start);
  for (let i = start; i < end; i++) rows[i - start] = decodeRow(json.rows[i], fields, `row ${i}`);
  return { fields, rows, first: start, total: json.rows.length };
}

const WHOLE: FramePart = { index: 0, count: 1 };

function cartesian(json: Json, limits: FrameLimits, depth: number): LeapFrame {
  const context = flatten(json.contextFrame, limits, depth + 1);
  const target = flatten(json.targetFrame, limits, depth + 1);
  const fields = joinFields(context.fields, target.fields);
  const contextRows = context.rows.length ? context.rows : [context.fields.map((f) => defaultValue(f.type))];
  checkRows(contextRows.length * target.rows.length, limits);
  const rows: Row[] = [];
  for (const t of target.rows) for (const c of contextRows) rows.push([...c, ...t]);
  return { fields, rows };
}

function contextFrame(json: Json, limits: FrameLimits): LeapFrame {
  const contextFields = schemaFields(json.contextSchema, 'contextSchema');
  const targetFields = schemaFields(json.targetSchema, 'targetSchema');
  const fields = joinFields(contextFields, targetFields);
  if (!Array.isArray(json.rows)) throw frameError('"rows" is not a list');
  const rows: Row[] = [];
  json.rows.forEach((entry: unknown, i) => {
    if (!isObject(entry) || !Array.isArray(entry.targetRows)) {
      throw frameError(`rows[${i}] is not {contextRow, targetRows}`);
    }
    const context = decodeRow(entry.contextRow, contextFields, `rows[${i}].contextRow`);
    checkRows(rows.length + entry.targetRows.length, limits);
    entry.targetRows.forEach((t: unknown, j: number) =>
      rows.push([...context, ...decodeRow(t, targetFields, `rows[${i}].targetRows[${j}]`)]),
    );
  });
  return { fields, rows };
}

function prefixed(json: Json, limits: FrameLimits, depth: number): LeapFrame {
  if (typeof json.prefix !== 'string') throw frameError('"prefix" is not a string');
  const inner = flatten(json.frame, limits, depth + 1);
  const prefix = json.prefix;
  return { fields: inner.fields.map((f) => ({ name: prefix + f.name, type: f.type })), rows: inner.rows };
}

function schemaFields(schema: unknown, where: string): Field[] {
  if (!isObject(schema) || !Array.isArray(schema.fields)) throw frameError(`"${where}" is not {fields: [...]}`);
  const fields = schema.fields.map((f: unknown, i: number) => {
    if (!isObject(f) || typeof f.name !== 'string') throw frameError(`${where}.fields[${i}] has no "name"`);
    return { name: f.name, type: parseFieldType(f.type, `${where}.fields[${i}] (${f.name})`) };
  });
  return joinFields(fields, []);
}

function joinFields(a: Field[], b: Field[]): Field[] {
  const seen = new Set<string>();
  for (const f of [...a, ...b]) {
    if (seen.has(f.name)) throw frameError(`struct already has field: ${f.name}`);
    seen.add(f.name);
  }
  return [...a, ...b];
}

function checkRows(count: number, limits: FrameLimits): void {
  if (count > limits.maxRows) throw frameError(`the frame has more than ${limits.maxRows} rows (MODEL_MAX_FRAME_ROWS)`);
}

function decodeRow(row: unknown, fields: Field[], where: string): Row {
  if (!Array.isArray(row)) throw frameError(`${where} is not a list`);
  if (row.length !== fields.length) {
    throw frameError(`${where} has ${row.length} values for ${fields.length} fields`);
  }
  const out = new Array<Value>(fields.length);
  for (let i = 0; i < fields.length; i++) out[i] = decodeValue(row[i], fields[i]!, where);
  return out;
}

function decodeValue(v: unknown, field: Field, where: string): Value {
  const type = field.type;
  if (v === null || v === undefined) {
    if (!type.nullable) throw frameError(`${where}: field ${field.name} is not nullable and got null`);
    return defaultValue(type);
  }
  if (type.shape === 'scalar') return decodeScalar(v, type.base, field, where);
  if (type.shape === 'list') {
    if (!Array.isArray(v)) throw frameError(`${where}: field ${field.name} expects a list`);
    return v.map((x) => decodeScalar(x, type.base, field, where));
  }
  return decodeTensor(v, type, field, where);
}

function decodeScalar(v: unknown, base: DataType['base'], field: Field, where: string): Value {
  const bad = () => frameError(`${where}: field ${field.name} expects ${base}, got ${JSON.stringify(v)?.slice(0, 40)}`);
  switch (base) {
    case 'double':
    case 'float':
      if (typeof v !== 'number') throw bad();
      return v;
    case 'byte':
    case 'short':
    case 'int':
    case 'long':
      if (typeof v !== 'number' || !Number.isInteger(v)) throw bad();
      return v;
    case 'boolean':
      if (typeof v !== 'boolean') throw bad();
      return v;
    case 'string':
      if (typeof v !== 'string') throw bad();
      return v;
    case 'byte_string':
      if (typeof v !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(v)) throw bad();
      return v;
  }
}

function decodeTensor(v: unknown, type: DataType & { shape: 'tensor' }, field: Field, where: string): Tensor {
  if (!NUMERIC_TYPES.has(type.base)) throw frameError(`${where}: field ${field.name}: tensors of ${type.base} are not supported`);
  const bad = (why: string) => frameError(`${where}: field ${field.name}: ${why}`);
  const numbers = (x: unknown): number[] => {
    if (!Array.isArray(x) || !x.every((n) => typeof n === 'number')) throw bad('tensor values must be a list of numbers');
    return x as number[];
  };
  if (Array.isArray(v)) return { kind: 'dense', dims: [v.length], values: numbers(v) };
  if (!isObject(v)) throw bad('expects a tensor: a list or {dimensions, values[, indices]}');
  const values = numbers(v.values);
  const dims = v.dimensions === undefined ? [values.length] : numbers(v.dimensions);
  if (!dims.every((d) => Number.isInteger(d) && d >= 0)) throw bad('tensor dimensions must be non-negative integers');
  const size = dims.reduce((a, b) => a * b, 1);
  if (v.indices === undefined) {
    if (values.length !== size) throw bad(`dense tensor has ${values.length} values for dimensions [${dims.join(', ')}]`);
    return { kind: 'dense', dims, values };
  }
  if (!Array.isArray(v.indices) || v.indices.length !== values.length) throw bad('sparse tensor needs one index per value');
  const flat = v.indices.map((coords: unknown) => {
    const c = numbers(coords);
    if (c.length !== dims.length) throw bad('sparse index rank differs from the dimensions');
    let offset = 0;
    for (let k = 0; k < c.length; k++) {
      if (!Number.isInteger(c[k]) || c[k]! < 0 || c[k]! >= dims[k]!) throw bad('sparse index out of bounds');
      offset = offset * dims[k]! + c[k]!;
    }
    return offset;
  });
  for (let i = 1; i < flat.length; i++) if (flat[i]! <= flat[i - 1]!) throw bad('sparse indices must be ascending');
  return { kind: 'sparse', dims, indices: flat, values };
}

/** The value a missing or null field is imputed with: 0, "", false, [], an all-zero tensor. */
export function defaultValue(type: DataType): Value {
  if (type.shape === 'list') return [];
  if (type.shape === 'tensor') {
    const dims = type.dims && type.dims.every((d) => d >= 0) ? type.dims : [0];
    return { kind: 'dense', dims, values: new Array<number>(dims.reduce((a, b) => a * b, 1)).fill(0) };
  }
  switch (type.base) {
    case 'string':
    case 'byte_string':
      return '';
    case 'boolean':
      return false;
    default:
      return 0;
  }
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
