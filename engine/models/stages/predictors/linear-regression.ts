// linear_regression: prediction = x · coefficients + intercept.

import type { NodeSpec } from '../../bundle/spec.js';
import { DOUBLE, type Value } from '../../types.js';
import { outputOrder, type CompiledStage, type OpDefinition } from '../op.js';
import { dot, featureVector, featuresType, requireFeatures } from './vector.js';

export const linearRegression: OpDefinition = {
  op: 'linear_regression',
  className: 'LinearRegression',
  compile(node: NodeSpec): CompiledStage {
    requireFeatures(node);
    outputOrder(node, ['prediction']);
    const coefficients = Float64Array.from(node.attrs.doubles('coefficients'));
    const intercept = node.attrs.double('intercept');
    const size = coefficients.length;
    const where = node.path;
    return {
      inputs: [featuresType(size)],
      outputs: node.outputs.map(() => DOUBLE),
      run(args: Value[]): Value[] {
        return [dot(featureVector(args[0]!, size, where), coefficients) + intercept];
      },
    };
  },
};
