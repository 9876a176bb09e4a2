// Loads MLeap's Spark parity bundles that hold predictor ops and compiles those whose ops
// are all registered by now.
import { createWriteStream, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import yauzl from 'yauzl';
import { readBundle } from '../engine/models/bundle/read.js';
import type { BundleDoc } from '../engine/models/bundle/spec.js';
import { compileBundle } from '../engine/models/compile.js';
import { opDefinition } from '../engine/models/ops/index.js';
import { dense } from '../engine/models/types.js';

const parityZip = fileURLToPath(new URL('../../shared/fixtures/mleap/combust-mleap-docs/assets/bundles/spark-parity.zip', import.meta.url));
const haveFixtures = existsSync(parityZip);
if (!haveFixtures) console.warn(`skipping the predictor parity bundles: ${parityZip} is absent`);

const PREDICTOR_SPECS = [
  'regression.LinearRegressionParitySpec',
  'classification.LogisticRegressionParitySpec',
  'regression.GeneralizedLinearRegressionParitySpec',
  'regression.IsotonicRegressionParitySpec',
  'regression.DecisionTreeRegressionParitySpec',
  'classification.DecisionTreeClassifierParitySpec',
  'regression.RandomForestRegressionParitySpec',
  'classification.RandomForestClassifierParitySpec',
  'regression.GBTRegressionParitySpec',
  'classification.GBTClassifierParitySpec',
  'classification.NaiveBayesClassifierParitySpec',
  'clustering.KMeansParitySpec',
  'classification.SupportVectorMachineParitySpec',
  'classification.OneVsRestParitySpec',
  'classification.MultiLayerPerceptronClassifierParitySpec',
  'regression.AFTSurvivalRegressionParitySpec',
  'clustering.BisectingKMeansParitySpec',
  'feature.MultinomialLabelerParitySpec',
];

/** Extracts the outer zip's inner zips (one bundle each) into `dir`. */
function extractZip(zip: string, dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    yauzl.open(zip, { lazyEntries: true }, (error, file) => {
      if (error || !file) return reject(error);
      file.on('end', resolve);
      file.on('error', reject);
      file.on('entry', (entry: yauzl.Entry) => {
        if (!entry.fileName.endsWith('.zip')) return file.readEntry();
        file.openReadStream(entry, (streamError, stream) => {
          if (streamError || !stream) return reject(streamError);
          const target = join(dir, entry.fileName.split('/').pop()!);
          pipeline(stream, createWriteStream(target)).then(() => file.readEntry(), reject);
        });
      });
      file.readEntry();
    });
  });
}

function opsOf(doc: BundleDoc): string[] {
  return Object.entries(doc.files)
    .filter(([path]) => path.endsWith('/model.json') && existsNodeJson(doc, path))
    .map(([, text]) => (JSON.parse(text) as { op: string }).op);
}

function existsNodeJson(doc: BundleDoc, modelPath: string): boolean {
  return doc.files[modelPath.replace(/model\.json$/, 'node.json')] !== undefined;
}

describe.skipIf(!haveFixtures)('Spark parity bundles with predictors', () => {
  let dir = '';
  const docs = new Map<string, BundleDoc>();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'predictor-parity-'));
    await extractZip(parityZip, dir);
    for (const spec of PREDICTOR_SPECS) {
      const prefix = spec.includes('Support') || spec.includes('MultinomialLabeler') ? 'org.apache.spark.ml.mleap.parity.' : 'org.apache.spark.ml.parity.';
      docs.set(spec, await readBundle(join(dir, `${prefix}${spec}.zip`), { maxBytes: 50 << 20, maxFiles: 10_000 }));
    }
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(PREDICTOR_SPECS)('%s compiles when all its ops are registered', (spec) => {
    const doc = docs.get(spec)!;
    const missing = opsOf(doc).filter((op) => op !== 'pipeline' && !opDefinition(op));
    if (missing.length > 0) {
      console.warn(`${spec}: not compiled yet, ops missing: ${[...new Set(missing)].join(', ')}`);
      return;
    }
    const model = compileBundle(doc);
    expect(model.outputSchema.length).toBeGreaterThan(model.inputSchema.length);
    // One row: a known value where the model accepts only a known set, 0.25 otherwise.
    const row = model.inputSchema.map((field, i) => model.inputDomains[i]?.[0] ?? (field.type.base === 'string' ? '0.25' : 0.25));
    const produced = model.run(row);
    const last = produced[produced.length - 1]!;
    const numbers = typeof last === 'number' ? [last] : Array.isArray(last) ? last : (last as { values: number[] }).values;
    expect(numbers.every((v) => typeof v === 'string' || Number.isFinite(v))).toBe(true);
  });

  it('random forest classifier with num_classes 1 predicts class 0 with probability 1', () => {
    const doc = docs.get('classification.RandomForestClassifierParitySpec')!;
    const prefix = 'root/rfc_57d89c4dccbf.node/';
    const files = Object.fromEntries(
      Object.entries(doc.files).filter(([p]) => p.startsWith(prefix)).map(([p, text]) => [`root/${p.slice(prefix.length)}`, text]),
    );
    const model = compileBundle({ info: doc.info, files });
    const [raw, probability, prediction] = model.run([dense([1, 20])]);
    expect(raw).toEqual(dense([20]));
    expect(probability).toEqual(dense([1]));
    expect(prediction).toBe(0);
  });
});
