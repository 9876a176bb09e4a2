// Piscina task module of the model runtime: one part of a transform or rank request frame. Each worker compiles a model once (from the bundle document
// its loader wrote) and keeps it, keyed by load.

import { readFileSync } from 'node:fs';
import { compileBundle, type CompiledModel } from '../engine/models/compile.js';
import type { BundleDoc } from '../engine/models/bundle/spec.js';
import { ModelError, frameError } from '../engine/models/errors.js';
import type { FrameTask, ModelTask, TaskResult } from '../engine/models/protocol.js';
import { rankPart, transformPart, type RankQuery, type RankedPart, type TransformQuery, type TransformedPart } from '../engine/models/transform.js';

const KEEP = 16;
const compiled = new Map<string, CompiledModel>();

function model(task: ModelTask): CompiledModel {
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

function settle<T>(work: () => T): TaskResult<T> {
  try {
    return { ok: true, value: work() };
  } catch (err) {
    if (err instanceof ModelError) return { ok: false, error: err.error, message: err.message, code: err.code };
    throw err;
  }
}

function frameJson(task: FrameTask<unknown>): unknown {
  try {
    return JSON.parse(Buffer.from(task.body, 0, task.length).toString('utf8'));
  } catch {
    throw frameError('the body is not valid JSON');
  }
}

export function transform(task: FrameTask<TransformQuery>): TaskResult<TransformedPart> {
  return settle(() => transformPart(model(task), frameJson(task), task.limits, task.part, task.query));
}

export function rank(task: FrameTask<RankQuery>): TaskResult<RankedPart> {
  return settle(() => rankPart(model(task), frameJson(task), task.limits, task.part, task.query));
}
