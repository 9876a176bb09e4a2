import { describe, expect, it } from 'vitest';
import { compileBundle } from '../engine/models/compile.js';
import { runModel } from './helpers/models.js';
import { dense, sparse, type Value } from '../engine/models/types.js';
import { attr, pipelineBundle, treeFile, type ChildModel, type Stage } from './helpers/bundles.js';

function predictor(stage: Omit<Stage, 'name' | 'inputs'>) {
  const model = compileBundle(pipelineBundle([{ name: 'p', inputs: [['features', 'features']], ...stage }]));
  return { model, run: (features: Value) => runModel(model, [features]) };
}

const values = (v: Value | undefined) => (v as { values: number[] }).values;

/** f0 <= 1.5 ? (f1 ∈ {2, 3} ? A : B) : C, with the given leaf values. */
const sampleTree = (a: number[], b: number[], c: number[]) =>
  treeFile([
    { type: 'internal', split: { type: 'continuous', featureIndex: 0, threshold: 1.5 } },
    { type: 'internal', split: { type: 'categorical', featureIndex: 1, numCategories: 6, categories: [2, 3], isLeft: true } },
    { type: 'leaf', values: a },
    { type: 'leaf', values: b },
    { type: 'leaf', values: c },
  ]);
const leafTree = (v: number[]) => treeFile([{ type: 'leaf', values: v }]);
const CLASSIFIER_OUTPUTS: Stage['outputs'] = [['raw_prediction', 'raw'], ['probability', 'prob'], ['prediction', 'pred']];

describe('decision_tree_regression', () => {
  const dt = predictor({
    op: 'decision_tree_regression',
    attributes: { num_features: attr.long(2) },
    files: { 'tree.json': sampleTree([10], [20], [30]) },
    outputs: [['prediction', 'y']],
  });

  it('walks continuous (<=) and categorical (∈ when isLeft) splits', () => {
    expect(dt.run(dense([1, 2]))).toEqual([10]);
    expect(dt.run(dense([1.5, 3]))).toEqual([10]);
    expect(dt.run(dense([1, 5]))).toEqual([20]);
    expect(dt.run(dense([2, 2]))).toEqual([30]);
    expect(dt.run(sparse(2, [1], [3]))).toEqual([10]);
    expect(dt.run(sparse(2, [0], [4]))).toEqual([30]);
    expect(dt.run(dense([NaN, 2]))).toEqual([30]);
  });

  it('categorical split with isLeft false goes left when the value is not a category', () => {
    const right = predictor({
      op: 'decision_tree_regression',
      attributes: { num_features: attr.long(1) },
      files: {
        'tree.json': treeFile([
          { type: 'internal', split: { type: 'categorical', featureIndex: 0, numCategories: 3, categories: [1], isLeft: false } },
          { type: 'leaf', values: [-1] },
          { type: 'leaf', values: [1] },
        ]),
      },
      outputs: [['prediction', 'y']],
    });
    expect(right.run(dense([1]))).toEqual([1]);
    expect(right.run(dense([2]))).toEqual([-1]);
  });

  it('rejects malformed trees', () => {
    const bad = (tree: string, numFeatures = 2) => () =>
      predictor({ op: 'decision_tree_regression', attributes: { num_features: attr.long(numFeatures) }, files: { 'tree.json': tree }, outputs: [['prediction', 'y']] });
    const bundleError = expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' });
    expect(bad(treeFile([{ type: 'internal', split: { type: 'continuous', featureIndex: 0, threshold: 1 } }, { type: 'leaf', values: [1] }]))).toThrowError(bundleError);
    expect(bad(leafTree([1]) + leafTree([2]))).toThrowError(bundleError);
    expect(bad(sampleTree([1], [2], [3]), 1)).toThrowError(bundleError);
    expect(bad('not json\n')).toThrowError(bundleError);
    expect(bad('')).toThrowError(bundleError);
  });
});

describe('decision_tree_classifier', () => {
  const dtc = (thresholds?: number[], outputs = CLASSIFIER_OUTPUTS) =>
    predictor({
      op: 'decision_tree_classifier',
      attributes: { num_features: attr.long(2), num_classes: attr.long(2), ...(thresholds ? { thresholds: attr.doubles(thresholds) } : {}) },
      files: { 'tree.json': sampleTree([3, 1], [0, 0], [1, 4]) },
      outputs,
    });

  it('raw = leaf counts, probability = normalised counts, prediction = argmax', () => {
    const [raw, prob, pred] = dtc().run(dense([1, 2]));
    expect(values(raw)).toEqual([3, 1]);
    expect(values(prob)).toEqual([0.75, 0.25]);
    expect(pred).toBe(0);
    expect(dtc().run(dense([2, 2])).map((v, i) => (i < 2 ? values(v) : v))).toEqual([[1, 4], [0.2, 0.8], 1]);
  });

  it('a leaf counting nothing gives zero probabilities and class 0', () => {
    const [raw, prob, pred] = dtc().run(dense([1, 5]));
    expect(values(raw)).toEqual([0, 0]);
    expect(values(prob)).toEqual([0, 0]);
    expect(pred).toBe(0);
  });

  it('thresholds divide the probabilities', () => {
    expect(dtc([0.8, 0.3]).run(dense([1, 2]))[2]).toBe(0); // 0.9375 vs 0.833
    expect(dtc([0.8, 0.3]).run(dense([2, 2]))[2]).toBe(1); // 0.25 vs 2.667
    expect(dtc([0.7, 0.2]).run(dense([1, 2]))[2]).toBe(1); // 1.071 vs 1.25
    expect(dtc([0.7, 0.2], [['prediction', 'pred']]).run(dense([1, 2]))).toEqual([1]);
    expect(dtc([0.7, 0.2], [['prediction', 'pred'], ['raw_prediction', 'raw']]).run(dense([1, 2]))[0]).toBe(1);
    expect(dtc(undefined, [['prediction', 'pred'], ['raw_prediction', 'raw']]).run(dense([1, 2]))[0]).toBe(0);
  });
});

describe('random forests', () => {
  const classifierTree = (tree: string): ChildModel => ({
    op: 'decision_tree_classifier',
    attributes: { num_features: attr.long(2), num_classes: attr.long(2) },
    files: { 'tree.json': tree },
  });
  const regressionTree = (tree: string): ChildModel => ({
    op: 'decision_tree_regression',
    attributes: { num_features: attr.long(2) },
    files: { 'tree.json': tree },
  });

  it('classifier: raw sums normalised leaf counts, probability normalises raw', () => {
    const rf = predictor({
      op: 'random_forest_classifier',
      attributes: {
        num_features: attr.long(2),
        num_classes: attr.long(2),
        trees: attr.strings(['tree0', 'tree1']),
        tree_weights: attr.doubles([1, 1]),
      },
      children: { tree0: classifierTree(sampleTree([3, 1], [0, 0], [1, 4])), tree1: classifierTree(leafTree([1, 1])) },
      outputs: CLASSIFIER_OUTPUTS,
    });
    expect(rf.run(dense([1, 2])).map((v, i) => (i < 2 ? values(v) : v))).toEqual([[1.25, 0.75], [0.625, 0.375], 0]);
    // the empty leaf of tree0 adds nothing
    expect(rf.run(dense([1, 5])).map((v, i) => (i < 2 ? values(v) : v))).toEqual([[0.5, 0.5], [0.5, 0.5], 0]);
    const [raw, prob, pred] = rf.run(dense([2, 2]));
    expect(values(raw)).toEqual([0.7, 1.3]);
    expect(values(prob)[0]).toBeCloseTo(0.35, 15);
    expect(values(prob)[1]).toBeCloseTo(0.65, 15);
    expect(pred).toBe(1);
  });

  it('classifier with num_classes 1 (a single-label training set)', () => {
    const rf = predictor({
      op: 'random_forest_classifier',
      attributes: { num_features: attr.long(2), num_classes: attr.long(1), trees: attr.strings(['tree0', 'tree1']), tree_weights: attr.doubles([1, 1]) },
      children: { tree0: classifierTree(leafTree([7550])), tree1: classifierTree(leafTree([7492])) },
      outputs: CLASSIFIER_OUTPUTS,
    });
    expect(rf.run(dense([0, 0])).map((v, i) => (i < 2 ? values(v) : v))).toEqual([[2], [1], 0]);
  });

  it('regression: plain mean of the trees, weights ignored', () => {
    const rf = predictor({
      op: 'random_forest_regression',
      attributes: { num_features: attr.long(2), trees: attr.strings(['tree0', 'tree1']), tree_weights: attr.doubles([3, 7]) },
      children: { tree0: regressionTree(sampleTree([10], [20], [30])), tree1: regressionTree(leafTree([5])) },
      outputs: [['prediction', 'y']],
    });
    expect(rf.run(dense([1, 2]))).toEqual([7.5]);
    expect(rf.run(dense([2, 2]))).toEqual([17.5]);
  });

  it('gbt regression: weighted sum of the trees', () => {
    const gbt = predictor({
      op: 'gbt_regression',
      attributes: { num_features: attr.long(2), trees: attr.strings(['tree0', 'tree1']), tree_weights: attr.doubles([1, 0.5]) },
      children: { tree0: regressionTree(sampleTree([10], [20], [30])), tree1: regressionTree(leafTree([5])) },
      outputs: [['prediction', 'y']],
    });
    expect(gbt.run(dense([2, 2]))).toEqual([32.5]);
    expect(() =>
      predictor({
        op: 'gbt_regression',
        attributes: { num_features: attr.long(2), trees: attr.strings(['tree0']), tree_weights: attr.doubles([1, 0.5]) },
        children: { tree0: regressionTree(leafTree([5])) },
        outputs: [['prediction', 'y']],
      }),
    ).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' }));
  });

  const gbtClassifier = (outputs: Stage['outputs'], thresholds?: number[]) =>
    predictor({
      op: 'gbt_classifier',
      attributes: {
        num_features: attr.long(2),
        num_classes: attr.long(2),
        trees: attr.strings(['tree0', 'tree1']),
        tree_weights: attr.doubles([1, 0.1]),
        ...(thresholds ? { thresholds: attr.doubles(thresholds) } : {}),
      },
      children: {
        tree0: regressionTree(
          treeFile([
            { type: 'internal', split: { type: 'continuous', featureIndex: 0, threshold: 0 } },
            { type: 'leaf', values: [-1] },
            { type: 'leaf', values: [1] },
          ]),
        ),
        tree1: regressionTree(leafTree([0.5])),
      },
      outputs,
    });

  it('gbt classifier: margin m = Σ wᵢ·treeᵢ, raw = [−m, m], p1 = 1 − 1/(1 + e^(2m))', () => {
    const [raw, prob, pred] = gbtClassifier(CLASSIFIER_OUTPUTS).run(dense([1, 0])); // m = 1.05
    expect(values(raw)).toEqual([-1.05, 1.05]);
    expect(values(prob)[0]).toBeCloseTo(0.10909682119561293, 15);
    expect(values(prob)[1]).toBeCloseTo(0.8909031788043871, 15);
    expect(pred).toBe(1);
    const negative = gbtClassifier(CLASSIFIER_OUTPUTS, [1, 1]).run(sparse(2, [0], [-1])); // m = -0.95
    expect(values(negative[1])[0]).toBeCloseTo(0.8698915256370021, 15);
    expect(negative[2]).toBe(0);
    expect(gbtClassifier([['prediction', 'p']]).run(dense([1, 0]))).toEqual([1]);
    expect(gbtClassifier([['prediction', 'p']]).run(dense([-1, 0]))).toEqual([0]);
    // thresholds: 0.1091 / 0.05 = 2.18 > 0.8909, 0.1091 / 0.5 = 0.218 < 0.8909
    expect(gbtClassifier([['prediction', 'p']], [0.05, 1]).run(dense([1, 0]))).toEqual([0]);
    expect(gbtClassifier([['prediction', 'p']], [0.5, 1]).run(dense([1, 0]))).toEqual([1]);
  });
});
