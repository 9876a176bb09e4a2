// logistic_regression, binary (num_classes 2: coefficients, intercept, threshold) or
// multinomial (coefficient_matrix [classes, features] column-major, intercept_vector,
// thresholds), as MLeap's BinaryLogisticRegressionModel / ProbabilisticLogisticsRegressionModel.

import type { ModelSpec, NodeSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import type { Tensor } from '../../types.js';
import type { OpDefinition } from '../op.js';
import { compileClassifier, type ProbabilisticModel } from './classifier.js';
import { argmax, dot, gemv, vectorAttribute } from './vector.js';

export const logisticRegression: OpDefinition = {
  op: 'logistic_regression',
  className: 'LogisticRegression',
  compile(node: NodeSpec) {
    return compileClassifier(node, logisticModel(node));
  },
};

/** The binary or multinomial model of a logistic_regression folder (also a one_vs_rest child). */
export function logisticModel(spec: ModelSpec): ProbabilisticModel {
  return spec.attrs.integer('num_classes', 2) > 2 ? multinomialModel(spec) : binaryModel(spec);
}

const sigmoid = (m: number) => 1 / (1 + Math.exp(-m));

function binaryModel(node: ModelSpec): ProbabilisticModel {
  const coefficients = Float64Array.from(node.attrs.doubles('coefficients'));
  const intercept = node.attrs.double('intercept');
  const threshold = node.attrs.double('threshold', 0.5);
  const rawThreshold = threshold === 0 ? -Infinity : threshold === 1 ? Infinity : Math.log(threshold / (1 - threshold));
  const margin = (x: Tensor) => dot(x, coefficients) + intercept;
  return {
    numClasses: 2,
    numFeatures: coefficients.length,
    predictRaw(x) {
      const m = margin(x);
      return [-m, m];
    },
    rawToProbabilityInPlace(values) {
      for (let i = 0; i < values.length; i++) values[i] = sigmoid(values[i]!);
    },
    probabilityToPrediction: (probability) => (probability[1]! > threshold ? 1 : 0),
    rawToPrediction: (raw) => (raw[1]! > rawThreshold ? 1 : 0),
    predict: (x) => (sigmoid(margin(x)) > threshold ? 1 : 0),
  };
}

function multinomialModel(node: ModelSpec): ProbabilisticModel {
  const matrix = node.attrs.tensor('coefficient_matrix');
  if (matrix.dims.length !== 2) throw bundleError(`${node.path}: coefficient_matrix is not a matrix`);
  const [rows, cols] = matrix.dims as [number, number];
  const coefficients = vectorAttribute(matrix.values, rows * cols, `${node.path}: coefficient_matrix`);
  const intercepts = vectorAttribute(node.attrs.doubles('intercept_vector'), rows, `${node.path}: intercept_vector`);
  const thresholds = node.attrs.has('thresholds') ? Float64Array.from(node.attrs.doubles('thresholds')) : undefined;
  return {
    numClasses: rows,
    numFeatures: cols,
    thresholds,
    predictRaw(x) {
      const margins = new Array<number>(rows);
      gemv(coefficients, rows, x, intercepts, margins);
      return margins;
    },
    rawToProbabilityInPlace: softmaxInPlace,
  };
}

/** MLeap's multinomial softmax: shifted by the largest margin only when it is positive. */
function softmaxInPlace(values: number[]): void {
  const best = argmax(values);
  const max = values[best]!;
  if (max === Infinity) {
    for (let k = 0; k < values.length; k++) values[k] = k === best ? 1 : 0;
    return;
  }
  let sum = 0;
  for (let k = 0; k < values.length; k++) {
    values[k] = Math.exp(max > 0 ? values[k]! - max : values[k]!);
    sum += values[k]!;
  }
  const scale = 1 / sum;
  for (let k = 0; k < values.length; k++) values[k] *= scale;
}

