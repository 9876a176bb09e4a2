// Scalar arithmetic: math_unary, math_binary.

import { bundleError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { DOUBLE } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { DOUBLE_INPUT, requireSingleColumn } from './common.js';

const UNARY: Record<string, (a: number) => number> = {
  log: Math.log,
  exp: Math.exp,
  sqrt: Math.sqrt,
  sin: Math.sin,
  cos: Math.cos,
  tan: Math.tan,
};

const BINARY: Record<string, (a: number, b: number) => number> = {
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  div: (a, b) => a / b,
  rem: (a, b) => a % b,
  log_n: (a, b) => Math.log(a) / Math.log(b),
  pow: Math.pow,
};

function operation<T>(node: NodeSpec, table: Record<string, T>): T {
  const name = node.attrs.string('operation');
  const op = Object.hasOwn(table, name) ? table[name] : undefined;
  if (!op) throw bundleError(`${node.path}: unsupported ${node.op} operation "${name}"`);
  return op;
}

function compileMathUnary(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const f = operation(node, UNARY);
  return { inputs: [DOUBLE_INPUT], outputs: [DOUBLE], run: (args) => [f(args[0] as number)] };
}

/** Inputs on `input_a` / `input_b`; a missing one takes its default `da` / `db`. */
function compileMathBinary(node: NodeSpec): CompiledStage {
  const f = operation(node, BINARY);
  const a = node.inputs.findIndex((s) => s.port === 'input_a');
  const b = node.inputs.findIndex((s) => s.port === 'input_b');
  if (node.inputs.length !== (a >= 0 ? 1 : 0) + (b >= 0 ? 1 : 0) || node.outputs.length !== 1 || node.outputs[0]!.port !== 'output') {
    throw bundleError(`${node.path}: math_binary has ports input_a, input_b (each optional) and output`);
  }
  const da = a < 0 ? node.attrs.double('da') : 0;
  const db = b < 0 ? node.attrs.double('db') : 0;
  return {
    inputs: node.inputs.map(() => DOUBLE_INPUT),
    outputs: [DOUBLE],
    run: (args) => [f(a < 0 ? da : (args[a] as number), b < 0 ? db : (args[b] as number))],
  };
}

export const mathUnary: OpDefinition = { op: 'math_unary', className: 'MathUnary', compile: compileMathUnary };
export const mathBinary: OpDefinition = { op: 'math_binary', className: 'MathBinary', compile: compileMathBinary };
