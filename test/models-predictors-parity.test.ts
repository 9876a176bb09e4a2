// Loads MLeap's Spark parity bundles that hold predictor ops and compiles those whose ops
// are all registered by now.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBundle } from '../engine/models/bundle/read.js';
import type { BundleDoc } from '../engine/models/bundle/spec.js';
import { compileBundle } from '../engine/models/compile.js';
import { opDefinition } from '../engine/models/stages/index.js';
import { dense } from '../engine/models/types.js';
import { BUNDLE_LIMITS, PARITY_ZIP, extractInnerZips, runModel, stageOps } from './helpers/models.js';

const parityZip = PARITY_ZIP;
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

describe.skipIf(!haveFixtures)('Spark parity bundles with predictors', () => {
  let dir = '';
  const docs = new Map<string, BundleDoc>();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'predictor-parity-'));
    await extractInnerZips(parityZip, dir);
    for (const spec of PREDICTOR_SPECS) {
      const prefix = spec.includes('Support') || spec.includes('MultinomialLabeler') ? 'org.apache.spark.ml.mleap.parity.' : 'org.apache.spark.ml.parity.';
      docs.set(spec, await readBundle(join(dir, `${prefix}${spec}.zip`), BUNDLE_LIMITS));
    }
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(PREDICTOR_SPECS)('%s compiles and runs a row', (spec) => {
    const doc = docs.get(spec)!;
    expect(stageOps(doc).filter((op) => !opDefinition(op))).toEqual([]);
    const model = compileBundle(doc);
    expect(model.outputSchema.length).toBeGreaterThan(model.inputSchema.length);
    // One row: a known value where the model accepts only a known set, 0.25 otherwise.
    const row = model.inputSchema.map((field, i) => model.inputDomains[i]?.[0] ?? (field.type.base === 'string' ? '0.25' : 0.25));
    const produced = runModel(model, row);
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
    const [raw, probability, prediction] = runModel(model, [dense([1, 20])]);
    expect(raw).toEqual(dense([20]));
    expect(probability).toEqual(dense([1]));
    expect(prediction).toBe(0);
  });
});
