// Transform and rank over a request frame, one part of its rows at a time (a worker task per
// part): missing inputs imputed or refused, request types cast to the model's, rows run
// through the model, extra request columns echoed after the model's columns, then select.
// Rows are written out as JSON bytes as they are produced; the listener joins the parts in
// order (transform) or merges their scores (rank, and transform with `rank`).

import { caster, javaDouble } from './cast.js';
import type { CompiledModel } from './compile.js';
import { SkippedRow, frameError, queryError } from './errors.js';
import { defaultValue, type FrameSlice } from './frame.js';
import { encodeSchema } from './frame-json.js';
import { RowWriter, type RowBytes } from './row-writer.js';
import { NUMERIC_TYPES, typeLabel, type Field, type LeapFrame, type Value } from './types.js';

export type Missing = 'impute' | 'error';

export interface TransformQuery {
  /** Output columns in this order; empty: all. */
  select: string[];
  /** Rank expression fields (the score is their product); empty: no ranking. */
  rank: string[];
  desc: boolean;
  /** Top k rows, applied only with `rank`. */
  k?: number;
  missing: Missing;
}

export interface RankQuery {
  id: string;
  rank: string[];
  desc: boolean;
  k?: number;
  group?: string;
  avg: boolean;
  missing: Missing;
}

/** One part of a transform: its rows as JSON (with row ends and scores when ranked). */
export interface TransformedPart extends RowBytes {
  /** The output schema as JSON text (the same in every part). */
  schema: string;
  first: number;
  scores?: Float64Array;
}

/** One part of a rank: id, score and group key of each of its rows. */
export interface RankedPart {
  first: number;
  ids: string[];
  scores: Float64Array;
  groups?: string[];
}

/** `select=a,b&select=c*d` → [a, b, c, d]: each value comma-separated, `*` joins factors. */
export function parseSelection(values: string[]): string[] {
  return values.flatMap((v) => v.split(/[,*]/)).map((s) => s.trim()).filter((s) => s !== '');
}

export function transformPart(model: CompiledModel, frame: FrameSlice, query: TransformQuery): TransformedPart {
  const bound = bindInputs(model, frame, query.missing);
  const selection = outputSelection(query.select, query.rank);
  const columns = selection.length ? columnIndexes(bound.fields, selection, 'select') : undefined;
  const scoreOf = query.rank.length ? scorer(bound.fields, query.rank) : undefined;
  const scores = scoreOf ? new Float64Array(frame.rows.length) : undefined;
  const writer = new RowWriter(scoreOf !== undefined, frame.rows.length);
  let kept = 0;
  for (let i = 0; i < frame.rows.length; i++) {
    const row = bound.run(i);
    if (!row) continue;
    if (scores) scores[kept] = scoreOf!(row);
    writer.write(row, columns);
    kept++;
  }
  const fields = columns ? columns.map((c) => bound.fields[c]!) : bound.fields;
  return { schema: JSON.stringify(encodeSchema(fields)), first: frame.first, ...writer.finish(), scores: scores?.subarray(0, kept) };
}

export function rankPart(model: CompiledModel, frame: FrameSlice, query: RankQuery): RankedPart {
  const bound = bindInputs(model, frame, query.missing);
  const [idAt, groupAt] = columnIndexes(bound.fields, [query.id, ...(query.group ? [query.group] : [])], 'select');
  const idType = bound.fields[idAt!]!.type;
  const doubleIds = idType.base === 'double' || idType.base === 'float';
  const scoreOf = scorer(bound.fields, query.rank);
  const ids: string[] = [];
  const scores = new Float64Array(frame.rows.length);
  const groups: string[] | undefined = groupAt === undefined ? undefined : [];
  for (let i = 0; i < frame.rows.length; i++) {
    const row = bound.run(i);
    if (!row) continue;
    const id = row[idAt!]!;
    scores[ids.length] = scoreOf(row);
    ids.push(typeof id === 'number' && doubleIds ? javaDouble(id) : String(id));
    groups?.push(JSON.stringify(row[groupAt!]));
  }
  return { first: frame.first, ids, scores: scores.subarray(0, ids.length), groups };
}

/** The ranked ids over all parts: best per group, averaged per id, sorted, top k. */
export function finishRank(parts: RankedPart[], query: RankQuery): string[] {
  let entries = parts.flatMap((p) => p.ids.map((id, i) => ({ id, score: p.scores[i]!, group: p.groups?.[i], order: p.first + i })));
  if (query.group) {
    // One row per group: its highest score (ties: the first row).
    const best = new Map<string, (typeof entries)[number]>();
    for (const e of entries) {
      const current = best.get(e.group!);
      if (!current || e.score > current.score) best.set(e.group!, e);
    }
    entries = [...best.values()].sort((a, b) => a.order - b.order);
  }
  if (query.avg) {
    const sums = new Map<string, { sum: number; n: number; order: number }>();
    for (const e of entries) {
      const s = sums.get(e.id) ?? { sum: 0, n: 0, order: e.order };
      s.sum += e.score;
      s.n++;
      sums.set(e.id, s);
    }
    entries = [...sums].map(([id, s]) => ({ id, score: s.sum / s.n, group: undefined, order: s.order }));
  }
  sortByScore(entries, query.desc);
  return (query.k === undefined ? entries : entries.slice(0, query.k)).map((e) => e.id);
}

/** Transform output bytes in answer order: the parts in turn, or the rows by score (top k) when ranked. */
export function transformBody(parts: TransformedPart[], query: TransformQuery): Uint8Array[] {
  const rows: Uint8Array[] = [];
  if (!query.rank.length) {
    for (const p of parts) if (p.length) rows.push(new Uint8Array(p.bytes, 0, p.length));
    return withCommas(rows);
  }
  const entries = parts.flatMap((p, n) => Array.from(p.scores!, (score, i) => ({ score, order: p.first + i, part: n, row: i })));
  sortByScore(entries, query.desc);
  for (const e of query.k === undefined ? entries : entries.slice(0, query.k)) {
    const p = parts[e.part]!;
    const start = e.row === 0 ? 0 : p.ends![e.row - 1]!;
    rows.push(new Uint8Array(p.bytes, start, p.ends![e.row]! - start));
  }
  return withCommas(rows);
}

const COMMA = new Uint8Array([0x2c]);

function withCommas(pieces: Uint8Array[]): Uint8Array[] {
  return pieces.flatMap((p, i) => (i ? [COMMA, p] : [p]));
}

function sortByScore<T extends { score: number; order: number }>(entries: T[], desc: boolean): void {
  const sign = desc ? -1 : 1;
  entries.sort((a, b) => sign * (a.score - b.score) || a.order - b.order);
}

interface BoundFrame {
  /** The model's output columns, then the request's extra columns. */
  fields: Field[];
  /** Runs row `i` of the frame: the model's inputs and outputs, then the extra request values; undefined when a stage skips it. */
  run(i: number): Value[] | undefined;
}

function bindInputs(model: CompiledModel, frame: LeapFrame, missing: Missing): BoundFrame {
  const byName = new Map(frame.fields.map((f, i) => [f.name, i]));
  const absent = model.inputSchema.filter((f) => !byName.has(f.name)).map((f) => f.name);
  if (absent.length && missing === 'error') throw frameError(`Missing required fields: [${absent.join(', ')}]`);
  const readers = model.inputSchema.map((field): ((row: Value[]) => Value) => {
    const at = byName.get(field.name);
    if (at === undefined) {
      const fill = defaultValue(field.type);
      return () => fill;
    }
    const from = frame.fields[at]!.type;
    const cast = caster(from, field.type);
    if (cast === undefined) {
      throw frameError(`field ${field.name} is ${typeLabel(from)} and cannot be cast to the model's ${typeLabel(field.type)}`);
    }
    return cast ? (row) => cast(row[at]!) : (row) => row[at]!;
  });
  const modelColumns = new Set(model.outputSchema.map((f) => f.name));
  const extras = frame.fields.map((f, i) => (modelColumns.has(f.name) ? -1 : i)).filter((i) => i >= 0);
  const modelWidth = model.outputSchema.length;
  const width = modelWidth + extras.length;
  return {
    fields: [...model.outputSchema, ...extras.map((e) => frame.fields[e]!)],
    run(i) {
      const request = frame.rows[i]!;
      // One array per row: inputs, then what the model produces in place, then the extras.
      const row = new Array<Value>(width);
      for (let r = 0; r < readers.length; r++) row[r] = readers[r]!(request);
      try {
        model.runRow(row);
      } catch (err) {
        if (err instanceof SkippedRow) return undefined;
        throw err;
      }
      for (let e = 0; e < extras.length; e++) row[modelWidth + e] = request[extras[e]!]!;
      return row;
    },
  };
}

function scorer(fields: Field[], rank: string[]): (row: Value[]) => number {
  const indexes = rank.map((name) => {
    const i = fields.findIndex((f) => f.name === name);
    if (i < 0) throw queryError(`rank field ${name} is not a column of the output (${fields.map((f) => f.name).join(', ')})`);
    const type = fields[i]!.type;
    if (type.shape !== 'scalar' || !NUMERIC_TYPES.has(type.base)) {
      throw queryError(`rank field ${name} is ${typeLabel(type)}, not a number`);
    }
    return i;
  });
  return (row) => {
    let score = 1;
    for (const i of indexes) score *= row[i] as number;
    return score;
  };
}

/** Rank fields join the selection unless the caller's selection mentions none of them. */
function outputSelection(select: string[], rank: string[]): string[] {
  if (select.length === 0) return [];
  if (!rank.some((r) => select.includes(r))) return select;
  return [...select, ...rank.filter((r) => !select.includes(r))];
}

/** Column positions of `names`; an unknown name is a 400. */
function columnIndexes(fields: Field[], names: string[], what: string): number[] {
  const indexes = names.map((name) => fields.findIndex((f) => f.name === name));
  const unknown = names.filter((_, i) => indexes[i]! < 0);
  if (unknown.length) throw queryError(`unknown field(s) in ${what}: ${unknown.join(', ')}`);
  return indexes;
}

/** The named columns, in order (all when `select` is empty); an unknown name is a 400. */
export function selectColumns(frame: LeapFrame, select: string[]): LeapFrame {
  if (select.length === 0) return frame;
  const indexes = columnIndexes(frame.fields, select, 'select');
  return { fields: indexes.map((i) => frame.fields[i]!), rows: frame.rows.map((row) => indexes.map((i) => row[i]!)) };
}
