// Feature transformers: string_indexer, one_hot_encoder, vector_assembler, standard_scaler,
// checked against hand-computed values, and the airbnb feature pipeline against MLeap's
// published prediction.

import { describe, expect, it } from 'vitest';
import { readBundle } from '../engine/models/bundle/read.js';
import { compileBundle } from '../engine/models/compile.js';
import { SkippedRow } from '../engine/models/errors.js';
import { dense, sparse, toDense, type Tensor, type Value } from '../engine/models/types.js';
import { attr, pipelineBundle, type Stage } from './helpers/bundles.js';
import { BUNDLE_LIMITS, FIXTURES, HAVE_FIXTURES, runRow } from './helpers/models.js';

const run = (stages: Stage[], row: Record<string, Value>) => runRow(pipelineBundle(stages), row);
const transformFailure = expect.objectContaining({ kind: 'invalid', code: 'model_transform_failed' });
const bundleFailure = expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' });

function stage(op: string, attributes: Record<string, unknown>, inputs: [string, string][], outputs: [string, string][] = [['output', 'out']]): Stage {
  return { name: `${op}_stage`, op, attributes, inputs, outputs };
}

describe('string_indexer', () => {
  const indexer = (mode?: string) =>
    stage('string_indexer', { labels: attr.strings(['a', 'b', 'c']), ...(mode ? { handle_invalid: attr.string(mode) } : {}) }, [['input', 'label']]);

  it('indexes labels as doubles', () => {
    expect(run([indexer()], { label: 'a' })).toEqual({ out: 0 });
    expect(run([indexer('error')], { label: 'c' })).toEqual({ out: 2 });
  });

  it('fails on an unseen label by default and with error, skips the row with skip', () => {
    expect(() => run([indexer()], { label: 'z' })).toThrowError(transformFailure);
    expect(() => run([indexer('error')], { label: 'z' })).toThrowError(transformFailure);
    expect(() => run([indexer('skip')], { label: 'z' })).toThrowError(SkippedRow);
  });

  it('indexes an unseen label as len(labels) with keep', () => {
    expect(run([indexer('keep')], { label: 'z' })).toEqual({ out: 3 });
    expect(run([indexer('keep')], { label: '' })).toEqual({ out: 3 });
  });

  it('declares a string input and a double output', () => {
    const model = compileBundle(pipelineBundle([indexer()]));
    expect(model.inputSchema[0]!.type).toMatchObject({ shape: 'scalar', base: 'string', nullable: true });
    expect(model.outputSchema[1]!.type).toEqual({ shape: 'scalar', base: 'double', nullable: false });
  });

  it('reads the multi-column form (labels_length + labels_array_i)', () => {
    const multi = stage(
      'string_indexer',
      { labels_length: attr.int(2), labels_array_0: attr.strings(['x', 'y']), labels_array_1: attr.strings(['p']), handle_invalid: attr.string('keep') },
      [['input1', 'c1'], ['input0', 'c0']],
      [['output0', 'i0'], ['output1', 'i1']],
    );
    expect(run([multi], { c0: 'y', c1: 'p' })).toEqual({ i0: 1, i1: 0 });
    expect(run([multi], { c0: 'q', c1: 'q' })).toEqual({ i0: 2, i1: 1 });
  });

  it('refuses label lists that do not match the columns', () => {
    const bad = stage('string_indexer', { labels_length: attr.int(2), labels_array_0: attr.strings(['x']), labels_array_1: attr.strings(['p']) }, [['input', 'c']]);
    expect(() => compileBundle(pipelineBundle([bad]))).toThrowError(bundleFailure);
  });
});

describe('one_hot_encoder', () => {
  const oldForm = (size: number, dropLast: boolean, extra: Record<string, unknown> = {}) =>
    stage('one_hot_encoder', { size: attr.long(size), drop_last: attr.boolean(dropLast), ...extra }, [['input', 'i']]);

  it('old form: size is the output length and the last category is all zeros (airbnb state: NY → slot 1 of 9)', () => {
    expect(run([oldForm(9, true)], { i: 1 })).toEqual({ out: sparse(9, [1], [1]) });
    expect(run([oldForm(9, true)], { i: 0 })).toEqual({ out: sparse(9, [0], [1]) });
    expect(run([oldForm(9, true)], { i: 9 })).toEqual({ out: sparse(9, [], []) });
    const model = compileBundle(pipelineBundle([oldForm(9, true)]));
    expect(model.outputSchema[1]!.type).toEqual({ shape: 'tensor', base: 'double', nullable: false, dims: [9] });
  });

  it('old form without drop_last keeps size slots and fails past them', () => {
    expect(run([oldForm(3, false)], { i: 2 })).toEqual({ out: sparse(3, [2], [1]) });
    expect(() => run([oldForm(3, false)], { i: 3 })).toThrowError(transformFailure);
  });

  it('old form honours an explicit handle_invalid', () => {
    expect(() => run([oldForm(3, true, { handle_invalid: attr.string('error') })], { i: 2 })).not.toThrow();
    expect(run([oldForm(3, true, { handle_invalid: attr.string('error') })], { i: 2 })).toEqual({ out: sparse(2, [], []) });
  });

  it('fails on a non-integer index whatever handle_invalid says', () => {
    expect(() => run([oldForm(9, true)], { i: 1.5 })).toThrowError(transformFailure);
    expect(() => run([oldForm(9, true)], { i: NaN })).toThrowError(transformFailure);
  });

  const newForm = (sizes: number[], mode: string, dropLast: boolean) =>
    stage(
      'one_hot_encoder',
      { category_sizes: attr.longs(sizes), handle_invalid: attr.string(mode), drop_last: attr.boolean(dropLast) },
      sizes.map((_, k) => [`input${k}`, `i${k}`] as [string, string]),
      sizes.map((_, k) => [`output${k}`, `o${k}`] as [string, string]),
    );

  it('new form, several columns, no drop_last, error', () => {
    expect(run([newForm([3, 2], 'error', false)], { i0: 2, i1: 1 })).toEqual({ o0: sparse(3, [2], [1]), o1: sparse(2, [1], [1]) });
    expect(() => run([newForm([3, 2], 'error', false)], { i0: 2, i1: 2 })).toThrowError(transformFailure);
    expect(() => run([newForm([3, 2], 'error', false)], { i0: -1, i1: 0 })).toThrowError(transformFailure);
  });

  it('new form: drop_last removes the last slot, keep adds an invalid slot, both keep the size', () => {
    expect(run([newForm([3], 'error', true)], { i0: 2 })).toEqual({ o0: sparse(2, [], []) });
    expect(run([newForm([3], 'keep', false)], { i0: 5 })).toEqual({ o0: sparse(4, [3], [1]) });
    expect(run([newForm([3], 'keep', false)], { i0: -1 })).toEqual({ o0: sparse(4, [3], [1]) });
    expect(run([newForm([3], 'keep', true)], { i0: 7 })).toEqual({ o0: sparse(3, [], []) });
    expect(run([newForm([3], 'keep', true)], { i0: 2 })).toEqual({ o0: sparse(3, [2], [1]) });
    expect(() => run([newForm([3], 'skip', true)], { i0: 3 })).toThrowError(SkippedRow);
  });

  it('new form on the single input/output ports', () => {
    const single = stage('one_hot_encoder', { category_sizes: attr.longs([2]), handle_invalid: attr.string('error'), drop_last: attr.boolean(false) }, [['input', 'i']]);
    expect(run([single], { i: 1 })).toEqual({ out: sparse(2, [1], [1]) });
  });
});

describe('vector_assembler', () => {
  const shapes = attr.dataShapes([attr.scalarShape(), attr.tensorShape(2), attr.scalarShape(), attr.tensorShape(3)]);
  const assembler = stage('vector_assembler', { input_shapes: shapes }, [['input0', 'a'], ['input1', 'b'], ['input2', 'c'], ['input3', 'd']]);

  it('concatenates scalars, dense and sparse vectors; few non-zeros give a sparse vector', () => {
    const out = run([assembler], { a: 1.5, b: dense([0, 2]), c: 0, d: sparse(3, [1], [5]) });
    // 7 slots, 3 non-zeros: 1.5 * (3 + 1) = 6 < 7 → sparse (Spark's compressed)
    expect(out).toEqual({ out: sparse(7, [0, 2, 5], [1.5, 2, 5]) });
  });

  it('gives a dense vector when it is the smaller form', () => {
    const out = run([assembler], { a: 1, b: dense([2, 3]), c: 4, d: dense([5, 0, 6]) });
    expect(out).toEqual({ out: dense([1, 2, 3, 4, 5, 0, 6]) });
  });

  it('declares its output size and orders inputs by port number', () => {
    const swapped = stage('vector_assembler', { input_shapes: attr.dataShapes([attr.scalarShape(), attr.scalarShape()]) }, [['input1', 'y'], ['input0', 'x']]);
    expect(run([swapped], { x: 1, y: 2 })).toEqual({ out: dense([1, 2]) });
    const model = compileBundle(pipelineBundle([assembler]));
    expect(model.outputSchema.at(-1)!.type).toEqual({ shape: 'tensor', base: 'double', nullable: false, dims: [7] });
  });

  it('casts integer scalars to double', () => {
    const indexer = stage('string_indexer', { labels: attr.strings(['a', 'b']) }, [['input', 's']], [['output', 'idx']]);
    const two = stage('vector_assembler', { input_shapes: attr.dataShapes([attr.scalarShape(), attr.scalarShape()]) }, [['input0', 'idx'], ['input1', 'n']]);
    expect(run([indexer, two], { s: 'b', n: 3 })).toMatchObject({ out: dense([1, 3]) });
  });

  it('refuses input_shapes that do not match the inputs', () => {
    const bad = stage('vector_assembler', { input_shapes: attr.dataShapes([attr.scalarShape()]) }, [['input0', 'x'], ['input1', 'y']]);
    expect(() => compileBundle(pipelineBundle([bad]))).toThrowError(bundleFailure);
  });
});

describe('standard_scaler', () => {
  const scaler = (attributes: Record<string, unknown>) => stage('standard_scaler', attributes, [['input', 'v']]);

  it('std only: x / std, 0 where std is 0, sparse stays sparse', () => {
    expect(run([scaler({ std: attr.tensor([4, 0]) })], { v: dense([2, 4]) })).toEqual({ out: dense([0.5, 0]) });
    expect(run([scaler({ std: attr.tensor([1, 2, 4]) })], { v: sparse(3, [2], [8]) })).toEqual({ out: sparse(3, [2], [2]) });
  });

  it('mean only: x - mean (sparse input made dense)', () => {
    expect(run([scaler({ mean: attr.tensor([1, 1]) })], { v: dense([2, 4]) })).toEqual({ out: dense([1, 3]) });
    expect(run([scaler({ mean: attr.tensor([1, 1]) })], { v: sparse(2, [1], [4]) })).toEqual({ out: dense([-1, 3]) });
  });

  it('mean and std: (x - mean) / std, 0 where std is 0', () => {
    expect(run([scaler({ mean: attr.tensor([1, 1]), std: attr.tensor([4, 0]) })], { v: dense([2, 4]) })).toEqual({ out: dense([0.25, 0]) });
  });

  it('fails on a vector of the wrong size and on a model with neither', () => {
    expect(() => run([scaler({ std: attr.tensor([4, 1]) })], { v: dense([1, 2, 3]) })).toThrowError(transformFailure);
    expect(() => compileBundle(pipelineBundle([scaler({})]))).toThrowError(bundleFailure);
  });
});

const fixtures = FIXTURES;
const haveFixtures = HAVE_FIXTURES;
if (!haveFixtures) console.warn(`skipping the airbnb feature pipeline test: ${fixtures} is absent`);

describe.skipIf(!haveFixtures)('airbnb feature pipeline (real bundle)', () => {
  it('assembles the features whose linear model gives MLeap\'s published 232.62463916840318', async () => {
    const doc = await readBundle(`${fixtures}combust-mleap/mleap-benchmark/src/main/resources/models/airbnb.model.lr.zip`, BUNDLE_LIMITS);
    // The feature pipeline alone: its folder becomes the root.
    const prefix = 'root/feature_pipeline.node/';
    const files = Object.fromEntries(
      Object.entries(doc.files).filter(([p]) => p.startsWith(prefix)).map(([p, text]) => [`root/${p.slice(prefix.length)}`, text]),
    );
    const out = runRow({ info: doc.info, files }, {
      state: 'NY', bathrooms: 2, square_feet: 1250, bedrooms: 3, security_deposit: 50, cleaning_fee: 30,
      extra_people: 2, number_of_reviews: 56, review_scores_rating: 90,
      room_type: 'Entire home/apt', host_is_superhost: '1.0', cancellation_policy: 'strict', instant_bookable: '1.0',
    });
    expect(out.state_index_oh).toEqual(sparse(9, [1], [1]));
    expect(out.host_is_superhost_index_oh).toEqual(sparse(1, [], []));

    const std = [0.4830590051262766, 0.846658660106073, 244.51668053484167, 42.64237791484595, 18.684562043006032, 27.98581482908148, 363.3983958237367, 8.57718580237418];
    const continuous = [2, 3, 50, 30, 2, 56, 1250, 90].map((x, i) => x * (1 / std[i]!));
    const expected = [1, 0, /* superhost */ 0, /* strict */ 1, 0, 0, 0, 0, 0, /* instant */ 0, /* NY */ 0, 1, 0, 0, 0, 0, 0, 0, 0, ...continuous];
    const features = toDense(out.features_lr as Tensor);
    expect(features).toEqual(expected);

    const lr = JSON.parse(doc.files['root/linear_regression.node/model.json']!) as {
      attributes: { coefficients: { double: number[] }; intercept: { double: number } };
    };
    const coefficients = lr.attributes.coefficients.double;
    const prediction = features.reduce((sum, x, i) => sum + x * coefficients[i]!, 0) + lr.attributes.intercept.double;
    expect(prediction).toBeCloseTo(232.62463916840318, 9);
  });
});
