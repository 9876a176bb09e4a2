// Generated sample data shaped to a model's input schema (the sample and health endpoints,
// and warm-up). Random values by type follow the reference runtime; where the model accepts
// only a known set of values (a string indexer's labels), values are drawn from that set so
// that a sample is something the model can transform.

import { encodeRow, encodeSchema } from './frame-json.js';
import type { BasicType, DataType, Field, Value } from './types.js';

type Domains = readonly (readonly Value[] | undefined)[];

function randomValue(type: DataType, domain?: readonly Value[]): Value {
  if (domain && domain.length) return domain[randomInt(domain.length)]!;
  if (type.shape === 'scalar') return randomScalar(type.base);
  if (type.shape === 'list') return Array.from({ length: randomInt(10) }, () => randomScalar(type.base));
  if (!type.dims) return { kind: 'dense', dims: [0], values: [] };
  const dims = type.dims.map((d) => (d < 0 ? 1 : d));
  const size = dims.reduce((a, b) => a * b, 1);
  return { kind: 'dense', dims, values: Array.from({ length: size }, () => Math.random()) };
}

function randomScalar(base: BasicType): Value {
  switch (base) {
    case 'boolean':
      return Math.random() < 0.5;
    case 'byte':
      return randomInt(256) - 128;
    case 'short':
      return signedMod(100);
    case 'int':
    case 'long':
      return signedMod(1000);
    case 'float':
    case 'double':
      return Math.random();
    case 'string':
      return randomString();
    case 'byte_string':
      return Buffer.from(randomString()).toString('base64');
  }
}

function randomInt(n: number): number {
  return Math.floor(Math.random() * n);
}

/** `nextInt % n` of a random 32-bit int: -(n-1) .. n-1. */
function signedMod(n: number): number {
  return randomInt(2 * n - 1) - (n - 1);
}

/** Up to 9 printable ASCII characters. */
function randomString(): string {
  let s = '';
  for (let i = randomInt(10); i > 0; i--) s += String.fromCharCode(33 + randomInt(94));
  return s;
}

/**
 * The sample endpoint's frame: input fields sorted by name, `nrow` rows. With `contexts`
 * (prefixes; `a|b` matches either), each field goes to the first group whose prefix it has,
 * the rest form a last group; every group is a leap frame of one row except the last, which
 * has `nrow`; groups nest right: Cartesian(g1, Cartesian(g2, g3)).
 */
export function sampleFrame(fields: Field[], domains: Domains, nrow: number, contexts: string[]): unknown {
  const indexed = fields.map((field, i) => ({ field, domain: domains[i] })).sort((a, b) => compare(a.field.name, b.field.name));
  if (contexts.length === 0) return leap(indexed, nrow);
  const groups: (typeof indexed)[] = contexts.map(() => []);
  const rest: typeof indexed = [];
  for (const entry of indexed) {
    const g = contexts.findIndex((c) => c.split('|').some((prefix) => prefix !== '' && entry.field.name.startsWith(prefix)));
    (g < 0 ? rest : groups[g]!).push(entry);
  }
  const nonEmpty = [...groups, rest].filter((g) => g.length > 0);
  if (nonEmpty.length === 0) return leap([], nrow);
  let frame: unknown = leap(nonEmpty[nonEmpty.length - 1]!, nrow);
  for (let g = nonEmpty.length - 2; g >= 0; g--) {
    frame = { contextFrame: leap(nonEmpty[g]!, nrow > 0 ? 1 : 0), targetFrame: frame };
  }
  return frame;
}

function leap(entries: { field: Field; domain?: readonly Value[] }[], rows: number): unknown {
  const fields = entries.map((e) => e.field);
  const out: unknown[] = [];
  for (let r = 0; r < rows; r++) out.push(encodeRow(entries.map((e) => randomValue(e.field.type, e.domain))));
  return { schema: encodeSchema(fields), rows: out };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
