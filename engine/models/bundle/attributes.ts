// Typed reading of a model.json `attributes` map (MLeap's JSON attribute encoding).
//
//   scalar:  {"double": 1.5}  {"long": 9}  {"string": "keep"}  {"boolean": true}
//   list:    {"type": "list", "string": ["a", "b"]}   (an empty list may have no value key)
//   tensor:  {"type": "tensor", "double": [..], "shape": {"dimensions": [{"size": 3, "name": ""}]}}
//   data_shape: {"data_shape": {"base": "scalar"|"list"|"tensor", "isNullable": true, "tensorShape": ..}}
//
// The writer omits default values, so false / 0 / "" may appear as `{}`: a getter reads `{}`
// as its type's zero. Non-finite doubles are written as null; they read as NaN here, and
// `doublesWithInfinities` reads null list ends as -Infinity / +Infinity (bucketizer splits).

import { bundleError } from '../errors.js';
import { BASIC_TYPES, type BasicType, type DataType } from '../types.js';

type Raw = Record<string, unknown>;

interface TensorAttribute {
  dims: number[];
  values: number[];
}

const NUMBER_KEYS = ['double', 'long', 'int', 'float', 'short', 'byte'];

export class Attributes {
  constructor(
    private readonly raw: Raw,
    /** Where the attributes came from, for messages (bundle path). */
    readonly where: string,
  ) {}

  has(name: string): boolean {
    return this.raw[name] !== undefined;
  }

  names(): string[] {
    return Object.keys(this.raw);
  }

  double(name: string, fallback?: number): number {
    const v = this.entry(name, fallback);
    if (typeof v === 'number') return v;
    return this.pickNumber(name, v as Raw);
  }

  /** long, int, short or byte attribute (also accepts a double holding an integer). */
  integer(name: string, fallback?: number): number {
    const n = this.double(name, fallback);
    if (!Number.isInteger(n)) throw this.bad(name, 'an integer');
    return n;
  }

  string(name: string, fallback?: string): string {
    const v = this.entry(name, fallback);
    if (typeof v === 'string') return v;
    const o = v as Raw;
    if (Object.keys(o).length === 0) return '';
    if (typeof o.string !== 'string') throw this.bad(name, 'a string');
    return o.string;
  }

  boolean(name: string, fallback?: boolean): boolean {
    const v = this.entry(name, fallback);
    if (typeof v === 'boolean') return v;
    const o = v as Raw;
    if (Object.keys(o).length === 0) return false;
    if (typeof o.boolean !== 'boolean') throw this.bad(name, 'a boolean');
    return o.boolean;
  }

  strings(name: string, fallback?: string[]): string[] {
    if (!this.has(name) && fallback) return fallback;
    const values = this.listValues(name, 'string');
    if (!values.every((s) => typeof s === 'string')) throw this.bad(name, 'a list of strings');
    return values as string[];
  }

  /** A numeric list or a 1-D tensor as plain numbers (null → NaN). */
  doubles(name: string, fallback?: number[]): number[] {
    if (!this.has(name) && fallback) return fallback;
    const o = this.entry(name, undefined) as Raw;
    if (o.type === 'tensor') return this.tensor(name).values;
    return this.numberList(name, o);
  }

  /** Like `doubles`, but a null first element is -Infinity and a null last one +Infinity. */
  doublesWithInfinities(name: string): number[] {
    const o = this.entry(name, undefined) as Raw;
    const key = NUMBER_KEYS.find((k) => Array.isArray(o[k]));
    const raw = key ? (o[key] as unknown[]) : [];
    return raw.map((x, i) => {
      if (typeof x === 'number') return x;
      if (x === null && i === 0) return -Infinity;
      if (x === null && i === raw.length - 1) return Infinity;
      if (x === null) return NaN;
      throw this.bad(name, 'a list of numbers');
    });
  }

  integers(name: string, fallback?: number[]): number[] {
    const values = this.doubles(name, fallback);
    if (!values.every(Number.isInteger)) throw this.bad(name, 'a list of integers');
    return values;
  }

  tensor(name: string, fallback?: TensorAttribute): TensorAttribute {
    if (!this.has(name) && fallback) return fallback;
    return this.readTensor(name, this.entry(name, undefined) as Raw);
  }

  /** A list of tensors (k-means cluster centres). */
  tensors(name: string): TensorAttribute[] {
    const o = this.entry(name, undefined) as Raw;
    const items = o.tensor;
    if (items === undefined) return [];
    if (!Array.isArray(items)) throw this.bad(name, 'a list of tensors');
    return items.map((t) => this.readTensor(name, t as Raw));
  }

  dataShape(name: string, fallback?: DataType): DataType {
    if (!this.has(name) && fallback) return fallback;
    return this.readDataShape(name, (this.entry(name, undefined) as Raw).data_shape);
  }

  dataShapes(name: string, fallback?: DataType[]): DataType[] {
    if (!this.has(name) && fallback) return fallback;
    const items = (this.entry(name, undefined) as Raw).data_shape;
    if (items === undefined) return [];
    if (!Array.isArray(items)) throw this.bad(name, 'a list of data_shape');
    return items.map((s) => this.readDataShape(name, s));
  }

  /** `{"basic_type": "double"}` */
  basicType(name: string, fallback?: BasicType): BasicType {
    const v = this.entry(name, fallback);
    if (typeof v === 'string') return v as BasicType;
    return parseBasicType((v as Raw).basic_type, () => this.bad(name, 'a basic_type'));
  }

  private entry(name: string, fallback: unknown): unknown {
    const v = this.raw[name];
    if (v === undefined || v === null) {
      if (fallback !== undefined) return fallback;
      throw bundleError(`${this.where}: attribute "${name}" is missing`);
    }
    if (!isRaw(v)) throw this.bad(name, 'an attribute object');
    return v;
  }

  private pickNumber(name: string, o: Raw): number {
    if (Object.keys(o).length === 0) return 0;
    for (const key of NUMBER_KEYS) {
      if (key in o) {
        const n = o[key];
        if (n === null) return NaN;
        if (typeof n === 'number') return n;
        if (typeof n === 'string' && /^-?\d+$/.test(n)) return Number(n);
      }
    }
    throw this.bad(name, 'a number');
  }

  private listValues(name: string, key: string): unknown[] {
    const o = this.entry(name, undefined) as Raw;
    const values = o[key];
    if (values === undefined) return [];
    if (!Array.isArray(values)) throw this.bad(name, `a list of ${key}`);
    return values;
  }

  private numberList(name: string, o: Raw): number[] {
    const key = NUMBER_KEYS.find((k) => k in o);
    if (!key) return [];
    const values = o[key];
    if (!Array.isArray(values)) throw this.bad(name, 'a list of numbers');
    return values.map((x) => {
      if (x === null) return NaN;
      if (typeof x === 'number') return x;
      if (typeof x === 'string' && /^-?\d+$/.test(x)) return Number(x);
      throw this.bad(name, 'a list of numbers');
    });
  }

  private readTensor(name: string, o: Raw): TensorAttribute {
    if (!isRaw(o)) throw this.bad(name, 'a tensor');
    const shape = o.shape as Raw | undefined;
    const values = this.numberList(name, o);
    const dimensions = shape && Array.isArray(shape.dimensions) ? (shape.dimensions as Raw[]) : null;
    const dims = dimensions ? dimensions.map((d) => Number(d.size)) : [values.length];
    if (!dims.every((d) => Number.isInteger(d))) throw this.bad(name, 'a tensor with integer dimensions');
    return { dims, values };
  }

  private readDataShape(name: string, s: unknown): DataType {
    if (!isRaw(s)) throw this.bad(name, 'a data_shape');
    const nullable = s.isNullable !== false;
    const base = s.basicType === undefined ? 'double' : parseBasicType(s.basicType, () => this.bad(name, 'a data_shape'));
    if (s.base === 'scalar' || s.base === undefined) return { shape: 'scalar', base, nullable };
    if (s.base === 'list') return { shape: 'list', base, nullable };
    if (s.base === 'tensor') {
      const ts = s.tensorShape as Raw | undefined;
      const dims = ts && Array.isArray(ts.dimensions) ? (ts.dimensions as Raw[]).map((d) => Number(d.size)) : undefined;
      return dims ? { shape: 'tensor', base, nullable, dims } : { shape: 'tensor', base, nullable };
    }
    throw this.bad(name, 'a data_shape with base scalar, list or tensor');
  }

  private bad(name: string, expected: string) {
    return bundleError(`${this.where}: attribute "${name}" is not ${expected}`);
  }
}

function isRaw(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseBasicType(v: unknown, fail: () => Error): BasicType {
  const name = v === 'integer' ? 'int' : v;
  if (typeof name !== 'string' || !(BASIC_TYPES as readonly string[]).includes(name)) throw fail();
  return name as BasicType;
}
