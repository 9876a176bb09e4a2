// Piscina task module of the model runtime: one part of a transform or rank request frame. Each worker compiles a model once (from the bundle document
// its loader wrote) and keeps it, keyed by load.

import { readFileSync } from 'node:fs';
import { compileBundle, type CompiledModel } from '../engine/models/compile.js';
import type { BundleDoc } from '../engine/models/bundle/spec.js';
import { frameError, isModelError } from '../engine/models/errors.js';
import { decodeFramePart, decodeSplitPart, type FrameSlice } from '../engine/models/frame.js';
import { type FrameSplit, scanLeapFrame, splitFrame } from '../engine/models/frame-split.js';
import type { FrameTask, ModelTask, SplitTask, TaskResult } from '../engine/models/protocol.js';
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

/** Failures saying the body is not JSON: whichever part finds one, it is the request's answer (ModelService). */
const notJson = new WeakSet<Error>();

function settle<T>(work: () => T): TaskResult<T> {
  try {
    return { ok: true, value: work() };
  } catch (err) {
    if (isModelError(err)) return { ok: false, kind: err.kind, code: err.code, message: err.message, ...(notJson.has(err) ? { syntax: true as const } : {}) };
    throw err;
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    const err = frameError('the body is not valid JSON');
    notJson.add(err);
    throw err;
  }
}

/** The part's rows: from its share of a split Leap frame, else from the whole body. */
function frame(task: FrameTask<unknown>): FrameSlice {
  const body = Buffer.from(task.body, 0, task.length);
  const split = task.split;
  if (!split) return decodeFramePart(parse(body.toString('utf8')), task.limits, task.part);
  const text = `{"schema":${body.toString('utf8', split.schema[0], split.schema[1])},"rows":[${body.toString('utf8', split.rows[0], split.rows[1])}]}`;
  return decodeSplitPart(parse(text), task.limits, split.first, split.total);
}

export function transform(task: FrameTask<TransformQuery>): TaskResult<TransformedPart> {
  return settle(() => {
    const compiled = model(task);
    return transformPart(compiled, frame(task), task.query);
  });
}

export function rank(task: FrameTask<RankQuery>): TaskResult<RankedPart> {
  return settle(() => {
    const compiled = model(task);
    return rankPart(compiled, frame(task), task.query);
  });
}

/** Scans a frame body once into `count` parts' shares (frame-split.ts); undefined: not split. */
export function split(task: SplitTask): FrameSplit[] | undefined {
  const scan = scanLeapFrame(new Uint8Array(task.body), task.length);
  return scan && splitFrame(scan, task.count);
}
