// Per-feature scalers of a double vector: standard_scaler, min_max_scaler, max_abs_scaler.

import { bundleError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { toDense, type Tensor } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { asTensor, checkLength, vectorInput, vectorOutput } from './common.js';

function requireSinglePorts(node: NodeSpec): void {
  if (node.inputs.length !== 1 || node.inputs[0]!.port !== 'input' || node.outputs.length !== 1 || node.outputs[0]!.port !== 'output') {
    throw bundleError(`${node.path}: op ${node.op} has one "input" and one "output" port`);
  }
}

/** A stage mapping one vector of `size` elements to another of the same size. */
function vectorStage(node: NodeSpec, size: number, map: (t: Tensor) => Tensor): CompiledStage {
  requireSinglePorts(node);
  return {
    inputs: [vectorInput(size)],
    outputs: [vectorOutput(size)],
    run(args) {
      const t = asTensor(args[0]!);
      checkLength(node, t, size);
      return [map(t)];
    },
  };
}

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
