import { describe, expect, it } from 'vitest';
import { compileBundle } from '../engine/models/compile.js';
import { dense, sparse, type Value } from '../engine/models/types.js';
import { attr, pipelineBundle, type Stage } from './helpers/bundles.js';

/** Compiles a one-stage pipeline and returns a function of the features to the stage's outputs. */
function predictor(stage: Omit<Stage, 'name' | 'inputs'> & { inputs?: Stage['inputs'] }) {
  const model = compileBundle(pipelineBundle([{ name: 'p', inputs: [['features', 'features']], ...stage }]));
  return { model, run: (features: Value) => model.run([features]) };
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
    expect(() => lr.run(dense([1, 2]))).toThrowError(expect.objectContaining({ error: 'TransformException' }));
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
