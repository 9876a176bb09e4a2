// Vector expansions and transforms: polynomial_expansion, dct.

import { bundleError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { toDense, type SparseTensor } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { vectorLength, vectorStage } from './common.js';

/** C(n + degree, degree): the number of monomials of n variables up to `degree`, the constant included. */
function polySize(n: number, degree: number): number {
  let size = 1;
  for (let i = 1; i <= degree; i++) size = (size * (n + i)) / i;
  if (size > 2 ** 31 - 1) throw bundleError(`polynomial expansion of ${n} features to degree ${degree} is too large`);
  return Math.round(size);
}

/**
 * Spark's PolynomialExpansion order: recursing from the last feature, each power of it times
 * the expansion of the features before it. Writes at `at` (the constant term, at -1, is skipped);
 * returns the position after this block.
 */
function expandDense(values: number[], lastIdx: number, degree: number, multiplier: number, out: number[], at: number): number {
  if (multiplier === 0) {
    // zeros stay
  } else if (degree === 0 || lastIdx < 0) {
    if (at >= 0) out[at] = multiplier;
  } else {
    const v = values[lastIdx]!;
    let alpha = multiplier;
    let start = at;
    for (let i = 0; i <= degree && alpha !== 0; i++) {
      start = expandDense(values, lastIdx - 1, degree - i, alpha, out, start);
      alpha *= v;
    }
  }
  return at + polySize(lastIdx + 1, degree);
}

interface SparseOut {
  indices: number[];
  values: number[];
}

function expandSparse(t: SparseTensor, lastIdx: number, lastFeatureIdx: number, degree: number, multiplier: number, out: SparseOut, at: number): number {
  if (multiplier === 0) {
    // zeros stay
  } else if (degree === 0 || lastIdx < 0) {
    if (at >= 0) {
      out.indices.push(at);
      out.values.push(multiplier);
    }
  } else {
    const v = t.values[lastIdx]!;
    const previousFeature = t.indices[lastIdx]! - 1;
    let alpha = multiplier;
    let start = at;
    for (let i = 0; i <= degree && alpha !== 0; i++) {
      start = expandSparse(t, lastIdx - 1, previousFeature, degree - i, alpha, out, start);
      alpha *= v;
    }
  }
  return at + polySize(lastFeatureIdx + 1, degree);
}

function compilePolynomialExpansion(node: NodeSpec): CompiledStage {
  const degree = node.attrs.integer('degree');
  if (degree < 1) throw bundleError(`${node.path}: degree must be at least 1`);
  const size = node.attrs.has('input_size') ? node.attrs.integer('input_size') : undefined;
  const outputSize = size === undefined ? undefined : polySize(size, degree) - 1;
  return vectorStage(
    node,
    size,
    (t) => {
      const n = vectorLength(t);
      const length = polySize(n, degree) - 1;
      if (t.kind === 'sparse') {
        const out: SparseOut = { indices: [], values: [] };
        expandSparse(t, t.values.length - 1, n - 1, degree, 1, out, -1);
        return { kind: 'sparse', dims: [length], indices: out.indices, values: out.values };
      }
      const out = new Array<number>(length).fill(0);
      expandDense(t.values, n - 1, degree, 1, out, -1);
      return { kind: 'dense', dims: [length], values: out };
    },
    outputSize,
  );
}

/**
 * Orthonormal DCT-II (forward) or DCT-III (inverse), as JTransforms' `DoubleDCT_1D` with
 * scaling; computed directly (O(n²)), so the last bits may differ from JTransforms' FFT.
 */
function compileDct(node: NodeSpec): CompiledStage {
  const inverse = node.attrs.boolean('inverse', false);
  const size = node.attrs.has('input_size') ? node.attrs.integer('input_size') : undefined;
  return vectorStage(node, size, (t) => {
    const x = toDense(t);
    const n = x.length;
    const out = new Array<number>(n).fill(0);
    const scale = (k: number) => (k === 0 ? Math.sqrt(1 / n) : Math.sqrt(2 / n));
    for (let a = 0; a < n; a++) {
      let sum = 0;
      for (let b = 0; b < n; b++) {
        sum += inverse
          ? scale(b) * x[b]! * Math.cos((Math.PI / n) * (a + 0.5) * b)
          : x[b]! * Math.cos((Math.PI / n) * (b + 0.5) * a);
      }
      out[a] = inverse ? sum : scale(a) * sum;
    }
    return { kind: 'dense', dims: [n], values: out };
  });
}

export const polynomialExpansion: OpDefinition = { op: 'polynomial_expansion', className: 'PolynomialExpansion', compile: compilePolynomialExpansion };
export const dct: OpDefinition = { op: 'dct', className: 'DCT', compile: compileDct };
