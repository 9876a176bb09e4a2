// one_hot_encoder: category index → sparse one-hot vector, one or several columns.
//
// New form (Spark ≥ 2.3): category_sizes, handle_invalid, drop_last. Old form: `size`, drop_last;
// old bundles store `size` as the output length (categories − 1 with drop_last), so without a
// handle_invalid they are read as keep when drop_last: the last category maps to all zeros.

import { bundleError, transformError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import type { Tensor, Value } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { DOUBLE_INPUT, bySocket, columnPorts, readHandleInvalid, skippedRow, vectorOutput, type HandleInvalid } from './common.js';

interface Encoding {
  categorySizes: number[];
  mode: HandleInvalid;
  dropLast: boolean;
}

function readEncoding(node: NodeSpec): Encoding {
  const dropLast = node.attrs.boolean('drop_last', true);
  if (node.attrs.has('size')) {
    const mode = readHandleInvalid(node, dropLast ? 'keep' : 'error');
    return { categorySizes: [node.attrs.integer('size')], mode, dropLast };
  }
  return { categorySizes: node.attrs.integers('category_sizes'), mode: readHandleInvalid(node), dropLast };
}

/** Output length: one fewer with drop_last, one more for the invalid slot with keep (both: unchanged). */
function outputSize(categories: number, { mode, dropLast }: Encoding): number {
  const keep = mode === 'keep';
  if (dropLast && !keep) return categories - 1;
  if (!dropLast && keep) return categories + 1;
  return categories;
}

function compile(node: NodeSpec): CompiledStage {
  const encoding = readEncoding(node);
  const { inputs, outputs } = columnPorts(node);
  const { categorySizes, mode } = encoding;
  if (categorySizes.length !== inputs.length) {
    throw bundleError(`${node.path}: ${categorySizes.length} category sizes for ${inputs.length} input columns`);
  }
  const sizes = categorySizes.map((c) => outputSize(c, encoding));
  if (sizes.some((s) => s < 0)) throw bundleError(`${node.path}: a category size is negative`);
  const columns = inputs.length;

  const encode = (column: number, value: Value): Tensor => {
    const label = value as number;
    const categories = categorySizes[column]!;
    const size = sizes[column]!;
    if (!Number.isInteger(label)) throw transformError(`${node.name}: invalid label ${label}, must be an integer`);
    let slot = label;
    if (label < 0 || label >= categories) {
      const why = label < 0 ? `negative index ${label}` : `unseen index ${label} (${categories} categories)`;
      if (mode === 'skip') throw skippedRow(node, why);
      if (mode !== 'keep') throw transformError(`${node.name}: ${why}; set handle_invalid to keep to encode invalid values`);
      slot = categories;
    }
    return slot < size
      ? { kind: 'sparse', dims: [size], indices: [slot], values: [1] }
      : { kind: 'sparse', dims: [size], indices: [], values: [] };
  };

  return {
    inputs: node.inputs.map(() => DOUBLE_INPUT),
    outputs: bySocket(outputs, (c) => vectorOutput(sizes[c])),
    run: columns === 1
      ? (args) => [encode(0, args[0]!)]
      : (args) => {
          const out = new Array<Value>(columns);
          for (let c = 0; c < columns; c++) out[outputs[c]!] = encode(c, args[inputs[c]!]!);
          return out;
        },
  };
}

export const oneHotEncoder: OpDefinition = { op: 'one_hot_encoder', className: 'OneHotEncoder', compile };
