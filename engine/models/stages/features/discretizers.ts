// Scalar value maps: binarizer (also element-wise on a vector), bucketizer, imputer.

import { bundleError, transformError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { DOUBLE, scalar, type DataType, type Tensor } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import {
  DOUBLE_INPUT, compressed, readHandleInvalid, requireSingleColumn, skippedRow, vectorInput, vectorLength, vectorOutput,
} from './common.js';

function compileBinarizer(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const threshold = node.attrs.double('threshold');
  // MLeap ≥ 0.11 writes `input_shapes` (one data_shape); older bundles `input_shape`.
  const shapeName = node.attrs.has('input_shapes') ? 'input_shapes' : 'input_shape';
  const shape: DataType = node.attrs.dataShape(shapeName, scalar('double', true));
  if (shape.shape === 'scalar') {
    return { inputs: [DOUBLE_INPUT], outputs: [DOUBLE], run: (args) => [(args[0] as number) > threshold ? 1 : 0] };
  }
  if (shape.shape !== 'tensor') throw bundleError(`${node.path}: binarizer input must be a scalar or a vector`);
  const size = shape.dims?.[0];
  return {
    inputs: [vectorInput(size)],
    outputs: [vectorOutput(size)],
    run(args) {
      const t = args[0] as Tensor;
      const indices: number[] = [];
      const values: number[] = [];
      const vs = t.values;
      for (let i = 0; i < vs.length; i++) {
        if (vs[i]! > threshold) {
          indices.push(t.kind === 'sparse' ? t.indices[i]! : i);
          values.push(1);
        }
      }
      return [compressed(vectorLength(t), indices, values)];
    },
  };
}

/** Java's `Double.compare` (-0.0 before 0.0), used by `Arrays.binarySearch`. */
function javaCompare(a: number, b: number): number {
  if (a < b) return -1;
  if (a > b) return 1;
  if (a === 0 && b === 0) return Object.is(a, -0) === Object.is(b, -0) ? 0 : Object.is(a, -0) ? -1 : 1;
  return 0;
}

/** `Arrays.binarySearch`: the index when found, else −(insertion point) − 1. */
function binarySearch(sorted: number[], key: number): number {
  let lo = 0;
  let hi = sorted.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const c = javaCompare(sorted[mid]!, key);
    if (c < 0) lo = mid + 1;
    else if (c > 0) hi = mid - 1;
    else return mid;
  }
  return -(lo + 1);
}

function compileBucketizer(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const splits = node.attrs.doublesWithInfinities('splits');
  if (splits.length < 3) throw bundleError(`${node.path}: bucketizer needs at least three splits`);
  for (let i = 1; i < splits.length; i++) {
    if (!(splits[i]! > splits[i - 1]!)) throw bundleError(`${node.path}: bucketizer splits must increase strictly`);
  }
  const mode = readHandleInvalid(node);
  const last = splits[splits.length - 1]!;
  const bucket = (x: number): number => {
    if (Number.isNaN(x)) {
      if (mode === 'keep') return splits.length - 1;
      if (mode === 'skip') throw skippedRow(node, 'NaN value');
      throw transformError(`${node.name}: NaN value (set handle_invalid to keep to bucket NaN values)`);
    }
    if (x === last) return splits.length - 2;
    const found = binarySearch(splits, x);
    if (found >= 0) return found;
    const insertion = -found - 1;
    if (insertion === 0 || insertion === splits.length) {
      throw transformError(`${node.name}: value ${x} is out of the bucketizer bounds [${splits[0]}, ${last}]`);
    }
    return insertion - 1;
  };
  return { inputs: [DOUBLE_INPUT], outputs: [DOUBLE], run: (args) => [bucket(args[0] as number)] };
}

function compileImputer(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const surrogate = node.attrs.double('surrogate_value');
  const missing = node.attrs.has('missing_value') ? node.attrs.double('missing_value') : NaN;
  return {
    inputs: [DOUBLE_INPUT],
    outputs: [DOUBLE],
    run(args) {
      const x = args[0] as number;
      return [Number.isNaN(x) || x === missing ? surrogate : x];
    },
  };
}

export const binarizer: OpDefinition = { op: 'binarizer', className: 'Binarizer', compile: compileBinarizer };
export const bucketizer: OpDefinition = { op: 'bucketizer', className: 'Bucketizer', compile: compileBucketizer };
export const imputer: OpDefinition = { op: 'imputer', className: 'Imputer', compile: compileImputer };
