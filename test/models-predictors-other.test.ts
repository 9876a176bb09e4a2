import { describe, expect, it } from 'vitest';
import { compileBundle } from '../engine/models/compile.js';
import { runModel } from './helpers/models.js';
import { dense, sparse, type Value } from '../engine/models/types.js';
import { attr, pipelineBundle, treeFile, type Stage } from './helpers/bundles.js';

function predictor(stage: Omit<Stage, 'name' | 'inputs'>) {
  const model = compileBundle(pipelineBundle([{ name: 'p', inputs: [['features', 'features']], ...stage }]));
  return { model, run: (features: Value) => runModel(model, [features]) };
}

const values = (v: Value | undefined) => (v as { values: number[] }).values;
const CLASSIFIER_OUTPUTS: Stage['outputs'] = [['raw_prediction', 'raw'], ['probability', 'prob'], ['prediction', 'pred']];

describe('naive_bayes', () => {
  it('multinomial: raw = θ·x + π, probability = normalised exp(raw − max)', () => {
    const nb = predictor({
      op: 'naive_bayes',
      attributes: {
        num_features: attr.long(3),
        num_classes: attr.long(2),
        model_type: attr.string('multinomial'),
        pi: attr.tensor([-0.5, -1]),
        theta: attr.matrix([[-1, -2, -3], [-3, -2, -1]]),
      },
      outputs: CLASSIFIER_OUTPUTS,
    });
    const [raw, prob, pred] = nb.run(dense([1, 0, 2]));
    expect(values(raw)).toEqual([-7.5, -6]);
    expect(values(prob)[0]).toBeCloseTo(0.18242552380635635, 15);
    expect(values(prob)[1]).toBeCloseTo(0.8175744761936437, 15);
    expect(pred).toBe(1);
    expect(values(nb.run(sparse(3, [2], [2]))[0])).toEqual([-6.5, -3]);
  });

  const bernoulli = (thresholds?: number[]) =>
    predictor({
      op: 'naive_bayes',
      attributes: {
        num_features: attr.long(2),
        num_classes: attr.long(2),
        model_type: attr.string('bernoulli'),
        pi: attr.tensor([Math.log(0.4), Math.log(0.6)]),
        theta: attr.matrix([[Math.log(0.2), Math.log(0.5)], [Math.log(0.6), Math.log(0.1)]]),
        ...(thresholds ? { thresholds: attr.doubles(thresholds) } : {}),
      },
      outputs: CLASSIFIER_OUTPUTS,
    });

  it('bernoulli: absent features count log(1 − p)', () => {
    // class 0: 0.4 · 0.2 · (1 − 0.5) = 0.04; class 1: 0.6 · 0.6 · (1 − 0.1) = 0.324
    const [raw, prob, pred] = bernoulli().run(dense([1, 0]));
    expect(values(raw)[0]).toBeCloseTo(Math.log(0.04), 14);
    expect(values(raw)[1]).toBeCloseTo(Math.log(0.324), 14);
    expect(values(prob)[0]).toBeCloseTo(0.04 / 0.364, 14);
    expect(values(prob)[1]).toBeCloseTo(0.324 / 0.364, 14);
    expect(pred).toBe(1);
    expect(bernoulli([0.1, 1]).run(dense([1, 0]))[2]).toBe(0); // 1.0989 > 0.8901
  });

  it('bernoulli: a feature other than 0 or 1 is a transform error', () => {
    expect(() => bernoulli().run(dense([0.5, 0]))).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'model_transform_failed' }));
  });

  it('rejects an unknown model type', () => {
    expect(() =>
      predictor({
        op: 'naive_bayes',
        attributes: { num_features: attr.long(1), num_classes: attr.long(1), model_type: attr.string('gaussian'), pi: attr.tensor([0]), theta: attr.matrix([[0]]) },
        outputs: [['prediction', 'p']],
      }),
    ).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' }));
  });
});

describe('support vector machines', () => {
  it('support_vector_machine: raw = probability = [−m, m], prediction = argmax', () => {
    const svm = predictor({
      op: 'support_vector_machine',
      attributes: { coefficients: attr.tensor([1, -1]), intercept: attr.double(0.5), num_classes: attr.long(2) },
      outputs: [['prediction', 'pred'], ['raw_prediction', 'raw'], ['probability', 'prob']],
    });
    const [pred, raw, prob] = svm.run(dense([1, 3])); // m = -1.5
    expect(pred).toBe(0);
    expect(values(raw)).toEqual([1.5, -1.5]);
    expect(values(prob)).toEqual([1.5, -1.5]);
    expect(svm.run(dense([3, 1]))[0]).toBe(1);
  });

  const svc = (outputs: Stage['outputs']) =>
    predictor({
      op: 'linear_svc',
      attributes: { coefficients: attr.tensor([1, -1]), intercept: attr.double(0.5), threshold: attr.double(1), num_classes: attr.long(2) },
      outputs,
    });

  it('linear_svc: prediction = m > threshold on both output paths', () => {
    expect(svc([['prediction', 'p']]).run(dense([1, 0]))).toEqual([1]); // m = 1.5
    expect(svc([['prediction', 'p']]).run(dense([0.25, 0]))).toEqual([0]); // m = 0.75
    const [raw, pred] = svc([['raw_prediction', 'r'], ['prediction', 'p']]).run(dense([0.25, 0]));
    expect(values(raw)).toEqual([-0.75, 0.75]);
    expect(pred).toBe(0);
  });

  it('linear_svc has no probability port', () => {
    expect(() => svc([['probability', 'p']])).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' }));
  });
});

describe('k_means', () => {
  const km = predictor({
    op: 'k_means',
    attributes: { cluster_centers: attr.tensors([[0, 0], [10, 0], [0, 10]]), num_features: attr.long(2) },
    outputs: [['prediction', 'cluster']],
  });

  it('is the index of the nearest centre (squared Euclidean), an int', () => {
    expect(km.run(dense([6, 1]))).toEqual([1]);
    expect(km.run(dense([1, 1]))).toEqual([0]);
    expect(km.run(sparse(2, [1], [9]))).toEqual([2]);
    expect(km.run(sparse(2, [], []))).toEqual([0]);
    expect(km.run(dense([5, 0]))).toEqual([0]); // tie: the first centre
    expect(km.model.outputSchema[1]!.type).toEqual({ shape: 'scalar', base: 'int', nullable: false });
  });
});

describe('one_vs_rest', () => {
  const ovr = predictor({
    op: 'one_vs_rest',
    attributes: { num_classes: attr.long(2), num_features: attr.long(1) },
    children: {
      model0: { op: 'logistic_regression', attributes: { num_classes: attr.long(2), coefficients: attr.tensor([1]), intercept: attr.double(0) } },
      model1: { op: 'logistic_regression', attributes: { num_classes: attr.long(2), coefficients: attr.tensor([-1]), intercept: attr.double(0) } },
    },
    outputs: [['prediction', 'pred'], ['probability', 'prob']],
  });

  it('predicts the classifier with the highest probability of class 1, and that probability', () => {
    const [pred, prob] = ovr.run(dense([2]));
    expect(pred).toBe(0);
    expect(prob).toBeCloseTo(0.8807970779778823, 15);
    const [pred1, prob1] = ovr.run(dense([-1]));
    expect(pred1).toBe(1);
    expect(prob1).toBeCloseTo(0.7310585786300049, 15);
    expect(ovr.run(dense([0]))[0]).toBe(0); // tie: the first classifier
  });
});

describe('multi_layer_perceptron_classifier', () => {
  const mlp = predictor({
    op: 'multi_layer_perceptron_classifier',
    attributes: {
      layers: attr.longs([2, 2, 2]),
      // layer 1: identity weights, zero bias; layer 2: [[1, -1], [-1, 1]] (column-major), bias [0, 0.5]
      weights: attr.doubles([1, 0, 0, 1, 0, 0, 1, -1, -1, 1, 0, 0.5]),
    },
    outputs: CLASSIFIER_OUTPUTS,
  });

  it('sigmoid hidden layers, raw = last affine output, probability = softmax', () => {
    const [raw, prob, pred] = mlp.run(dense([0, 0])); // hidden [0.5, 0.5]
    expect(values(raw)).toEqual([0, 0.5]);
    expect(values(prob)[0]).toBeCloseTo(0.3775406687981454, 15);
    expect(values(prob)[1]).toBeCloseTo(0.6224593312018546, 15);
    expect(pred).toBe(1);
  });

  it('rejects weights that do not fit the layers', () => {
    expect(() =>
      predictor({ op: 'multi_layer_perceptron_classifier', attributes: { layers: attr.longs([2, 2]), weights: attr.doubles([1, 2, 3]) }, outputs: [['prediction', 'p']] }),
    ).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' }));
  });
});

describe('aft_survival_regression', () => {
  it('prediction = exp(x·β + b), quantiles = λ·exp(log(−log(1 − q))·scale)', () => {
    const aft = predictor({
      op: 'aft_survival_regression',
      attributes: {
        coefficients: attr.tensor([1, 0]),
        intercept: attr.double(0),
        quantile_probabilities: attr.doubles([1 - Math.exp(-1), 0.5]),
        scale: attr.double(0.5),
      },
      outputs: [['quantiles', 'q'], ['prediction', 'y']],
    });
    const [quantiles, prediction] = aft.run(dense([Math.LN2, 5]));
    expect(prediction).toBeCloseTo(2, 15);
    expect(values(quantiles)[0]).toBeCloseTo(2, 14);
    expect(values(quantiles)[1]).toBeCloseTo(1.6651092223153954, 14);
  });
});

describe('bisecting_k_means', () => {
  const node = (index: number, values: number[], numChildren: number) => ({ index, norm: Math.hypot(...values), values, numChildren });
  const km = predictor({
    op: 'bisecting_k_means',
    attributes: {},
    files: {
      'tree.json': treeFile([
        node(-1, [5, 5], 2),
        node(-2, [0, 0], 2),
        node(0, [-1, 0], 0),
        node(1, [1, 0], 0),
        node(2, [10, 10], 0),
      ]),
    },
    outputs: [['prediction', 'cluster']],
  });

  it('descends to the nearest child centre and answers the leaf index as an int', () => {
    expect(km.run(dense([0.9, 0]))).toEqual([1]);
    expect(km.run(dense([-3, 1]))).toEqual([0]);
    expect(km.run(sparse(2, [0, 1], [9, 9]))).toEqual([2]);
    expect(km.model.outputSchema[1]!.type).toEqual({ shape: 'scalar', base: 'int', nullable: false });
  });
});

describe('multinomial_labeler', () => {
  it('lists the probabilities >= threshold and their labels, in class order', () => {
    const labeler = predictor({
      op: 'multinomial_labeler',
      attributes: { threshold: attr.double(0.25), labels: attr.strings(['a', 'b', 'c']) },
      outputs: [['labels', 'l'], ['probabilities', 'p']],
    });
    expect(labeler.run(dense([0.25, 0.1, 0.65]))).toEqual([['a', 'c'], [0.25, 0.65]]);
    expect(labeler.run(sparse(3, [1], [0.5]))).toEqual([['b'], [0.5]]);
    expect(labeler.run(dense([0, 0, 0]))).toEqual([[], []]);
    expect(labeler.model.outputSchema.slice(1).map((f) => f.type)).toEqual([
      { shape: 'list', base: 'string', nullable: false },
      { shape: 'list', base: 'double', nullable: false },
    ]);
  });
});
