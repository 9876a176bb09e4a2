// Per-feature scalers of a double vector: standard_scaler, min_max_scaler, max_abs_scaler.

import { bundleError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { toDense } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { compressedDense, vectorStage } from './common.js';

/** Spark multiplies by the reciprocal (not divides); 0 where the deviation is 0. */
function reciprocals(std: number[]): number[] {
  return std.map((s) => (s !== 0 ? 1 / s : 0));
}

function compileStandardScaler(node: NodeSpec): CompiledStage {
  const std = node.attrs.has('std') ? node.attrs.doubles('std') : undefined;
  const mean = node.attrs.has('mean') ? node.attrs.doubles('mean') : undefined;
  if (std && mean && std.length !== mean.length) throw bundleError(`${node.path}: std and mean differ in size`);
  if (std && !mean) {
    const factor = reciprocals(std);
    return vectorStage(node, std.length, (t) => {
      const vs = t.values;
      const out = new Array<number>(vs.length);
      if (t.kind === 'sparse') {
        for (let i = 0; i < vs.length; i++) out[i] = vs[i]! * factor[t.indices[i]!]!;
        return { kind: 'sparse', dims: t.dims, indices: t.indices, values: out };
      }
      for (let i = 0; i < vs.length; i++) out[i] = vs[i]! * factor[i]!;
      return { kind: 'dense', dims: t.dims, values: out };
    });
  }
  if (mean && !std) {
    return vectorStage(node, mean.length, (t) => {
      const vs = toDense(t);
      const out = new Array<number>(vs.length);
      for (let i = 0; i < vs.length; i++) out[i] = vs[i]! - mean[i]!;
      return { kind: 'dense', dims: [vs.length], values: out };
    });
  }
  if (mean && std) {
    const factor = reciprocals(std);
    return vectorStage(node, std.length, (t) => {
      const vs = toDense(t);
      const out = new Array<number>(vs.length);
      for (let i = 0; i < vs.length; i++) out[i] = std[i] !== 0 ? (vs[i]! - mean[i]!) * factor[i]! : 0;
      return { kind: 'dense', dims: [vs.length], values: out };
    });
  }
  throw bundleError(`${node.path}: standard_scaler needs std, mean or both`);
}

export const standardScaler: OpDefinition = { op: 'standard_scaler', className: 'StandardScaler', compile: compileStandardScaler };

function compileMinMaxScaler(node: NodeSpec): CompiledStage {
  const min = node.attrs.doubles('min');
  const max = node.attrs.doubles('max');
  if (min.length !== max.length) throw bundleError(`${node.path}: min and max differ in size`);
  const minValue = node.attrs.double('minValue', 0);
  const maxValue = node.attrs.double('maxValue', 1);
  const scale = maxValue - minValue;
  const constantOutput = (minValue + maxValue) / 2;
  // 0 marks a constant feature (max = min).
  const factor = min.map((lo, i) => (max[i]! - lo !== 0 ? scale / (max[i]! - lo) : 0));
  return vectorStage(node, max.length, (t) => {
    const vs = toDense(t);
    const out = new Array<number>(vs.length);
    for (let i = 0; i < vs.length; i++) {
      const x = vs[i]!;
      if (Number.isNaN(x)) out[i] = x;
      else out[i] = factor[i] !== 0 ? (x - min[i]!) * factor[i]! + minValue : constantOutput;
    }
    return compressedDense(out);
  });
}

function compileMaxAbsScaler(node: NodeSpec): CompiledStage {
  const divisor = node.attrs.doubles('maxAbs').map((m) => (m === 0 ? 1 : m));
  const clip = (x: number) => Math.max(-1, Math.min(1, x));
  return vectorStage(node, divisor.length, (t) => {
    const vs = t.values;
    const out = new Array<number>(vs.length);
    if (t.kind === 'sparse') {
      for (let i = 0; i < vs.length; i++) out[i] = clip(vs[i]! / divisor[t.indices[i]!]!);
      return { kind: 'sparse', dims: t.dims, indices: t.indices, values: out };
    }
    for (let i = 0; i < vs.length; i++) out[i] = Number.isNaN(vs[i]!) ? vs[i]! : clip(vs[i]! / divisor[i]!);
    return { kind: 'dense', dims: t.dims, values: out };
  });
}

export const minMaxScaler: OpDefinition = { op: 'min_max_scaler', className: 'MinMaxScaler', compile: compileMinMaxScaler };
export const maxAbsScaler: OpDefinition = { op: 'max_abs_scaler', className: 'MaxAbsScaler', compile: compileMaxAbsScaler };
