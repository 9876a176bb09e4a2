// Piscina task module of the model runtime: run rows through a model. Each worker compiles a
// model once (from the bundle document its loader wrote) and keeps it, keyed by load.

import { readFileSync } from 'node:fs';
import { compileBundle, type CompiledModel } from '../engine/models/compile.js';
import type { BundleDoc } from '../engine/models/bundle/spec.js';
import { ModelError } from '../engine/models/errors.js';
import type { Value } from '../engine/models/types.js';

export interface RowsTask {
  /** Identifies one load of one model; a reload gets a new key. */
  key: string;
  /** JSON file holding the model's BundleDoc. */
  docPath: string;
  rows: Value[][];
}

/** Produced values per row, or the model's error as data (errors lose their fields when cloned). */
export type RowsResult = { ok: true; rows: Value[][] } | { ok: false; error: string; message: string; code: number };

const KEEP = 16;
const compiled = new Map<string, CompiledModel>();

function model(task: RowsTask): CompiledModel {
  let m = compiled.get(task.key);
  if (m) {
    compiled.delete(task.key);
  } else {
    m = compileBundle(JSON.parse(readFileSync(task.docPath, 'utf8')) as BundleDoc);
    if (compiled.size >= KEEP) compiled.delete(compiled.keys().next().value as string);
  }
  compiled.set(task.key, m);
  return m;
}

export function runRows(task: RowsTask): RowsResult {
  try {
    const m = model(task);
    const out = new Array<Value[]>(task.rows.length);
    for (let i = 0; i < task.rows.length; i++) out[i] = m.run(task.rows[i]!);
    return { ok: true, rows: out };
  } catch (err) {
    if (err instanceof ModelError) return { ok: false, error: err.error, message: err.message, code: err.code };
    throw err;
  }
}
