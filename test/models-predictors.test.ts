import { describe, expect, it } from 'vitest';
import { compileBundle } from '../engine/models/compile.js';
import { runModel } from './helpers/models.js';
import { dense, sparse, type Value } from '../engine/models/types.js';
import { erf } from '../engine/models/stages/predictors/special-functions.js';
import { attr, pipelineBundle, type Stage } from './helpers/bundles.js';

/** Compiles a one-stage pipeline and returns a function of the features to the stage's outputs. */
function predictor(stage: Omit<Stage, 'name' | 'inputs'> & { inputs?: Stage['inputs'] }) {
  const model = compileBundle(pipelineBundle([{ name: 'p', inputs: [['features', 'features']], ...stage }]));
  return { model, run: (features: Value) => runModel(model, [features]) };
}

describe('linear_regression', () => {
  const lr = predictor({
    op: 'linear_regression',
    attributes: { coefficients: attr.tensor([2, -1, 0.5]), intercept: attr.double(3) },
    outputs: [['prediction', 'price']],
  });

  it('is x · coefficients + intercept for dense and sparse vectors', () => {
    expect(lr.run(dense([1, 2, 4]))).toEqual([2 - 2 + 2 + 3]);
    expect(lr.run(sparse(3, [0, 2], [1, 4]))).toEqual([2 + 2 + 3]);
    expect(lr.run(sparse(3, [], []))).toEqual([3]);
  });

  it('declares a nullable double vector input and a double output', () => {
    expect(lr.model.inputSchema).toEqual([{ name: 'features', type: { shape: 'tensor', base: 'double', nullable: true, dims: [3] } }]);
    expect(lr.model.outputSchema[1]).toEqual({ name: 'price', type: { shape: 'scalar', base: 'double', nullable: false } });
  });

  it('rejects a feature vector of the wrong size', () => {
    expect(() => lr.run(dense([1, 2]))).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'model_transform_failed' }));
  });

  it('reads an intercept written as {} as 0', () => {
    const zero = predictor({
      op: 'linear_regression',
      attributes: { coefficients: attr.tensor([1, 1]), intercept: {} },
      outputs: [['prediction', 'y']],
    });
    expect(zero.run(dense([1.5, 2]))).toEqual([3.5]);
  });
});

const tensorValues = (v: Value) => (v as { values: number[] }).values;

describe('logistic_regression', () => {
  const binary = (outputs: Stage['outputs'], threshold?: number) =>
    predictor({
      op: 'logistic_regression',
      attributes: {
        num_classes: attr.long(2),
        coefficients: attr.tensor([1, 2]),
        intercept: attr.double(-1),
        ...(threshold === undefined ? {} : { threshold: attr.double(threshold) }),
      },
      outputs,
    });

  it('binary: raw = [-m, m], probability = sigmoid, prediction = p1 > threshold (default 0.5)', () => {
    const lr = binary([['raw_prediction', 'raw'], ['probability', 'prob'], ['prediction', 'pred']]);
    const [raw, prob, pred] = lr.run(dense([1, 1])); // m = 1 + 2 - 1 = 2
    expect(tensorValues(raw!)).toEqual([-2, 2]);
    const [p0, p1] = tensorValues(prob!);
    expect(p0).toBeCloseTo(0.11920292202211755, 15);
    expect(p1).toBeCloseTo(0.8807970779778823, 15);
    expect(pred).toBe(1);
    expect(lr.model.outputSchema.slice(1).map((f) => f.type)).toEqual([
      { shape: 'tensor', base: 'double', nullable: false, dims: [2] },
      { shape: 'tensor', base: 'double', nullable: false, dims: [2] },
      { shape: 'scalar', base: 'double', nullable: false },
    ]);
  });

  it('binary: threshold applies on every output path; only bound sockets are produced', () => {
    expect(binary([['prediction', 'pred']], 0.9).run(dense([1, 1]))).toEqual([0]);
    expect(binary([['prediction', 'pred']], 0.85).run(dense([1, 1]))).toEqual([1]);
    const rawOnly = binary([['prediction', 'pred'], ['raw_prediction', 'raw']], 0.9).run(sparse(2, [1], [1])); // m = 1
    expect(rawOnly[0]).toBe(0); // 1 ≤ log(0.9 / 0.1) ≈ 2.197
    expect(tensorValues(rawOnly[1]!)).toEqual([-1, 1]);
    expect(binary([['prediction', 'pred']], 0).run(dense([-100, 0]))).toEqual([1]);
  });

  const multinomial = (thresholds?: number[]) =>
    predictor({
      op: 'logistic_regression',
      attributes: {
        num_classes: attr.long(3),
        coefficient_matrix: attr.matrix([[1, 0], [0, 1], [1, 1]]),
        intercept_vector: attr.tensor([0, 0, -1]),
        ...(thresholds ? { thresholds: attr.doubles(thresholds) } : {}),
      },
      outputs: [['prediction', 'pred'], ['probability', 'prob'], ['raw_prediction', 'raw']],
    });

  it('multinomial: margins = M·x + b, softmax, argmax (first of ties)', () => {
    const [pred, prob, raw] = multinomial().run(dense([1, 2]));
    expect(tensorValues(raw!)).toEqual([1, 2, 2]);
    // exp(-1), 1, 1 over 2 + exp(-1) = 2.3678794411714423
    const p = tensorValues(prob!);
    expect(p[0]).toBeCloseTo(0.15536240349696362, 15);
    expect(p[1]).toBeCloseTo(0.4223187982515182, 15);
    expect(p[2]).toBeCloseTo(0.4223187982515182, 15);
    expect(pred).toBe(1);
    const [, , sparseRaw] = multinomial().run(sparse(2, [1], [2]));
    expect(tensorValues(sparseRaw!)).toEqual([0, 2, 1]);
  });

  it('multinomial: thresholds scale probabilities (p / t, t = 0 wins)', () => {
    expect(multinomial([1, 1, 0.5]).run(dense([1, 2]))[0]).toBe(2);
    expect(multinomial([0, 1, 1]).run(dense([1, 2]))[0]).toBe(0);
  });

  it('multinomial: an infinite margin gives probability 1 for its class', () => {
    const p = tensorValues(multinomial().run(dense([Infinity, 0]))[1]!);
    expect(p).toEqual([1, 0, 0]);
  });

  it('rejects a port the op does not have', () => {
    expect(() => binary([['link_prediction', 'x']])).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' }));
  });
});

describe('generalized_linear_regression', () => {
  const glm = (family: string, link: string | undefined, outputs: Stage['outputs'] = [['prediction', 'y'], ['link_prediction', 'eta']]) =>
    predictor({
      op: 'generalized_linear_regression',
      attributes: {
        coefficients: attr.tensor([0.5, -1]),
        intercept: attr.double(0.25),
        family: attr.string(family),
        ...(link ? { link: attr.string(link) } : {}),
      },
      outputs,
    });

  it('prediction = unlink(eta), link_prediction = eta, link defaulting by family', () => {
    // eta = 0.5·2 − 1·1 + 0.25 = 0.25
    expect(glm('gaussian', undefined).run(dense([2, 1]))).toEqual([0.25, 0.25]);
    expect(glm('poisson', undefined).run(dense([2, 1]))[0]).toBeCloseTo(1.2840254166877414, 15);
    expect(glm('binomial', undefined).run(dense([2, 1]))[0]).toBeCloseTo(0.5621765008857981, 15);
    expect(glm('gamma', undefined).run(dense([2, 1]))[0]).toBe(4);
    expect(glm('gaussian', 'log', [['prediction', 'y']]).run(dense([2, 1]))[0]).toBeCloseTo(1.2840254166877414, 15);
    expect(glm('poisson', 'sqrt').run(dense([2, 1]))[0]).toBe(0.0625);
    expect(glm('binomial', 'cloglog').run(dense([2, 1]))[0]).toBeCloseTo(0.7230796659000911, 14);
    expect(glm('binomial', 'probit').run(dense([2, 1]))[0]).toBeCloseTo(0.5987063256829237, 14);
  });

  it('projects fitted values into the family range', () => {
    expect(glm('poisson', 'identity').run(dense([0, 1]))[0]).toBe(1e-16); // eta = -0.75
    expect(glm('gaussian', 'log').run(dense([2000, 0]))[0]).toBe(Number.MAX_VALUE);
    expect(glm('binomial', 'logit').run(dense([100, 0]))[0]).toBe(1 - 1e-16);
  });

  it('rejects an unknown family', () => {
    expect(() => glm('tweedie', 'log')).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' }));
  });
});

describe('isotonic_regression', () => {
  const iso = (extra: Record<string, unknown> = {}) =>
    predictor({
      op: 'isotonic_regression',
      attributes: {
        boundaries: attr.doubles([0, 1, 1, 3]),
        predictions: attr.doubles([10, 20, 30, 40]),
        isotonic: attr.boolean(true),
        ...extra,
      },
      outputs: [['prediction', 'y']],
    });

  it('interpolates between boundaries and clamps at the ends', () => {
    const f = iso();
    expect(f.run(-5)).toEqual([10]);
    expect(f.run(0.25)).toEqual([12.5]);
    expect(f.run(2)).toEqual([35]);
    expect(f.run(3)).toEqual([40]);
    expect(f.run(9)).toEqual([40]);
    expect(f.run(NaN)).toEqual([40]);
    // binarySearch over [0, 1, 1, 3] for 1 probes index 1 first
    expect(f.run(1)).toEqual([20]);
    expect(f.model.inputSchema[0]!.type).toEqual({ shape: 'scalar', base: 'double', nullable: true });
  });

  it('reads element feature_index of a vector when given', () => {
    const f = iso({ feature_index: attr.long(1) });
    expect(f.run(dense([100, 2]))).toEqual([35]);
    expect(f.run(sparse(3, [0], [100]))).toEqual([10]);
  });
});

describe('erf', () => {
  it('matches reference values within a few ulps', () => {
    const reference: [number, number][] = [
      [0.1, 0.1124629160182849], [0.5, 0.5204998778130465], [1, 0.8427007929497149], [2, 0.9953222650189527],
      [2.9, 0.9999589021219005], [3, 0.9999779095030014], [3.5, 0.9999992569016276], [5, 0.9999999999984626],
      [-1.3, -0.9340079449406524], [0, 0],
    ];
    for (const [x, y] of reference) expect(Math.abs(erf(x) - y)).toBeLessThan(6e-16);
  });
});
