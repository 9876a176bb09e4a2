// naive_bayes (multinomial or bernoulli): pi (log priors), theta (log conditionals, a
// [classes, features] matrix stored column-major), thresholds?.
//   multinomial: raw = θ·x + π
//   bernoulli:   raw = (θ − log(1 − e^θ))·x + π + Σⱼ log(1 − e^θ), features must be 0 or 1
// probability = e^(raw − max raw), normalised.

import type { NodeSpec } from '../../bundle/spec.js';
import { bundleError, transformError } from '../../errors.js';
import type { OpDefinition } from '../op.js';
import { compileClassifier } from './classifier.js';
import { gemv, vectorAttribute } from './vector.js';

export const naiveBayes: OpDefinition = {
  op: 'naive_bayes',
  className: 'NaiveBayesClassifier',
  compile(node: NodeSpec) {
    const numFeatures = node.attrs.integer('num_features');
    const numClasses = node.attrs.integer('num_classes');
    const modelType = node.attrs.string('model_type', 'multinomial');
    if (modelType !== 'multinomial' && modelType !== 'bernoulli') {
      throw bundleError(`${node.path}: naive Bayes model_type "${modelType}" is not supported`);
    }
    const pi = vectorAttribute(node.attrs.doubles('pi'), numClasses, `${node.path}: pi`);
    const theta = vectorAttribute(node.attrs.tensor('theta').values, numClasses * numFeatures, `${node.path}: theta`);
    const thresholds = node.attrs.has('thresholds') ? Float64Array.from(node.attrs.doubles('thresholds')) : undefined;
    const bernoulli = modelType === 'bernoulli';
    const negThetaSum = new Float64Array(numClasses);
    const weights = bernoulli ? new Float64Array(theta.length) : theta;
    if (bernoulli) {
      for (let j = 0; j < numFeatures; j++) {
        for (let c = 0; c < numClasses; c++) {
          const t = theta[j * numClasses + c]!;
          const negTheta = Math.log(1 - Math.exp(t));
          weights[j * numClasses + c] = t - negTheta;
          negThetaSum[c] += negTheta;
        }
      }
    }
    const where = node.path;
    return compileClassifier(node, {
      numClasses,
      numFeatures,
      thresholds,
      predictRaw(x) {
        if (bernoulli) {
          for (const v of x.values) {
            if (v !== 0 && v !== 1) throw transformError(`${where}: Bernoulli naive Bayes requires 0 or 1 feature values, found ${v}`);
          }
        }
        const raw = new Array<number>(numClasses);
        gemv(weights, numClasses, x, null, raw);
        for (let c = 0; c < numClasses; c++) raw[c] += pi[c]!;
        if (bernoulli) for (let c = 0; c < numClasses; c++) raw[c] += negThetaSum[c]!;
        return raw;
      },
      rawToProbabilityInPlace(values) {
        let max = -Infinity;
        for (const v of values) if (v > max) max = v;
        let sum = 0;
        for (let i = 0; i < values.length; i++) {
          values[i] = Math.exp(values[i]! - max);
          sum += values[i]!;
        }
        if (sum !== 0) for (let i = 0; i < values.length; i++) values[i] /= sum;
      },
    });
  },
};
