// Feature-vector helpers shared by the predictors: the input type, size checks and the few
// linear-algebra kernels they need, over dense and sparse tensors alike.

import { bundleError, transformError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { requirePorts } from '../op.js';
import { tensor, type DataType, type Tensor, type Value } from '../../types.js';

/** A predictor's `features` input: a nullable double vector of `size` elements (any size if absent). */
export function featuresType(size?: number): DataType {
  return tensor('double', size === undefined ? undefined : [size], true);
}

/** Checks that the node binds exactly the `features` input port. */
export function requireFeatures(node: NodeSpec): void {
  requirePorts(node, ['features']);
}

/** Number of elements of a vector value (a tensor of any rank counts all its elements). */
function vectorSize(t: Tensor): number {
  if (t.dims.length === 1) return t.dims[0]!;
  let n = 1;
  for (const d of t.dims) n *= d;
  return n;
}

/** The row's feature vector, checked to hold `size` elements as Spark's BLAS requires. */
export function featureVector(value: Value, size: number, where: string): Tensor {
  const t = value as Tensor;
  const n = vectorSize(t);
  if (n !== size) throw transformError(`${where}: feature vector has ${n} elements, the model expects ${size}`);
  return t;
}

/** x · w */
export function dot(x: Tensor, w: Float64Array): number {
  let sum = 0;
  const values = x.values;
  if (x.kind === 'dense') {
    for (let i = 0; i < values.length; i++) sum += values[i]! * w[i]!;
  } else {
    const indices = x.indices;
    for (let k = 0; k < values.length; k++) sum += values[k]! * w[indices[k]!]!;
  }
  return sum;
}

/** x[i] (binary search for sparse vectors). */
export function element(x: Tensor, i: number): number {
  if (x.kind === 'dense') return x.values[i]!;
  const indices = x.indices;
  let lo = 0;
  let hi = indices.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const at = indices[mid]!;
    if (at === i) return x.values[mid]!;
    if (at < i) lo = mid + 1;
    else hi = mid - 1;
  }
  return 0;
}

/**
 * out = M·x + y0 for a column-major matrix M of `rows` × (x's size), y0 = `start` or zeros.
 * Column by column onto y0, as Spark's BLAS does for an untransposed matrix (dense x skips
 * its zero entries, as reference dgemv does).
 */
export function gemv(matrix: Float64Array, rows: number, x: Tensor, start: Float64Array | null, out: number[]): void {
  for (let r = 0; r < rows; r++) out[r] = start ? start[r]! : 0;
  const values = x.values;
  const sparse = x.kind === 'sparse';
  for (let k = 0; k < values.length; k++) {
    const v = values[k]!;
    if (v === 0 && !sparse) continue;
    const base = (sparse ? x.indices[k]! : k) * rows;
    for (let r = 0; r < rows; r++) out[r] += matrix[base + r]! * v;
  }
}

/** Index of the first largest value (Spark's `Vector.argmax`; NaN never wins past index 0). */
export function argmax(values: ArrayLike<number>, length = values.length): number {
  let best = 0;
  let max = values[0]!;
  for (let i = 1; i < length; i++) {
    if (values[i]! > max) {
      max = values[i]!;
      best = i;
    }
  }
  return best;
}

/** A tensor attribute as a Float64Array of `size` values (bundle error otherwise). */
export function vectorAttribute(values: number[], size: number | undefined, what: string): Float64Array {
  if (size !== undefined && values.length !== size) {
    throw bundleError(`${what} has ${values.length} values, expected ${size}`);
  }
  return Float64Array.from(values);
}
