// Linear support vector machines, margin m = x · coefficients + intercept, raw = [−m, m]:
//   linear_svc (Spark's LinearSVC): prediction = m > threshold; no probability port.
//   support_vector_machine (MLeap's older SVM): a probabilistic classifier whose
//   "probability" is the raw vector itself, prediction by argmax (or thresholds).

import type { NodeSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import type { Tensor } from '../../types.js';
import type { OpDefinition } from '../op.js';
import { compileClassifier } from './classifier.js';
import { dot } from './vector.js';

function linearMargin(node: NodeSpec) {
  const numClasses = node.attrs.integer('num_classes', 2);
  if (numClasses !== 2) throw bundleError(`${node.path}: ${node.op} supports 2 classes, not ${numClasses}`);
  const coefficients = Float64Array.from(node.attrs.doubles('coefficients'));
  const intercept = node.attrs.double('intercept');
  return { numFeatures: coefficients.length, margin: (x: Tensor) => dot(x, coefficients) + intercept };
}

export const linearSvc: OpDefinition = {
  op: 'linear_svc',
  className: 'LinearSVC',
  compile(node: NodeSpec) {
    const { numFeatures, margin } = linearMargin(node);
    const threshold = node.attrs.double('threshold', 0);
    return compileClassifier(
      node,
      {
        numClasses: 2,
        numFeatures,
        predictRaw(x) {
          const m = margin(x);
          return [-m, m];
        },
        rawToProbabilityInPlace() {},
        rawToPrediction: (raw) => (raw[1]! > threshold ? 1 : 0),
        predict: (x) => (margin(x) > threshold ? 1 : 0),
      },
      ['prediction', 'raw_prediction'],
    );
  },
};

export const supportVectorMachine: OpDefinition = {
  op: 'support_vector_machine',
  className: 'SupportVectorMachine',
  compile(node: NodeSpec) {
    const { numFeatures, margin } = linearMargin(node);
    return compileClassifier(node, {
      numClasses: 2,
      numFeatures,
      thresholds: node.attrs.has('thresholds') ? Float64Array.from(node.attrs.doubles('thresholds')) : undefined,
      predictRaw(x) {
        const m = margin(x);
        return [-m, m];
      },
      rawToProbabilityInPlace() {},
    });
  },
};
