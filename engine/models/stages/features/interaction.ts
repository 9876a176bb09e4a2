// interaction: Spark's Interaction, the products of every combination of the inputs' encoded
// features. Each input is a scalar or a vector; a feature with more than one category
// (num_features > 1) holds a category index and is one-hot encoded, otherwise its value is used.

import { bundleError, transformError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import type { DataType, Tensor, Value } from '../../types.js';
import { numberedInputs, type CompiledStage, type OpDefinition } from '../op.js';
import { DOUBLE_INPUT, compressed, vectorInput, vectorLength, vectorOutput } from './common.js';

interface FeatureEncoder {
  /** Categories per element of the input (1 = numeric). */
  numFeatures: number[];
  /** Where each element's outputs start. */
  offsets: number[];
  outputSize: number;
}

function encoder(node: NodeSpec, numFeatures: number[]): FeatureEncoder {
  if (numFeatures.length === 0 || numFeatures.some((n) => !(n > 0))) {
    throw bundleError(`${node.path}: interaction feature counts must all be positive`);
  }
  const offsets: number[] = [];
  let outputSize = 0;
  for (const n of numFeatures) {
    offsets.push(outputSize);
    outputSize += n;
  }
  return { numFeatures, offsets, outputSize };
}

/** Calls `emit(index, value)` for each output of one input (Spark's `foreachNonzeroOutput`). */
function encode(node: NodeSpec, enc: FeatureEncoder, value: Value, emit: (index: number, value: number) => void): void {
  const element = (i: number, v: number) => {
    const categories = enc.numFeatures[i]!;
    if (categories > 1) {
      if (!(v >= 0 && Number.isInteger(v) && v < categories)) {
        throw transformError(`${node.name}: interaction values must be category indices below ${categories}, got ${v}`);
      }
      emit(enc.offsets[i]! + v, 1);
    } else {
      emit(enc.offsets[i]!, v);
    }
  };
  if (typeof value === 'number') {
    if (enc.numFeatures.length !== 1) throw transformError(`${node.name}: a scalar input must have one feature`);
    element(0, value);
    return;
  }
  const t = value as Tensor;
  const size = vectorLength(t);
  if (size !== enc.numFeatures.length) {
    throw transformError(`${node.name}: vector input has ${size} elements, expected ${enc.numFeatures.length}`);
  }
  for (let k = 0; k < t.values.length; k++) element(t.kind === 'sparse' ? t.indices[k]! : k, t.values[k]!);
}

function inputTypes(node: NodeSpec, encoders: FeatureEncoder[]): DataType[] {
  if (!node.attrs.has('input_shapes')) return encoders.map(() => vectorInput());
  const shapes = node.attrs.dataShapes('input_shapes');
  if (shapes.length !== encoders.length) throw bundleError(`${node.path}: ${shapes.length} input_shapes for ${encoders.length} inputs`);
  return shapes.map((s, i) => (s.shape === 'scalar' ? DOUBLE_INPUT : vectorInput(s.shape === 'tensor' ? s.dims?.[0] : encoders[i]!.numFeatures.length)));
}

function compile(node: NodeSpec): CompiledStage {
  const count = node.attrs.integer('num_inputs');
  const order = numberedInputs(node);
  if (order.length !== count) throw bundleError(`${node.path}: num_inputs is ${count}, the node has ${order.length} inputs`);
  const encoders = Array.from({ length: count }, (_, i) => encoder(node, node.attrs.integers(`num_features${i}`)));
  const columnTypes = inputTypes(node, encoders);
  const types = new Array<DataType>(count);
  order.forEach((socket, c) => (types[socket] = columnTypes[c]!));
  const outputSize = encoders.reduce((size, e) => size * e.outputSize, 1);

  return {
    inputs: types,
    outputs: [vectorOutput(outputSize)],
    run(args) {
      // Starting from the last input, every output of an input multiplies every product so far.
      let indices = [0];
      let values = [1];
      let size = 1;
      for (let c = count - 1; c >= 0; c--) {
        const prevIndices = indices;
        const prevValues = values;
        const prevSize = size;
        indices = [];
        values = [];
        size *= encoders[c]!.outputSize;
        encode(node, encoders[c]!, args[order[c]!]!, (i, a) => {
          for (let j = 0; j < prevIndices.length; j++) {
            indices.push(prevIndices[j]! + i * prevSize);
            values.push(prevValues[j]! * a);
          }
        });
      }
      return [compressed(size, indices, values)];
    },
  };
}

export const interaction: OpDefinition = { op: 'interaction', className: 'Interaction', compile };
