// Feature selection and indexing of a vector: vector_slicer, chi_sq_selector, vector_indexer.

import { bundleError, transformError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import type { Tensor } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { readHandleInvalid, skippedRow, vectorStage } from './common.js';

/** The elements at `positions` (in that order); a sparse vector stays sparse (Spark's `slice`). */
function select(t: Tensor, positions: number[]): Tensor {
  const n = positions.length;
  if (t.kind === 'dense') return { kind: 'dense', dims: [n], values: positions.map((p) => t.values[p]!) };
  const at = new Map<number, number>();
  t.indices.forEach((index, k) => at.set(index, t.values[k]!));
  const indices: number[] = [];
  const values: number[] = [];
  positions.forEach((p, k) => {
    const v = at.get(p);
    if (v !== undefined) {
      indices.push(k);
      values.push(v);
    }
  });
  return { kind: 'sparse', dims: [n], indices, values };
}

function checkPositions(node: NodeSpec, positions: number[], size: number | undefined): void {
  const bad = positions.find((p) => p < 0 || (size !== undefined && p >= size));
  if (bad !== undefined) throw bundleError(`${node.path}: index ${bad} is outside the input vector`);
}

function compileVectorSlicer(node: NodeSpec): CompiledStage {
  // Scala's Array.union concatenates: plain indices first, then those selected by name.
  const positions = [...node.attrs.integers('indices', []), ...node.attrs.integers('named_indices', [])];
  const size = node.attrs.has('input_size') ? node.attrs.integer('input_size') : undefined;
  checkPositions(node, positions, size);
  return vectorStage(node, size, (t) => select(t, positions), positions.length);
}

function compileChiSqSelector(node: NodeSpec): CompiledStage {
  const positions = [...node.attrs.integers('filter_indices')].sort((a, b) => a - b);
  const size = node.attrs.has('input_size') ? node.attrs.integer('input_size') : undefined;
  checkPositions(node, positions, size);
  return vectorStage(node, size, (t) => select(t, positions), positions.length);
}

/** Categorical features (by position) mapped from their raw values to category indices. */
function compileVectorIndexer(node: NodeSpec): CompiledStage {
  const size = node.attrs.integer('num_features');
  const mode = readHandleInvalid(node);
  const maps = new Map<number, Map<number, number>>();
  for (const feature of node.attrs.integers('keys', [])) {
    const raw = node.attrs.doubles(`key_${feature}_keys`, []);
    const categories = node.attrs.integers(`key_${feature}_values`, []);
    if (raw.length !== categories.length) throw bundleError(`${node.path}: key_${feature}_keys and _values differ in length`);
    maps.set(feature, new Map(raw.map((v, i) => [v, categories[i]!])));
  }
  checkPositions(node, [...maps.keys()], size);
  const category = (feature: number, value: number): number => {
    const map = maps.get(feature)!;
    const found = map.get(value);
    if (found !== undefined) return found;
    if (mode === 'keep') return map.size;
    const why = `invalid value ${value} on feature ${feature}`;
    if (mode === 'skip') throw skippedRow(node, why);
    throw transformError(`${node.name}: ${why} (set handle_invalid to keep to index invalid values)`);
  };
  return vectorStage(node, size, (t) => {
    const values = t.values.slice();
    if (t.kind === 'dense') {
      for (const feature of maps.keys()) values[feature] = category(feature, values[feature]!);
      return { kind: 'dense', dims: t.dims, values };
    }
    // A stored zero is looked up like any value; absent zeros map to category 0 in Spark.
    t.indices.forEach((feature, k) => {
      if (maps.has(feature)) values[k] = category(feature, values[k]!);
    });
    return { kind: 'sparse', dims: t.dims, indices: t.indices, values };
  });
}

export const vectorSlicer: OpDefinition = { op: 'vector_slicer', className: 'VectorSlicer', compile: compileVectorSlicer };
export const chiSqSelector: OpDefinition = { op: 'chi_sq_selector', className: 'ChiSqSelector', compile: compileChiSqSelector };
export const vectorIndexer: OpDefinition = { op: 'vector_indexer', className: 'VectorIndexer', compile: compileVectorIndexer };
