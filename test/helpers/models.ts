// Shared pieces of the model runtime tests: fixture paths, the parity zip of zips, and running
// one row through a compiled bundle.

import { createWriteStream, existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import yauzl from 'yauzl';
import type { BundleDoc } from '../../engine/models/bundle/spec.js';
import { compileBundle } from '../../engine/models/compile.js';
import type { CompiledModel } from '../../engine/models/compile.js';
import type { Value } from '../../engine/models/types.js';
import { pipelineBundle, type Stage } from './bundles.js';

/** `../shared/fixtures/mleap/` seen from the project root. */
export const FIXTURES = fileURLToPath(new URL('../../../shared/fixtures/mleap/', import.meta.url));
export const HAVE_FIXTURES = existsSync(FIXTURES);
export const PARITY_ZIP = join(FIXTURES, 'combust-mleap-docs/assets/bundles/spark-parity.zip');
export const BUNDLE_LIMITS = { maxBytes: 50 << 20, maxFiles: 10_000, maxZipEntries: 20_000, maxDirectoryEntries: 20_000 };

/** Writes each inner zip of a zip of zips into `dir`; returns their paths, sorted. */
export async function extractInnerZips(zipPath: string, dir: string): Promise<string[]> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(zipPath, { lazyEntries: true }, (err, z) => (err || !z ? reject(err) : resolve(z))),
  );
  const written: string[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('error', reject);
    zip.on('end', resolve);
    zip.on('entry', (entry: yauzl.Entry) => {
      if (!entry.fileName.endsWith('.zip')) return zip.readEntry();
      const target = join(dir, basename(entry.fileName));
      zip.openReadStream(entry, (err, stream) => {
        if (err || !stream) return reject(err);
        pipeline(stream, createWriteStream(target)).then(() => {
          written.push(target);
          zip.readEntry();
        }, reject);
      });
    });
    zip.readEntry();
  });
  return written.sort();
}

/** Ops of a bundle's stages (folders with node.json; not ensemble trees), pipelines left out. */
export function stageOps(doc: BundleDoc): string[] {
  return Object.entries(doc.files)
    .filter(([path]) => path.endsWith('/model.json') && doc.files[path.replace(/model\.json$/, 'node.json')] !== undefined)
    .map(([, text]) => (JSON.parse(text) as { op: string }).op)
    .filter((op) => op !== 'pipeline');
}

/** Runs one row of input values (in `inputSchema` order); returns the produced values. */
export function runModel(model: CompiledModel, inputs: Value[]): Value[] {
  const row = new Array<Value>(model.outputSchema.length);
  inputs.forEach((v, i) => (row[i] = v));
  model.runRow(row);
  return row.slice(model.inputSchema.length);
}

/** Compiles `doc` and runs one row given by column name; returns the produced columns by name. */
export function runRow(doc: BundleDoc, row: Record<string, Value>): Record<string, Value> {
  const model = compileBundle(doc);
  const produced = runModel(model, model.inputSchema.map((f) => {
    if (!(f.name in row)) throw new Error(`test row lacks column ${f.name}`);
    return row[f.name]!;
  }));
  const names = model.outputSchema.slice(model.inputSchema.length).map((f) => f.name);
  return Object.fromEntries(names.map((n, i) => [n, produced[i]!]));
}

/** Runs one single-column stage (`input` → `output`) on `x`; returns the output value. */
export function applyStage(op: string, attributes: Record<string, unknown>, x: Value): Value {
  const stage: Stage = { name: `${op}_stage`, op, attributes, inputs: [['input', 'x']], outputs: [['output', 'y']] };
  return runRow(pipelineBundle([stage]), { x }).y!;
}
