// The contract between the pipeline compiler and one MLeap op.
//
// An op compiles a stage (`NodeSpec`: attributes + the columns bound to its ports) into a
// `CompiledStage`: the data type it expects on each input socket, the type it produces on
// each output socket, and a `run` function over one row's input values. The pipeline
// compiler binds columns by name, casts a producer's type to what a consumer expects (MLeap's
// casting rules), and calls `run` once per row. `run` must be pure (no state across rows):
// rows are spread over worker threads and every execution mode must give identical results.

import { bundleError } from '../errors.js';
import type { NodeSpec } from '../bundle/spec.js';
import type { DataType, Value } from '../types.js';

export interface CompiledStage {
  /** Expected type of each input socket, in `node.inputs` order. */
  inputs: DataType[];
  /** Produced type of each output socket, in `node.outputs` order. */
  outputs: DataType[];
  /** One row: values in `node.inputs` order → values in `node.outputs` order. */
  run(args: Value[]): Value[];
  /**
   * Per input socket, the values it accepts when the op accepts only a known set (a string
   * indexer's labels with handle_invalid=error). Sample frames and warm-up draw from them.
   */
  domains?: (readonly Value[] | undefined)[];
}

export interface OpDefinition {
  /** The op name of model.json, e.g. `string_indexer`. */
  op: string;
  /** MLeap's class name of the transformer, shown by the graph endpoint, e.g. `StringIndexer`. */
  className: string;
  compile(node: NodeSpec): CompiledStage;
}


/**
 * Maps each output socket of a node to an index into `ports` (the ports the op can produce),
 * so an op computes its outputs once and returns `order.map(i => all[i])`.
 */
export function outputOrder(node: NodeSpec, ports: readonly string[]): number[] {
  return node.outputs.map((socket) => {
    const i = ports.indexOf(socket.port);
    if (i < 0) {
      throw bundleError(`${node.path}: op ${node.op} has no output port "${socket.port}" (has ${ports.join(', ')})`);
    }
    return i;
  });
}

/** Input sockets sorted by port for multi-input ops (`input0`, `input1`, ... `input10`). */
export function numberedInputs(node: NodeSpec, prefix = 'input'): number[] {
  const indexed = node.inputs.map((socket, i) => {
    const n = socket.port.startsWith(prefix) ? Number(socket.port.slice(prefix.length)) : NaN;
    if (!Number.isInteger(n)) throw bundleError(`${node.path}: unexpected input port "${socket.port}" for op ${node.op}`);
    return { n, i };
  });
  return indexed.sort((a, b) => a.n - b.n).map((x) => x.i);
}

/** Fails the load when the node does not bind exactly the expected ports. */
export function requirePorts(node: NodeSpec, inputs: readonly string[]): void {
  const ports = node.inputs.map((s) => s.port);
  if (ports.length !== inputs.length || !inputs.every((p, i) => ports[i] === p)) {
    throw bundleError(`${node.path}: op ${node.op} expects input ports [${inputs.join(', ')}], found [${ports.join(', ')}]`);
  }
}
