// Real MLeap bundles with feature ops: every bundle of spark-parity.zip (a zip of one bundle per
// op) whose ops are all registered compiles; a few rows are checked against values computed by
// hand from the bundle's attributes; demo.zip and airbnb give MLeap's published predictions
// once the predictors they end with are registered.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBundle } from '../engine/models/bundle/read.js';
import type { BundleDoc } from '../engine/models/bundle/spec.js';
import { compileBundle } from '../engine/models/compile.js';
import { opDefinition } from '../engine/models/stages/index.js';
import { dense, sparse } from '../engine/models/types.js';
import { BUNDLE_LIMITS, FIXTURES, HAVE_FIXTURES, PARITY_ZIP, extractInnerZips, runRow, stageOps } from './helpers/models.js';

const fixtures = FIXTURES;
const haveFixtures = HAVE_FIXTURES;
const LIMITS = BUNDLE_LIMITS;
if (!haveFixtures) console.warn(`skipping the real-bundle feature tests: ${fixtures} is absent`);

describe.skipIf(!haveFixtures)('spark-parity bundles with feature ops', () => {
  let dir = '';
  const bundles = new Map<string, BundleDoc>();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mleap-parity-'));
    const paths = await extractInnerZips(PARITY_ZIP, dir);
    for (const path of paths) bundles.set(basename(path, '.zip'), await readBundle(path, LIMITS));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The bundle of a parity spec, by the end of its name, e.g. `feature.StringIndexerParitySpec`. */
  const bundle = (suffix: string): BundleDoc => {
    const matches = [...bundles.keys()].filter((k) => k.endsWith(suffix));
    if (matches.length !== 1) throw new Error(`${matches.length} parity bundles end with ${suffix}`);
    return bundles.get(matches[0]!)!;
  };

  it('compiles every bundle whose ops are all registered; exactly three feature bundles use ops not supported', () => {
    expect(bundles.size).toBe(52);
    const unsupportedFeatureBundles: string[] = [];
    for (const [name, doc] of bundles) {
      if (!stageOps(doc).every((op) => opDefinition(op))) {
        if (name.includes('.feature.')) unsupportedFeatureBundles.push(name.replace(/^.*\.feature\./, ''));
        continue;
      }
      expect(() => compileBundle(doc), name).not.toThrow();
    }
    expect(unsupportedFeatureBundles.sort()).toEqual(['BucketedRandomProjectionLSHParitySpec', 'MinHashLSHParitySpec', 'WordToVectorParitySpec']);
  });

  it('string_indexer and old one_hot_encoder (51 states, size 50: the last state is all zeros)', () => {
    expect(runRow(bundle('parity.feature.StringIndexerParitySpec'), { state: 'NY' })).toEqual({ state_index: 3 });
    const oneHot = bundle('spark.ml.parity.feature.OneHotEncoderParitySpec');
    expect(runRow(oneHot, { state: 'NY' }).state_oh).toEqual(sparse(50, [3], [1]));
    expect(runRow(oneHot, { state: 'ND' }).state_oh).toEqual(sparse(50, [], []));
    expect(() => runRow(oneHot, { state: 'XX' })).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'model_transform_failed' }));
  });

  it('min_max_scaler, bucketizer, imputer, reverse_string_indexer, ngram, stopwords_remover', () => {
    // min [-0.01, 500], max [32256, 1200000]
    expect(runRow(bundle('MinMaxScalerParitySpec'), { dti: -0.01, loan_amount: 1200000 }).scaled_features).toEqual(dense([0, 1]));
    // splits [-∞, 1000, 10000, +∞]
    expect(runRow(bundle('BucketizerParitySpec'), { loan_amount: 5000 })).toEqual({ loan_amount_bucket: 1 });
    expect(runRow(bundle('BucketizerParitySpec'), { loan_amount: 10000 })).toEqual({ loan_amount_bucket: 2 });
    // missing 23.4 → surrogate 21.722356950479124
    expect(runRow(bundle('ImputerParitySpec'), { mv: 23.4 })).toEqual({ mv_imputed: 21.722356950479124 });
    expect(runRow(bundle('ReverseStringIndexerParitySpec'), { state: 'TX' })).toEqual({ state_index: 1, state_reverse: 'TX' });
    expect(runRow(bundle('NGramsParitySpec'), { loan_title: 'Debt consolidation loan' }).loan_title_ngram).toEqual(['debt consolidation', 'consolidation loan']);
    expect(runRow(bundle('StopWordsRemoverParitySpec'), { loan_title: 'Car Loan' }).loan_title_stop).toEqual(['car']);
  });

  it('vector_slicer, chi_sq_selector, polynomial_expansion, math_binary', () => {
    const row = { dti: 0.5, loan_amount: 1000 };
    // indices [1] then named_indices [0]
    expect(runRow(bundle('VectorSlicerParitySpec'), row).scaled_features).toEqual(dense([1000, 0.5]));
    // filter_indices [1]
    expect(runRow(bundle('ChiSqSelectorParitySpec'), row).filter_features).toEqual(dense([1000]));
    // degree 2: x, x², y, xy, y²
    expect(runRow(bundle('PolynomialExpansionParitySpec'), row).poly).toEqual(dense([0.5, 0.25, 1000, 500, 1000000]));
    // mul of the fico index ("700 - 800" is label 2) and dti
    expect(runRow(bundle('MathBinaryParitySpec'), { fico_score_group_fnl: '700 - 800', dti: 0.5 }).bin_out).toBe(1);
  });
});

describe.skipIf(!haveFixtures)('published predictions through the feature ops', () => {
  it('demo.zip: vector_assembler + standard_scaler (mean and std) + linear_regression → -67.78953193834998', async () => {
    const doc = await readBundle(`${fixtures}combust-mleap/mleap-spring-boot/src/test/resources/demo.zip`, LIMITS);
    const out = runRow(doc, { 'demo:a': 44.5, 'demo:c': 22.1, 'demo:d': 98.2 });
    expect(out['demo:prediction']).toBeCloseTo(-67.78953193834998, 10);
  });

  it('airbnb.model.lr.zip → 232.62463916840318', async () => {
    const doc = await readBundle(`${fixtures}combust-mleap/mleap-benchmark/src/main/resources/models/airbnb.model.lr.zip`, LIMITS);
    const out = runRow(doc, {
      state: 'NY', bathrooms: 2, square_feet: 1250, bedrooms: 3, security_deposit: 50, cleaning_fee: 30,
      extra_people: 2, number_of_reviews: 56, review_scores_rating: 90,
      room_type: 'Entire home/apt', host_is_superhost: '1.0', cancellation_policy: 'strict', instant_bookable: '1.0',
    });
    expect(out.price_prediction).toBeCloseTo(232.62463916840318, 9);
  });

  it('one_hot_encoder_pipeline.zip: string_indexer keep + old one_hot_encoder (size 3 after keep and drop_last)', async () => {
    const doc = await readBundle(`${fixtures}combust-mleap/mleap-runtime/src/test/resources/one_hot_encoder_pipeline.zip`, LIMITS);
    const indexer = Object.keys(doc.files).find((p) => p.includes('string_indexer') && p.endsWith('node.json'))!;
    const encoder = Object.keys(doc.files).find((p) => p.includes('one_hot_encoder') && p.endsWith('node.json'))!;
    const input = (JSON.parse(doc.files[indexer]!) as { shape: { inputs: { name: string }[] } }).shape.inputs[0]!.name;
    const output = (JSON.parse(doc.files[encoder]!) as { shape: { outputs: { name: string }[] } }).shape.outputs[0]!.name;
    expect(runRow(doc, { [input]: 'B' })[output]).toEqual(sparse(3, [1], [1]));
    expect(runRow(doc, { [input]: 'Z' })[output]).toEqual(sparse(3, [], []));
  });
});
