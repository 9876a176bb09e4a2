// vector_assembler: scalars and vectors concatenated into one double vector (Spark's compressed form).

import { bundleError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import type { DataType, Tensor, Value } from '../../types.js';
import { numberedInputs, type CompiledStage, type OpDefinition } from '../op.js';
import { DOUBLE_INPUT, compressed, vectorInput, vectorLength, vectorOutput } from './common.js';

/** Expected type per input column; without `input_shapes`, any vector (scalars arrive as 0-d tensors). */
function inputTypes(node: NodeSpec, count: number): DataType[] {
  if (!node.attrs.has('input_shapes')) return Array.from({ length: count }, () => vectorInput());
  const shapes = node.attrs.dataShapes('input_shapes');
  if (shapes.length !== count) throw bundleError(`${node.path}: ${shapes.length} input_shapes for ${count} inputs`);
  return shapes.map((shape) => {
    if (shape.shape === 'scalar') return DOUBLE_INPUT;
    if (shape.shape === 'tensor' && (shape.dims?.length ?? 1) === 1) return vectorInput(shape.dims?.[0]);
    throw bundleError(`${node.path}: vector_assembler inputs must be scalars or vectors`);
  });
}

/** Appends the non-zero entries of one input at `offset`; returns the input's length. */
function appendNonZeros(value: Value, offset: number, indices: number[], values: number[]): number {
  if (typeof value === 'number') {
    if (value !== 0) {
      indices.push(offset);
      values.push(value);
    }
    return 1;
  }
  const t = value as Tensor;
  const vs = t.values;
  if (t.kind === 'dense') {
    for (let i = 0; i < vs.length; i++) {
      if (vs[i] !== 0) {
        indices.push(offset + i);
        values.push(vs[i]!);
      }
    }
    return vs.length;
  }
  for (let i = 0; i < vs.length; i++) {
    if (vs[i] !== 0) {
      indices.push(offset + t.indices[i]!);
      values.push(vs[i]!);
    }
  }
  return vectorLength(t);
}

function compile(node: NodeSpec): CompiledStage {
  const order = numberedInputs(node);
  const columnTypes = inputTypes(node, order.length);
  const types = new Array<DataType>(order.length);
  order.forEach((socket, c) => (types[socket] = columnTypes[c]!));
  const sizes = columnTypes.map((t) => (t.shape === 'scalar' ? 1 : t.shape === 'tensor' ? t.dims?.[0] : undefined));
  const total = sizes.every((s) => s !== undefined && s >= 0) ? sizes.reduce<number>((a, s) => a + s!, 0) : undefined;
  if (node.outputs.length !== 1 || node.outputs[0]!.port !== 'output') {
    throw bundleError(`${node.path}: vector_assembler has one output port "output"`);
  }

  return {
    inputs: types,
    outputs: [vectorOutput(total)],
    run(args) {
      const indices: number[] = [];
      const values: number[] = [];
      let size = 0;
      for (let c = 0; c < order.length; c++) size += appendNonZeros(args[order[c]!]!, size, indices, values);
      return [compressed(size, indices, values)];
    },
  };
}

export const vectorAssembler: OpDefinition = { op: 'vector_assembler', className: 'VectorAssembler', compile };
