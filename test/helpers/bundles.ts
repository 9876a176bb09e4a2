// Builds MLeap json bundles in memory (as BundleDoc) or on disk, for tests with known numbers.

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { BundleDoc } from '../../engine/models/bundle/spec.js';

/** MLeap's attribute encoding. */
export const attr = {
  double: (v: number | null) => ({ double: v }),
  long: (v: number) => ({ long: v }),
  int: (v: number) => ({ int: v }),
  string: (v: string) => ({ string: v }),
  boolean: (v: boolean) => ({ boolean: v }),
  strings: (v: string[]) => ({ type: 'list', string: v }),
  doubles: (v: (number | null)[]) => ({ type: 'list', double: v }),
  longs: (v: number[]) => ({ type: 'list', long: v }),
  /** A tensor; a matrix is given as rows and stored column-major like Spark. */
  tensor: (values: number[], dims: number[] = [values.length]) => ({
    type: 'tensor',
    double: values,
    shape: { dimensions: dims.map((size) => ({ size, name: '' })) },
  }),
  matrix: (rows: number[][]) => {
    const r = rows.length;
    const c = rows[0]?.length ?? 0;
    const columnMajor: number[] = [];
    for (let j = 0; j < c; j++) for (let i = 0; i < r; i++) columnMajor.push(rows[i]![j]!);
    return attr.tensor(columnMajor, [r, c]);
  },
  tensors: (list: number[][]) => ({
    type: 'list',
    tensor: list.map((values) => ({ double: values, shape: { dimensions: [{ size: values.length, name: '' }] } })),
  }),
  scalarShape: (nullable = true) => ({ base: 'scalar', isNullable: nullable }),
  tensorShape: (size: number, nullable = true) => ({
    base: 'tensor',
    isNullable: nullable,
    tensorShape: { dimensions: [{ size, name: '' }] },
  }),
  dataShapes: (shapes: unknown[]) => ({ type: 'list', data_shape: shapes }),
  dataShape: (shape: unknown) => ({ data_shape: shape }),
};

export interface ChildModel {
  op: string;
  attributes: Record<string, unknown>;
  /** Other files of the folder, e.g. `tree.json`. */
  files?: Record<string, string>;
}

export interface Stage extends ChildModel {
  name: string;
  /** [port, column] pairs. */
  inputs: [string, string][];
  outputs: [string, string][];
  /** Nested model folders (trees of an ensemble) by folder name. */
  children?: Record<string, ChildModel>;
  /** Stages of a nested pipeline (op must be `pipeline`). */
  stages?: Stage[];
}

/** A bundle whose root is a pipeline of `stages`. */
export function pipelineBundle(stages: Stage[], name = 'test_pipeline'): BundleDoc {
  const files: Record<string, string> = {};
  writeStage(files, 'root', { name, op: 'pipeline', attributes: {}, inputs: [], outputs: [], stages });
  return {
    info: { uid: '00000000-0000-4000-8000-000000000000', name, format: 'json', version: '0.20.0', timestamp: '2026-11-21T00:00:00.000' },
    files,
  };
}

/** A bundle whose root is a single stage (no pipeline), as some MLeap bundles are. */
export function stageBundle(stage: Stage): BundleDoc {
  const files: Record<string, string> = {};
  writeStage(files, 'root', stage);
  return { info: { uid: '00000000-0000-4000-8000-000000000001', name: stage.name, format: 'json', version: '0.20.0', timestamp: '2026-11-21T00:00:00.000' }, files };
}

/** Tree file text (newline-delimited JSON, pre-order). */
export function treeFile(nodes: unknown[]): string {
  return nodes.map((n) => JSON.stringify(n)).join('\n') + '\n';
}

/** Writes a bundle as a directory (bundle.json, root/...). Returns `dir`. */
export function writeBundleDir(doc: BundleDoc, dir: string): string {
  writeFileSync(ensureDir(join(dir, 'bundle.json')), JSON.stringify(doc.info));
  for (const [path, text] of Object.entries(doc.files)) writeFileSync(ensureDir(join(dir, path)), text);
  return dir;
}

function ensureDir(file: string): string {
  mkdirSync(dirname(file), { recursive: true });
  return file;
}

function writeStage(files: Record<string, string>, path: string, stage: Stage): void {
  const attributes = stage.stages
    ? { ...stage.attributes, nodes: attr.strings(stage.stages.map((s) => s.name)) }
    : stage.attributes;
  files[`${path}/model.json`] = JSON.stringify({ op: stage.op, attributes });
  files[`${path}/node.json`] = JSON.stringify({
    name: stage.name,
    shape: {
      inputs: stage.inputs.map(([port, name]) => ({ port, name })),
      outputs: stage.outputs.map(([port, name]) => ({ port, name })),
    },
  });
  for (const [file, text] of Object.entries(stage.files ?? {})) files[`${path}/${file}`] = text;
  for (const [folder, child] of Object.entries(stage.children ?? {})) {
    files[`${path}/${folder}/model.json`] = JSON.stringify({ op: child.op, attributes: child.attributes });
    for (const [file, text] of Object.entries(child.files ?? {})) files[`${path}/${folder}/${file}`] = text;
  }
  for (const child of stage.stages ?? []) writeStage(files, `${path}/${child.name}.node`, child);
}

/** The tests' scoring pipeline: price = 2·x + 3·y + 10·index(color) + 1 (red 0, green 1, blue 2). */
export function scoringPipeline(): BundleDoc {
  return pipelineBundle([
    {
      name: 'color_indexer', op: 'string_indexer',
      attributes: { labels: attr.strings(['red', 'green', 'blue']), handle_invalid: attr.string('error') },
      inputs: [['input', 'color']], outputs: [['output', 'color_index']],
    },
    {
      name: 'assembler', op: 'vector_assembler',
      attributes: { input_shapes: attr.dataShapes([attr.scalarShape(), attr.scalarShape(), attr.scalarShape()]) },
      inputs: [['input0', 'x'], ['input1', 'y'], ['input2', 'color_index']], outputs: [['output', 'features']],
    },
    {
      name: 'lr', op: 'linear_regression',
      attributes: { coefficients: attr.tensor([2, 3, 10]), intercept: attr.double(1) },
      inputs: [['features', 'features']], outputs: [['prediction', 'price']],
    },
  ]);
}
