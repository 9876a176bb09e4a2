// isotonic_regression: Spark's piecewise-linear lookup. The feature is a scalar, or element
// `feature_index` of a vector when that attribute is present. Boundaries are searched as
// java.util.Arrays.binarySearch does, so repeated boundaries resolve to the same entry.

import type { NodeSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import { DOUBLE, scalar, type Tensor, type Value } from '../../types.js';
import { outputOrder, requirePorts, type CompiledStage, type OpDefinition } from '../op.js';
import { element, featuresType } from './vector.js';

export const isotonicRegression: OpDefinition = {
  op: 'isotonic_regression',
  className: 'IsotonicRegression',
  compile(node: NodeSpec): CompiledStage {
    requirePorts(node, ['features']);
    outputOrder(node, ['prediction']);
    const boundaries = Float64Array.from(node.attrs.doubles('boundaries'));
    const predictions = Float64Array.from(node.attrs.doubles('predictions'));
    if (boundaries.length === 0 || boundaries.length !== predictions.length) {
      throw bundleError(`${node.path}: isotonic regression needs as many predictions as boundaries (at least one)`);
    }
    const featureIndex = node.attrs.has('feature_index') ? node.attrs.integer('feature_index') : undefined;
    const predict = (x: number) => isotonicPredict(boundaries, predictions, x);
    return {
      inputs: [featureIndex === undefined ? scalar('double', true) : featuresType()],
      outputs: node.outputs.map(() => DOUBLE),
      run:
        featureIndex === undefined
          ? (args: Value[]) => [predict(args[0] as number)]
          : (args: Value[]) => [predict(element(args[0] as Tensor, featureIndex))],
    };
  },
};

function isotonicPredict(boundaries: Float64Array, predictions: Float64Array, x: number): number {
  const found = javaBinarySearch(boundaries, x);
  const insert = -found - 1;
  const last = boundaries.length - 1;
  if (insert === 0) return predictions[0]!;
  if (insert === boundaries.length) return predictions[last]!;
  if (found >= 0) return predictions[found]!;
  const x1 = boundaries[insert - 1]!;
  const y1 = predictions[insert - 1]!;
  const x2 = boundaries[insert]!;
  const y2 = predictions[insert]!;
  return y1 + ((y2 - y1) * (x - x1)) / (x2 - x1);
}

/** java.util.Arrays.binarySearch(double[], double): found index, or −(insertion point) − 1. */
function javaBinarySearch(a: Float64Array, key: number): number {
  let low = 0;
  let high = a.length - 1;
  while (low <= high) {
    const mid = (low + high) >>> 1;
    const cmp = javaCompare(a[mid]!, key);
    if (cmp < 0) low = mid + 1;
    else if (cmp > 0) high = mid - 1;
    else return mid;
  }
  return -(low + 1);
}

/** Double.compare: −0.0 < 0.0 and NaN above everything (equal to itself). */
function javaCompare(a: number, b: number): number {
  if (a < b) return -1;
  if (a > b) return 1;
  const aNaN = Number.isNaN(a);
  const bNaN = Number.isNaN(b);
  if (aNaN || bNaN) return aNaN === bNaN ? 0 : aNaN ? 1 : -1;
  if (a === 0 && Object.is(a, -0) !== Object.is(b, -0)) return Object.is(a, -0) ? -1 : 1;
  return 0;
}
