// MLeap's casting rules between data types: numeric ↔ numeric, boolean ↔ numeric,
// anything → string, string → number/boolean, scalar ↔ 0-d tensor, and lists and tensors
// element-wise. Used for request columns whose type differs from the model's input type and
// between pipeline stages whose types differ.

import { transformError } from './errors.js';
import {
  NUMERIC_TYPES, sameType, typeLabel,
  type BasicType, type DataType, type Tensor, type Value,
} from './types.js';

export type Cast = (value: Value) => Value;

/** The conversion from `from` to `to`: `null` when none is needed, `undefined` when MLeap has none. */
export function caster(from: DataType, to: DataType): Cast | null | undefined {
  if (sameType(from, to)) return null;
  const element = baseCaster(from.base, to.base);
  if (element === undefined) return undefined;
  const convert = element ?? ((v: Value) => v);

  if (from.shape === 'scalar' && to.shape === 'scalar') return convert;
  if (from.shape === 'list' && to.shape === 'list') return (v) => (v as Value[]).map(convert);
  if (from.shape === 'tensor' && to.shape === 'tensor') {
    if (!NUMERIC_TYPES.has(from.base) || !NUMERIC_TYPES.has(to.base)) return undefined;
    return element === null ? null : (v) => mapTensor(v as Tensor, convert as (n: number) => number);
  }
  if (from.shape === 'scalar' && to.shape === 'tensor' && NUMERIC_TYPES.has(to.base)) {
    return (v) => ({ kind: 'dense', dims: [], values: [convert(v) as number] });
  }
  if (from.shape === 'tensor' && to.shape === 'scalar' && NUMERIC_TYPES.has(from.base)) {
    return (v) => {
      const t = v as Tensor;
      const values = t.kind === 'dense' ? t.values : t.indices.length ? t.values : [0];
      if (values.length !== 1) throw transformError(`cannot cast a tensor of ${values.length} values to ${typeLabel(to)}`);
      return convert(values[0]!);
    };
  }
  return undefined;
}

/** Element conversion between basic types: null = identity, undefined = no such cast. */
function baseCaster(from: BasicType, to: BasicType): ((v: Value) => Value) | null | undefined {
  if (from === to) return null;
  const fromNumeric = NUMERIC_TYPES.has(from);
  const toNumeric = NUMERIC_TYPES.has(to);
  if (fromNumeric && toNumeric) return toIntegral(to) ? (v) => truncate(v as number, to) : null;
  if (from === 'boolean' && toNumeric) return (v) => (v ? 1 : 0);
  if (fromNumeric && to === 'boolean') return (v) => v !== 0;
  if (to === 'string') return from === 'double' || from === 'float' ? (v) => javaDouble(v as number) : (v) => String(v);
  if (from === 'string' && toNumeric) {
    return (v) => {
      const text = (v as string).trim();
      const n = text === '' ? NaN : Number(text);
      if (Number.isNaN(n) && text !== 'NaN') throw transformError(`cannot cast "${v as string}" to ${to}`);
      return toIntegral(to) ? truncate(n, to) : n;
    };
  }
  if (from === 'string' && to === 'boolean') {
    return (v) => {
      const text = (v as string).toLowerCase();
      if (text !== 'true' && text !== 'false') throw transformError(`cannot cast "${v as string}" to boolean`);
      return text === 'true';
    };
  }
  return undefined;
}

function toIntegral(t: BasicType): boolean {
  return t === 'byte' || t === 'short' || t === 'int' || t === 'long';
}

const INTEGRAL_BITS: Partial<Record<BasicType, number>> = { byte: 8, short: 16, int: 32 };

/** Java's narrowing of a double to an integral type: toward zero, NaN → 0, wrapping like a cast. */
function truncate(n: number, to: BasicType): number {
  if (Number.isNaN(n)) return 0;
  const t = Math.trunc(n);
  const bits = INTEGRAL_BITS[to];
  if (bits === undefined) return Math.max(Math.min(t, Number.MAX_SAFE_INTEGER), Number.MIN_SAFE_INTEGER);
  const clamped = Math.max(Math.min(t, 2 ** 31 - 1), -(2 ** 31));
  return bits === 32 ? clamped : (clamped << (32 - bits)) >> (32 - bits);
}

/** `Double.toString`: 1.0, 0.001, 1.0E7, 1.234E-5, NaN, Infinity. */
export function javaDouble(n: number): string {
  if (!Number.isFinite(n)) return Number.isNaN(n) ? 'NaN' : n > 0 ? 'Infinity' : '-Infinity';
  const abs = Math.abs(n);
  if (abs === 0) return Object.is(n, -0) ? '-0.0' : '0.0';
  if (abs >= 1e-3 && abs < 1e7) {
    const s = String(n);
    return s.includes('.') ? s : `${s}.0`;
  }
  const [mantissa, exponent] = n.toExponential().split('e') as [string, string];
  return `${mantissa.includes('.') ? mantissa : `${mantissa}.0`}E${Number(exponent)}`;
}

function mapTensor(t: Tensor, f: (n: number) => number): Tensor {
  return t.kind === 'dense'
    ? { kind: 'dense', dims: t.dims, values: t.values.map(f) }
    : { kind: 'sparse', dims: t.dims, indices: t.indices, values: t.values.map(f) };
}

