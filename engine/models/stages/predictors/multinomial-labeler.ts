// multinomial_labeler: the classes whose probability is >= threshold, as two lists in class
// order: their probabilities (`probabilities`) and their labels (`labels`).

import type { NodeSpec } from '../../bundle/spec.js';
import { list, toDense, type Value } from '../../types.js';
import { outputOrder, type CompiledStage, type OpDefinition } from '../op.js';
import { featureVector, featuresType, requireFeatures } from './vector.js';

export const multinomialLabeler: OpDefinition = {
  op: 'multinomial_labeler',
  className: 'MultinomialLabeler',
  compile(node: NodeSpec): CompiledStage {
    requireFeatures(node);
    const order = outputOrder(node, ['probabilities', 'labels']);
    const threshold = node.attrs.double('threshold');
    const labels = node.attrs.strings('labels');
    const size = labels.length;
    const where = node.path;
    const types = [list('double'), list('string')];
    return {
      inputs: [featuresType(size)],
      outputs: order.map((i) => types[i]!),
      run(args: Value[]): Value[] {
        const values = toDense(featureVector(args[0]!, size, where));
        const probabilities: number[] = [];
        const chosen: string[] = [];
        for (let i = 0; i < values.length; i++) {
          if (values[i]! >= threshold) {
            probabilities.push(values[i]!);
            chosen.push(labels[i]!);
          }
        }
        return order.map((i) => (i === 0 ? probabilities : chosen));
      },
    };
  },
};
