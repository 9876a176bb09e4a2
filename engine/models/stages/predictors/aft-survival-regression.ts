// aft_survival_regression: prediction = λ = exp(x · coefficients + intercept); quantiles[i] =
// λ · exp(log(−log(1 − qᵢ)) / k) with k = 1 / scale (MLeap's formula).

import type { NodeSpec } from '../../bundle/spec.js';
import { DOUBLE, dense, tensor, type Value } from '../../types.js';
import { outputOrder, type CompiledStage, type OpDefinition } from '../op.js';
import { dot, featureVector, featuresType, requireFeatures } from './vector.js';

export const aftSurvivalRegression: OpDefinition = {
  op: 'aft_survival_regression',
  className: 'AFTSurvivalRegression',
  compile(node: NodeSpec): CompiledStage {
    requireFeatures(node);
    const order = outputOrder(node, ['prediction', 'quantiles']);
    const coefficients = Float64Array.from(node.attrs.doubles('coefficients'));
    const intercept = node.attrs.double('intercept');
    const probabilities = node.attrs.doubles('quantile_probabilities', []);
    const k = 1 / node.attrs.double('scale');
    const size = coefficients.length;
    const where = node.path;
    const types = [DOUBLE, tensor('double', [probabilities.length])];
    return {
      inputs: [featuresType(size)],
      outputs: order.map((i) => types[i]!),
      run(args: Value[]): Value[] {
        const lambda = Math.exp(dot(featureVector(args[0]!, size, where), coefficients) + intercept);
        if (order.length === 1 && order[0] === 0) return [lambda];
        const quantiles = probabilities.map((q) => lambda * Math.exp(Math.log(-Math.log(1 - q)) / k));
        return order.map((i) => (i === 0 ? lambda : dense(quantiles)));
      },
    };
  },
};
