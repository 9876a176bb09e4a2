// Helpers shared by the feature transformers: attribute conventions, input types, vectors.

import { SkippedRow, bundleError, transformError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { scalar, tensor, type DataType, type Tensor } from '../../types.js';
import type { CompiledStage } from '../op.js';

export type HandleInvalid = 'error' | 'skip' | 'keep';

/** `handle_invalid` (error|skip|keep); `fallback` when the attribute is absent. */
export function readHandleInvalid(node: NodeSpec, fallback: HandleInvalid = 'error'): HandleInvalid {
  if (!node.attrs.has('handle_invalid')) return fallback;
  const mode = node.attrs.string('handle_invalid');
  if (mode === 'error' || mode === 'skip' || mode === 'keep') return mode;
  throw bundleError(`${node.path}: handle_invalid "${mode}" is not error, skip or keep`);
}

/** MLeap's `skip`: the row is filtered out of the frame. */
export function skippedRow(node: NodeSpec, why: string): Error {
  return new SkippedRow(`${node.name}: ${why}`);
}

export const DOUBLE_INPUT = scalar('double', true);
export const STRING_INPUT = scalar('string', true);

/** A nullable double vector input of `size` elements (any size when undefined). */
export function vectorInput(size?: number): DataType {
  return tensor('double', size === undefined || size < 0 ? undefined : [size], true);
}

/** A double vector output of `size` elements (any size when undefined). */
export function vectorOutput(size?: number): DataType {
  return tensor('double', size === undefined || size < 0 ? undefined : [size]);
}

/** Number of elements of a vector value (a 0-d tensor cast from a scalar counts one). */
export function vectorLength(t: Tensor): number {
  return t.dims.length === 0 ? 1 : t.dims[0]!;
}

/** Fails the row when a vector does not have the size the model was fitted on. */
function checkLength(node: NodeSpec, t: Tensor, expected: number): void {
  const n = vectorLength(t);
  if (n !== expected) throw transformError(`${node.name}: input vector has ${n} elements, the model expects ${expected}`);
}

/**
 * Spark's `Vector.compressed` of the entries `indices`/`values` (ascending; zeros allowed):
 * sparse without the zeros when 1.5·(nnz+1) < size, dense otherwise.
 */
export function compressed(size: number, indices: number[], values: number[]): Tensor {
  let nnz = 0;
  for (let i = 0; i < values.length; i++) if (values[i] !== 0) nnz++;
  if (1.5 * (nnz + 1) < size) {
    if (nnz === values.length) return { kind: 'sparse', dims: [size], indices, values };
    const keptIndices: number[] = [];
    const kept: number[] = [];
    for (let i = 0; i < values.length; i++) {
      if (values[i] !== 0) {
        keptIndices.push(indices[i]!);
        kept.push(values[i]!);
      }
    }
    return { kind: 'sparse', dims: [size], indices: keptIndices, values: kept };
  }
  const out = new Array<number>(size).fill(0);
  for (let i = 0; i < indices.length; i++) out[indices[i]!] = values[i]!;
  return { kind: 'dense', dims: [size], values: out };
}

/** Spark's `Vector.compressed` of a dense array. */
export function compressedDense(values: number[]): Tensor {
  let nnz = 0;
  for (let i = 0; i < values.length; i++) if (values[i] !== 0) nnz++;
  if (!(1.5 * (nnz + 1) < values.length)) return { kind: 'dense', dims: [values.length], values };
  const indices: number[] = [];
  const kept: number[] = [];
  for (let i = 0; i < values.length; i++) {
    if (values[i] !== 0) {
      indices.push(i);
      kept.push(values[i]!);
    }
  }
  return { kind: 'sparse', dims: [values.length], indices, values: kept };
}

/** Fails the load unless the node binds exactly one `input` and one `output` port. */
export function requireSingleColumn(node: NodeSpec): void {
  const ok = node.inputs.length === 1 && node.inputs[0]!.port === 'input' && node.outputs.length === 1 && node.outputs[0]!.port === 'output';
  if (!ok) throw bundleError(`${node.path}: op ${node.op} has one "input" and one "output" port`);
}

/** A stage mapping one vector of `size` elements (checked per row; any when undefined) to another of `outputSize`. */
export function vectorStage(
  node: NodeSpec,
  size: number | undefined,
  map: (t: Tensor) => Tensor,
  outputSize = size,
): CompiledStage {
  requireSingleColumn(node);
  return {
    inputs: [vectorInput(size)],
    outputs: [vectorOutput(outputSize)],
    run:
      size === undefined
        ? (args) => [map(args[0] as Tensor)]
        : (args) => {
            const t = args[0] as Tensor;
            checkLength(node, t, size);
            return [map(t)];
          },
  };
}

/**
 * Input sockets of an op that takes one column on `input` or several on `input0..n`, in column
 * order; the matching output sockets on `output` / `output0..n`.
 */
export function columnPorts(node: NodeSpec): { inputs: number[]; outputs: number[] } {
  const single = node.inputs.length === 1 && node.inputs[0]!.port === 'input';
  const inputs = single ? [0] : numbered(node, node.inputs.map((s) => s.port), 'input');
  const outputs = node.outputs.length === 1 && node.outputs[0]!.port === 'output'
    ? [0]
    : numbered(node, node.outputs.map((s) => s.port), 'output');
  if (inputs.length !== outputs.length) {
    throw bundleError(`${node.path}: op ${node.op} has ${inputs.length} input and ${outputs.length} output columns`);
  }
  return { inputs, outputs };
}

/** Per-socket values from per-column ones: `sockets[c]` is the socket of column `c`. */
export function bySocket<T>(sockets: number[], ofColumn: (column: number) => T): T[] {
  const out = new Array<T>(sockets.length);
  sockets.forEach((socket, c) => (out[socket] = ofColumn(c)));
  return out;
}

function numbered(node: NodeSpec, ports: string[], prefix: string): number[] {
  const byNumber = ports.map((port, i) => {
    const n = port.startsWith(prefix) ? Number(port.slice(prefix.length)) : NaN;
    if (!Number.isInteger(n) || port.length === prefix.length) {
      throw bundleError(`${node.path}: unexpected port "${port}" for op ${node.op}`);
    }
    return { n, i };
  });
  byNumber.sort((a, b) => a.n - b.n);
  byNumber.forEach((x, k) => {
    if (x.n !== k) throw bundleError(`${node.path}: ports of op ${node.op} are not ${prefix}0..${ports.length - 1}`);
  });
  return byNumber.map((x) => x.i);
}
