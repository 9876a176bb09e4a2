// Compiles a bundle into a row program: pipelines are flattened into one list of steps over a
// slot table (one slot per column), columns are bound by name, and a cast is inserted where a
// producer's type differs from what its consumer expects.

import { caster, type Cast } from './cast.js';
import { bundleError } from './errors.js';
import { rootNode, type BundleDoc, type BundleInfo, type NodeSpec } from './bundle/spec.js';
import { opDefinition } from './stages/index.js';
import type { CompiledStage } from './stages/op.js';
import { typeLabel, type DataType, type Field, type Value } from './types.js';

/** One node of the model's graph, as the graph endpoint draws it. */
export interface GraphStage {
  /** MLeap class name: `Pipeline`, `StringIndexer`, ... */
  className: string;
  /** The node's name (uid) from node.json. */
  name: string;
  op: string;
  inputs: Field[];
  outputs: Field[];
  /** Stages of a pipeline, in execution order. */
  children?: GraphStage[];
}

export interface CompiledModel {
  info: BundleInfo;
  /** Columns the model reads from a frame, in order of first use. */
  inputSchema: Field[];
  /** `inputSchema` followed by every column produced, in stage order. */
  outputSchema: Field[];
  /** Per input field, the values the model accepts when it accepts only a known set. */
  inputDomains: (readonly Value[] | undefined)[];
  graph: GraphStage;
  /**
   * One row in place: `row` holds the input values in `inputSchema` order, the produced values
   * are written after them (the row then follows `outputSchema`). Spares a row its copies.
   */
  runRow(row: Value[]): void;
}

/** A column before slots are numbered: inputs come first, so produced slots are known only at the end. */
interface ColumnRef {
  produced: boolean;
  index: number;
}

interface Step {
  stage: CompiledStage;
  reads: ColumnRef[];
  casts: (Cast | null)[];
  writes: ColumnRef[];
}

const MAX_PIPELINE_DEPTH = 32;

export function compileBundle(doc: BundleDoc): CompiledModel {
  if (doc.info.format !== 'json') {
    throw bundleError(`bundle format "${doc.info.format}" is not supported (only "json")`);
  }
  const compiler = new PipelineCompiler();
  const graph = compiler.node(rootNode(doc), 0);
  return compiler.finish(doc.info, graph);
}

class PipelineCompiler {
  private readonly columns = new Map<string, { ref: ColumnRef; type: DataType }>();
  private readonly inputs: Field[] = [];
  private readonly domains: (readonly Value[] | undefined)[] = [];
  private readonly produced: Field[] = [];
  private readonly steps: Step[] = [];

  node(node: NodeSpec, depth: number): GraphStage {
    if (node.op === 'pipeline') return this.pipeline(node, depth);
    const def = opDefinition(node.op);
    if (!def) throw bundleError(`unsupported op "${node.op}" (stage ${node.name} at ${node.path})`);
    const stage = def.compile(node);
    if (stage.inputs.length !== node.inputs.length || stage.outputs.length !== node.outputs.length) {
      throw new Error(`op ${node.op} compiled a stage whose sockets do not match its node (${node.path})`);
    }
    const reads: ColumnRef[] = [];
    const casts: (Cast | null)[] = [];
    const inputFields: Field[] = [];
    node.inputs.forEach((socket, i) => {
      const expected = stage.inputs[i]!;
      const column = this.columns.get(socket.name) ?? this.addInput(socket.name, expected);
      const cast = caster(column.type, expected);
      if (cast === undefined) {
        throw bundleError(
          `${node.path}: column "${socket.name}" is ${typeLabel(column.type)}, op ${node.op} needs ${typeLabel(expected)}`,
        );
      }
      reads.push(column.ref);
      const domain = stage.domains?.[i];
      if (domain && !column.ref.produced && cast === null) this.domains[column.ref.index] ??= domain;
      casts.push(cast);
      inputFields.push({ name: socket.name, type: column.type });
    });
    const outputFields = node.outputs.map((socket, i) => ({ name: socket.name, type: stage.outputs[i]! }));
    const writes = outputFields.map((field) => this.addProduced(field, node));
    this.steps.push({ stage, reads, casts, writes });
    return { className: def.className, name: node.name, op: node.op, inputs: inputFields, outputs: outputFields };
  }

  finish(info: BundleInfo, graph: GraphStage): CompiledModel {
    const inputCount = this.inputs.length;
    const slotOf = (ref: ColumnRef) => (ref.produced ? inputCount + ref.index : ref.index);
    const steps = this.steps.map((s) => ({ ...s, reads: s.reads.map(slotOf), writes: s.writes.map(slotOf) }));
    return {
      info,
      inputSchema: this.inputs,
      outputSchema: [...this.inputs, ...this.produced],
      inputDomains: this.inputs.map((_, i) => this.domains[i]),
      graph,
      runRow(slots: Value[]): void {
        for (const step of steps) {
          const args = new Array<Value>(step.reads.length);
          for (let i = 0; i < args.length; i++) {
            const v = slots[step.reads[i]!]!;
            const cast = step.casts[i];
            args[i] = cast ? cast(v) : v;
          }
          const out = step.stage.run(args);
          for (let i = 0; i < step.writes.length; i++) slots[step.writes[i]!] = out[i]!;
        }
      },
    };
  }

  private pipeline(node: NodeSpec, depth: number): GraphStage {
    if (depth > MAX_PIPELINE_DEPTH) throw bundleError(`${node.path}: pipelines nested deeper than ${MAX_PIPELINE_DEPTH}`);
    const names = node.attrs.strings('nodes', []);
    const children = names.map((name) => this.node(node.node(name), depth + 1));
    const ownOutputs = new Set(children.flatMap((c) => c.outputs.map((f) => f.name)));
    const inputs = uniqueFields(children.flatMap((c) => c.inputs).filter((f) => !ownOutputs.has(f.name)));
    const outputs = children.flatMap((c) => c.outputs);
    return { className: 'Pipeline', name: node.name, op: 'pipeline', inputs, outputs, children };
  }

  private addInput(name: string, type: DataType) {
    const column = { ref: { produced: false, index: this.inputs.length }, type };
    this.inputs.push({ name, type });
    this.columns.set(name, column);
    return column;
  }

  private addProduced(field: Field, node: NodeSpec): ColumnRef {
    if (this.columns.has(field.name)) {
      throw bundleError(`${node.path}: column "${field.name}" is produced twice`);
    }
    const ref = { produced: true, index: this.produced.length };
    this.produced.push(field);
    this.columns.set(field.name, { ref, type: field.type });
    return ref;
  }
}

function uniqueFields(fields: Field[]): Field[] {
  const seen = new Set<string>();
  return fields.filter((f) => !seen.has(f.name) && seen.add(f.name));
}
