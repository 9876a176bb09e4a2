// Data types and values of leap frames, as MLeap defines them.

export type BasicType =
  | 'boolean' | 'byte' | 'short' | 'int' | 'long' | 'float' | 'double' | 'string' | 'byte_string';

export const BASIC_TYPES: readonly BasicType[] = [
  'boolean', 'byte', 'short', 'int', 'long', 'float', 'double', 'string', 'byte_string',
];

export const NUMERIC_TYPES: ReadonlySet<BasicType> = new Set(['byte', 'short', 'int', 'long', 'float', 'double']);

export type DataType =
  | { shape: 'scalar'; base: BasicType; nullable: boolean }
  | { shape: 'list'; base: BasicType; nullable: boolean }
  /** `dims` absent: any size. A dimension of -1 is also "any". */
  | { shape: 'tensor'; base: BasicType; nullable: boolean; dims?: number[] };

export interface Field {
  name: string;
  type: DataType;
}

/**
 * A tensor value. Dense: `values` in row-major order. Sparse: `indices` are flat row-major
 * offsets (for a vector: the positions), ascending, with `values` beside them.
 */
interface DenseTensor {
  kind: 'dense';
  dims: number[];
  values: number[];
}

export interface SparseTensor {
  kind: 'sparse';
  dims: number[];
  indices: number[];
  values: number[];
}

export type Tensor = DenseTensor | SparseTensor;

/**
 * One cell. Scalars are JS numbers, strings and booleans (byte_string: base64 text);
 * lists are arrays; tensors are `Tensor` objects. Rows never hold null after decoding:
 * nulls of nullable fields are imputed.
 */
export type Value = number | string | boolean | Value[] | Tensor;

export type Row = Value[];

export interface LeapFrame {
  fields: Field[];
  rows: Row[];
}

export const scalar = (base: BasicType, nullable = false): DataType => ({ shape: 'scalar', base, nullable });
export const list = (base: BasicType, nullable = false): DataType => ({ shape: 'list', base, nullable });
export const tensor = (base: BasicType, dims?: number[], nullable = false): DataType =>
  dims ? { shape: 'tensor', base, nullable, dims } : { shape: 'tensor', base, nullable };

export const DOUBLE = scalar('double');
export const STRING_LIST = list('string');

export function dense(values: number[], dims: number[] = [values.length]): DenseTensor {
  return { kind: 'dense', dims, values };
}

export function sparse(size: number, indices: number[], values: number[]): SparseTensor {
  return { kind: 'sparse', dims: [size], indices, values };
}


/** Number of elements a tensor's dims describe. */
function tensorSize(t: Tensor): number {
  let n = 1;
  for (const d of t.dims) n *= d;
  return n;
}

/** Dense copy of a tensor's values. */
export function toDense(t: Tensor): number[] {
  if (t.kind === 'dense') return t.values;
  const out = new Array<number>(tensorSize(t)).fill(0);
  for (let i = 0; i < t.indices.length; i++) out[t.indices[i]!] = t.values[i]!;
  return out;
}

export function sameType(a: DataType, b: DataType): boolean {
  if (a.shape !== b.shape || a.base !== b.base) return false;
  if (a.shape !== 'tensor' || b.shape !== 'tensor') return true;
  if (!a.dims || !b.dims) return true;
  return a.dims.length === b.dims.length && a.dims.every((d, i) => d === b.dims![i] || d < 0 || b.dims![i]! < 0);
}

/** Human label used in error messages and graphs: `double`, `list(string)`, `tensor(double, [3])`. */
export function typeLabel(t: DataType): string {
  if (t.shape === 'scalar') return t.base;
  if (t.shape === 'list') return `list(${t.base})`;
  return t.dims ? `tensor(${t.base}, [${t.dims.join(', ')}])` : `tensor(${t.base})`;
}
