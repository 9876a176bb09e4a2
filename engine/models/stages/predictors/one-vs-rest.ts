// one_vs_rest: child classifiers model0 .. model{num_classes − 1}; the prediction is the
// index of the child whose probability of class 1 is highest (first on ties), and the
// optional `probability` output is that highest probability (a scalar, as in MLeap).

import type { NodeSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import { DOUBLE, type Value } from '../../types.js';
import { outputOrder, type CompiledStage, type OpDefinition } from '../op.js';
import type { ProbabilisticModel } from './classifier.js';
import { logisticModel } from './logistic-regression.js';
import { featureVector, featuresType, requireFeatures } from './vector.js';

export const oneVsRest: OpDefinition = {
  op: 'one_vs_rest',
  className: 'OneVsRest',
  compile(node: NodeSpec): CompiledStage {
    requireFeatures(node);
    const order = outputOrder(node, ['prediction', 'probability']);
    const numClasses = node.attrs.integer('num_classes');
    const classifiers: ProbabilisticModel[] = [];
    for (let i = 0; i < numClasses; i++) {
      const child = node.child(`model${i}`);
      if (child.op !== 'logistic_regression') {
        throw bundleError(`${child.path}: one_vs_rest supports logistic_regression classifiers, not ${child.op}`);
      }
      classifiers.push(logisticModel(child));
    }
    if (classifiers.length === 0) throw bundleError(`${node.path}: one_vs_rest without classifiers`);
    const size = classifiers[0]!.numFeatures;
    if (classifiers.some((c) => c.numFeatures !== size)) throw bundleError(`${node.path}: classifiers of different sizes`);
    const where = node.path;
    return {
      inputs: [featuresType(size)],
      outputs: order.map(() => DOUBLE),
      run(args: Value[]): Value[] {
        const x = featureVector(args[0]!, size, where);
        let best = 0;
        let bestProbability = -Infinity;
        for (let i = 0; i < classifiers.length; i++) {
          const c = classifiers[i]!;
          const p = c.predictRaw(x);
          c.rawToProbabilityInPlace(p);
          if (i === 0 || p[1]! > bestProbability) {
            best = i;
            bestProbability = p[1]!;
          }
        }
        return order.map((i) => (i === 0 ? best : bestProbability));
      },
    };
  },
};
