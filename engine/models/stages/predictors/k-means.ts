// k_means: index of the nearest cluster centre, as Spark's KMeans.findClosest computes it
// (norm lower bound to skip centres, then fastSquaredDistance), output as an int.

import type { NodeSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import { scalar, type Tensor, type Value } from '../../types.js';
import { outputOrder, type CompiledStage, type OpDefinition } from '../op.js';
import { dot, featureVector, featuresType, requireFeatures } from './vector.js';

const PRECISION = 1e-6;

export interface Centre {
  values: Float64Array;
  norm: number;
}

export function centre(values: number[]): Centre {
  return { values: Float64Array.from(values), norm: norm2(values) };
}

export function norm2(values: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i]! * values[i]!;
  return Math.sqrt(sum);
}

/** Spark's MLUtils.fastSquaredDistance(centre, point). */
export function fastSquaredDistance(c: Centre, x: Tensor, xNorm: number): number {
  const sumSquaredNorm = c.norm * c.norm + xNorm * xNorm;
  const normDiff = c.norm - xNorm;
  const precisionBound1 = (2 * Number.EPSILON * sumSquaredNorm) / (normDiff * normDiff + Number.EPSILON);
  if (precisionBound1 < PRECISION) return sumSquaredNorm - 2 * dot(x, c.values);
  if (x.kind === 'sparse') {
    const dotValue = dot(x, c.values);
    const sqDist = Math.max(sumSquaredNorm - 2 * dotValue, 0);
    const precisionBound2 = (Number.EPSILON * (sumSquaredNorm + 2 * Math.abs(dotValue))) / (sqDist + Number.EPSILON);
    if (precisionBound2 <= PRECISION) return sqDist;
  }
  return squaredDistance(c.values, x);
}

function squaredDistance(c: Float64Array, x: Tensor): number {
  let sum = 0;
  if (x.kind === 'dense') {
    for (let i = 0; i < c.length; i++) {
      const d = c[i]! - x.values[i]!;
      sum += d * d;
    }
    return sum;
  }
  let k = 0;
  for (let i = 0; i < c.length; i++) {
    let d = c[i]!;
    if (k < x.indices.length && x.indices[k] === i) d = x.values[k++]! - d;
    sum += d * d;
  }
  return sum;
}

/** Index of the closest centre (first on ties). */
function closestCentre(centres: Centre[], x: Tensor): number {
  const xNorm = norm2(x.values);
  let bestDistance = Infinity;
  let bestIndex = 0;
  for (let i = 0; i < centres.length; i++) {
    const c = centres[i]!;
    const lowerBound = (c.norm - xNorm) * (c.norm - xNorm);
    if (lowerBound < bestDistance) {
      const distance = fastSquaredDistance(c, x, xNorm);
      if (distance < bestDistance) {
        bestDistance = distance;
        bestIndex = i;
      }
    }
  }
  return bestIndex;
}

export const kMeans: OpDefinition = {
  op: 'k_means',
  className: 'KMeans',
  compile(node: NodeSpec): CompiledStage {
    requireFeatures(node);
    outputOrder(node, ['prediction']);
    const centres = node.attrs.tensors('cluster_centers').map((t) => centre(t.values));
    if (centres.length === 0) throw bundleError(`${node.path}: k-means without cluster centres`);
    const size = centres[0]!.values.length;
    if (centres.some((c) => c.values.length !== size)) throw bundleError(`${node.path}: cluster centres of different sizes`);
    const where = node.path;
    return {
      inputs: [featuresType(size)],
      outputs: node.outputs.map(() => scalar('int')),
      run: (args: Value[]) => [closestCentre(centres, featureVector(args[0]!, size, where))],
    };
  },
};
