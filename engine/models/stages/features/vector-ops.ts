// Whole-vector transforms: normalizer, elementwise_product, idf, pca.

import { bundleError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import type { Tensor } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { vectorStage } from './common.js';

/** Spark's `Vectors.norm` over the stored values. */
function pNorm(values: number[], p: number): number {
  let sum = 0;
  if (p === 1) {
    for (const v of values) sum += Math.abs(v);
    return sum;
  }
  if (p === 2) {
    for (const v of values) sum += v * v;
    return Math.sqrt(sum);
  }
  if (p === Infinity) {
    let max = 0;
    for (const v of values) max = Math.max(max, Math.abs(v));
    return max;
  }
  for (const v of values) sum += Math.pow(Math.abs(v), p);
  return Math.pow(sum, 1 / p);
}

function compileNormalizer(node: NodeSpec): CompiledStage {
  // +∞ cannot be written in JSON: the writer stores it as null, which reads as NaN.
  const raw = node.attrs.double('p_norm');
  const p = Number.isNaN(raw) ? Infinity : raw;
  if (!(p >= 1)) throw bundleError(`${node.path}: p_norm must be at least 1`);
  const size = node.attrs.has('input_size') ? node.attrs.integer('input_size') : undefined;
  const map = (t: Tensor): Tensor => {
    const norm = pNorm(t.values, p);
    if (norm === 0) return t;
    const out = t.values.map((v) => v / norm);
    return t.kind === 'sparse' ? { kind: 'sparse', dims: t.dims, indices: t.indices, values: out } : { kind: 'dense', dims: t.dims, values: out };
  };
  return vectorStage(node, size, map);
}

/** x ⊙ weights, keeping a sparse vector sparse (elementwise_product, idf). */
function scaleElementwise(weights: number[]) {
  return (t: Tensor): Tensor => {
    const vs = t.values;
    const out = new Array<number>(vs.length);
    if (t.kind === 'sparse') {
      for (let i = 0; i < vs.length; i++) out[i] = vs[i]! * weights[t.indices[i]!]!;
      return { kind: 'sparse', dims: t.dims, indices: t.indices, values: out };
    }
    for (let i = 0; i < vs.length; i++) out[i] = vs[i]! * weights[i]!;
    return { kind: 'dense', dims: t.dims, values: out };
  };
}

function compileElementwiseProduct(node: NodeSpec): CompiledStage {
  const weights = node.attrs.doubles('scaling_vec');
  return vectorStage(node, weights.length, scaleElementwise(weights));
}

function compileIdf(node: NodeSpec): CompiledStage {
  const weights = node.attrs.doubles('idf');
  return vectorStage(node, weights.length, scaleElementwise(weights));
}

function compilePca(node: NodeSpec): CompiledStage {
  const pc = node.attrs.tensor('principal_components');
  if (pc.dims.length !== 2) throw bundleError(`${node.path}: principal_components is not a matrix`);
  const [n, k] = pc.dims as [number, number];
  // Column-major [n, k]: component j is values[j·n .. j·n + n).
  const m = pc.values;
  return vectorStage(
    node,
    n,
    (t) => {
      const out = new Array<number>(k);
      const vs = t.values;
      for (let j = 0; j < k; j++) {
        const column = j * n;
        let sum = 0;
        if (t.kind === 'sparse') {
          for (let i = 0; i < vs.length; i++) sum += vs[i]! * m[column + t.indices[i]!]!;
        } else {
          for (let i = 0; i < n; i++) sum += m[column + i]! * vs[i]!;
        }
        out[j] = sum;
      }
      return { kind: 'dense', dims: [k], values: out };
    },
    k,
  );
}

export const normalizer: OpDefinition = { op: 'normalizer', className: 'Normalizer', compile: compileNormalizer };
export const elementwiseProduct: OpDefinition = { op: 'elementwise_product', className: 'ElementwiseProduct', compile: compileElementwiseProduct };
export const idf: OpDefinition = { op: 'idf', className: 'IDF', compile: compileIdf };
export const pca: OpDefinition = { op: 'pca', className: 'Pca', compile: compilePca };
