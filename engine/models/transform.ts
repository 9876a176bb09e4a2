// Transform and rank over a flattened request frame: missing inputs imputed or refused, request
// types cast to the model's, rows run on the pool, extra request columns echoed after the
// model's columns, then rank / k / select.

import type { ExecutionMode } from '../config.js';
import { caster, javaDouble } from './cast.js';
import { frameError, queryError } from './errors.js';
import { defaultValue } from './frame.js';
import type { LoadedModel, ModelService } from './service.js';
import { NUMERIC_TYPES, typeLabel, type Field, type LeapFrame, type Value } from './types.js';

export type Missing = 'impute' | 'error';

export interface TransformOptions {
  /** Output columns in this order; empty: all. */
  select: string[];
  /** Rank expression fields (the score is their product); empty: no ranking. */
  rank: string[];
  desc: boolean;
  /** Top k rows, applied only with `rank`. */
  k?: number;
  mode: ExecutionMode;
  missing: Missing;
}

export interface RankOptions {
  id: string;
  rank: string[];
  desc: boolean;
  k?: number;
  group?: string;
  avg: boolean;
  mode: ExecutionMode;
  missing: Missing;
}

/** `select=a,b&select=c*d` → [a, b, c, d]: each value comma-separated, `*` joins factors. */
export function parseSelection(values: string[]): string[] {
  return values.flatMap((v) => v.split(/[,*]/)).map((s) => s.trim()).filter((s) => s !== '');
}

export async function transformFrame(
  service: ModelService,
  loaded: LoadedModel,
  frame: LeapFrame,
  options: TransformOptions,
  signal: AbortSignal,
): Promise<LeapFrame> {
  const { inputs, extras } = bindInputs(loaded, frame, options.missing);
  const produced = await service.runRows(loaded, inputs, options.mode, signal);
  const model = loaded.model;
  const fields = [...model.outputSchema, ...extras.map((e) => frame.fields[e]!)];
  let rows = inputs.map((input, i) => {
    const row = input.concat(produced[i]!);
    for (const e of extras) row.push(frame.rows[i]![e]!);
    return row;
  });
  if (options.rank.length) rows = rankRows(fields, rows, options.rank, options.desc, options.k);
  return selectColumns({ fields, rows }, outputSelection(options.select, options.rank));
}

export async function rankFrame(
  service: ModelService,
  loaded: LoadedModel,
  frame: LeapFrame,
  options: RankOptions,
  signal: AbortSignal,
): Promise<string[]> {
  const wanted = [options.id, ...options.rank, ...(options.group ? [options.group] : [])];
  const out = await transformFrame(service, loaded, frame, { select: wanted, rank: [], desc: options.desc, mode: options.mode, missing: options.missing }, signal);
  const index = (name: string) => out.fields.findIndex((f) => f.name === name);
  const idIndex = index(options.id);
  const idType = out.fields[idIndex]!.type;
  const scoreOf = scorer(out.fields, options.rank);
  let entries = out.rows.map((row, i) => ({
    id: typeof row[idIndex] === 'number' && (idType.base === 'double' || idType.base === 'float') ? javaDouble(row[idIndex] as number) : String(row[idIndex]),
    score: scoreOf(row),
    group: options.group ? row[index(options.group)] : undefined,
    order: i,
  }));
  if (options.group) {
    // One row per group: its highest score (ties: the first row).
    const best = new Map<string, (typeof entries)[number]>();
    for (const e of entries) {
      const key = JSON.stringify(e.group);
      const current = best.get(key);
      if (!current || e.score > current.score) best.set(key, e);
    }
    entries = [...best.values()].sort((a, b) => a.order - b.order);
  }
  if (options.avg) {
    const sums = new Map<string, { sum: number; n: number; order: number }>();
    for (const e of entries) {
      const s = sums.get(e.id) ?? { sum: 0, n: 0, order: e.order };
      s.sum += e.score;
      s.n++;
      sums.set(e.id, s);
    }
    entries = [...sums].map(([id, s]) => ({ id, score: s.sum / s.n, group: undefined, order: s.order }));
  }
  const sign = options.desc ? -1 : 1;
  entries.sort((a, b) => sign * (a.score - b.score) || a.order - b.order);
  const top = options.k === undefined ? entries : entries.slice(0, options.k);
  return top.map((e) => e.id);
}

function bindInputs(loaded: LoadedModel, frame: LeapFrame, missing: Missing): { inputs: Value[][]; extras: number[] } {
  const model = loaded.model;
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
  const inputs = frame.rows.map((row) => readers.map((read) => read(row)));
  return { inputs, extras };
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

function rankRows(fields: Field[], rows: Value[][], rank: string[], desc: boolean, k?: number): Value[][] {
  const scoreOf = scorer(fields, rank);
  const sign = desc ? -1 : 1;
  const scored = rows.map((row, order) => ({ row, order, score: scoreOf(row) }));
  scored.sort((a, b) => sign * (a.score - b.score) || a.order - b.order);
  return (k === undefined ? scored : scored.slice(0, k)).map((s) => s.row);
}

/** Rank fields join the selection unless the caller's selection mentions none of them. */
function outputSelection(select: string[], rank: string[]): string[] {
  if (select.length === 0) return [];
  if (!rank.some((r) => select.includes(r))) return select;
  return [...select, ...rank.filter((r) => !select.includes(r))];
}

/** The named columns, in order (all when `select` is empty); an unknown name is a 400. */
export function selectColumns(frame: LeapFrame, select: string[]): LeapFrame {
  if (select.length === 0) return frame;
  const indexes = select.map((name) => frame.fields.findIndex((f) => f.name === name));
  const unknown = select.filter((_, i) => indexes[i]! < 0);
  if (unknown.length) throw queryError(`unknown field(s) in select: ${unknown.join(', ')}`);
  return { fields: indexes.map((i) => frame.fields[i]!), rows: frame.rows.map((row) => indexes.map((i) => row[i]!)) };
}
