// string_indexer: label → its index (as a double), one or several columns;
// reverse_string_indexer: index → label.

import { bundleError, transformError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { DOUBLE, list, scalar, type Value } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { DOUBLE_INPUT, STRING_INPUT, columnPorts, readHandleInvalid, requireSingleColumn, skippedRow } from './common.js';

/** `labels` (one column), or `labels_length` + `labels_array_0..n` (MLeap ≥ 0.18, one list per column). */
function labelLists(node: NodeSpec): string[][] {
  if (!node.attrs.has('labels_length')) return [node.attrs.strings('labels')];
  const count = node.attrs.integer('labels_length');
  return Array.from({ length: count }, (_, i) => node.attrs.strings(`labels_array_${i}`));
}

function compile(node: NodeSpec): CompiledStage {
  const lists = labelLists(node);
  const { inputs, outputs } = columnPorts(node);
  if (lists.length !== inputs.length) {
    throw bundleError(`${node.path}: ${lists.length} label lists for ${inputs.length} input columns`);
  }
  const mode = readHandleInvalid(node);
  const indexes = lists.map((labels) => {
    const index = new Map<string, number>();
    // Like Scala's zipWithIndex.toMap, a repeated label keeps its last index.
    labels.forEach((label, i) => index.set(label, i));
    return index;
  });
  const invalidIndex = lists.map((labels) => labels.length);
  const columns = inputs.length;

  const indexOf = (column: number, value: Value): number => {
    const label = value as string;
    const i = indexes[column]!.get(label);
    if (i !== undefined) return i;
    if (mode === 'keep') return invalidIndex[column]!;
    if (mode === 'skip') throw skippedRow(node, `unseen label "${label}"`);
    throw transformError(`${node.name}: unseen label "${label}" (set handle_invalid to keep to index unseen labels)`);
  };

  const domains = new Array<readonly Value[] | undefined>(node.inputs.length);
  lists.forEach((labels, c) => (domains[inputs[c]!] = labels));
  return {
    inputs: node.inputs.map(() => STRING_INPUT),
    outputs: node.outputs.map(() => DOUBLE),
    domains,
    run: columns === 1
      ? (args) => [indexOf(0, args[0]!)]
      : (args) => {
          const out = new Array<Value>(columns);
          for (let c = 0; c < columns; c++) out[outputs[c]!] = indexOf(c, args[inputs[c]!]!);
          return out;
        },
  };
}

export const stringIndexer: OpDefinition = { op: 'string_indexer', className: 'StringIndexer', compile };

function compileReverse(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const labels = node.attrs.strings('labels');
  const shape = node.attrs.dataShape('input_shape', scalar('double'));
  if (shape.shape === 'tensor') throw bundleError(`${node.path}: reverse_string_indexer input must be a scalar or a list`);
  const label = (index: number): string => {
    // The index is truncated to an integer as Scala's `toInt` does.
    const found = labels[Math.trunc(index)];
    if (found === undefined || !Number.isFinite(index)) throw transformError(`${node.name}: no label for index ${index}`);
    return found;
  };
  if (shape.shape === 'list') {
    return {
      inputs: [list('double', true)],
      outputs: [list('string')],
      run: (args) => [(args[0] as number[]).map(label)],
    };
  }
  return { inputs: [DOUBLE_INPUT], outputs: [scalar('string')], run: (args) => [label(args[0] as number)] };
}

export const reverseStringIndexer: OpDefinition = { op: 'reverse_string_indexer', className: 'ReverseStringIndexer', compile: compileReverse };
