// The output plumbing MLeap shares between probabilistic classifiers. Which outputs a node
// binds decides how the prediction is derived, exactly as MLeap's transformers do:
//   raw + probability: raw → probability → prediction from the probability
//   raw only:          raw → prediction from raw (argmax, or via probability with thresholds)
//   probability only:  probability → prediction from the probability
//   neither:           the model's own `predict`
// With thresholds, the prediction is the argmax of probability[i] / thresholds[i] (a zero
// threshold scores +Infinity), over as many classes as there are thresholds.

import type { NodeSpec } from '../../bundle/spec.js';
import { DOUBLE, dense, tensor, type Tensor, type Value } from '../../types.js';
import { outputOrder, type CompiledStage } from '../op.js';
import { argmax, featureVector, featuresType, requireFeatures } from './vector.js';

export interface ProbabilisticModel {
  numClasses: number;
  numFeatures: number;
  thresholds?: Float64Array;
  /** A fresh raw-prediction array for the features. */
  predictRaw(x: Tensor): number[];
  /** Turns raw predictions into probabilities in place. */
  rawToProbabilityInPlace(values: number[]): void;
  /** Overrides of the default derivations (binary models with a single threshold). */
  probabilityToPrediction?(probability: number[]): number;
  rawToPrediction?(raw: number[]): number;
  predict?(x: Tensor): number;
}

const CLASSIFIER_PORTS = ['prediction', 'raw_prediction', 'probability'] as const;

/** Prediction from probabilities, honouring thresholds (MLeap's `probabilityToPredictionIndex`). */
function thresholdedArgmax(probability: number[], thresholds: Float64Array | undefined): number {
  if (!thresholds) return argmax(probability);
  const n = Math.min(probability.length, thresholds.length);
  let best = 0;
  let max = -Infinity;
  for (let i = 0; i < n; i++) {
    const s = thresholds[i] === 0 ? Infinity : probability[i]! / thresholds[i]!;
    if (i === 0 || s > max) {
      max = s;
      best = i;
    }
  }
  return best;
}

export function compileClassifier(node: NodeSpec, model: ProbabilisticModel, ports: readonly string[] = CLASSIFIER_PORTS): CompiledStage {
  requireFeatures(node);
  const order = outputOrder(node, ports);
  const where = node.path;
  const size = model.numFeatures;
  const hasRaw = node.output('raw_prediction') !== undefined;
  const hasProbability = node.output('probability') !== undefined;
  const { thresholds } = model;
  const probabilityToPrediction =
    model.probabilityToPrediction?.bind(model) ?? ((p: number[]) => thresholdedArgmax(p, thresholds));
  const rawToPrediction =
    model.rawToPrediction?.bind(model) ??
    ((raw: number[]) => {
      if (!thresholds) return argmax(raw);
      const p = raw.slice();
      model.rawToProbabilityInPlace(p);
      return thresholdedArgmax(p, thresholds);
    });
  const predict =
    model.predict?.bind(model) ??
    ((x: Tensor) => {
      const p = model.predictRaw(x);
      model.rawToProbabilityInPlace(p);
      return probabilityToPrediction(p);
    });
  const vectorType = tensor('double', [model.numClasses]);
  const types = [DOUBLE, vectorType, vectorType];

  // Values by port index: [prediction, raw_prediction, probability].
  let compute: (x: Tensor) => Value[];
  if (hasRaw && hasProbability) {
    compute = (x) => {
      const raw = model.predictRaw(x);
      const probability = raw.slice();
      model.rawToProbabilityInPlace(probability);
      return [probabilityToPrediction(probability), dense(raw), dense(probability)];
    };
  } else if (hasRaw) {
    compute = (x) => {
      const raw = model.predictRaw(x);
      return [rawToPrediction(raw), dense(raw)];
    };
  } else if (hasProbability) {
    compute = (x) => {
      const probability = model.predictRaw(x);
      model.rawToProbabilityInPlace(probability);
      const prediction = probabilityToPrediction(probability);
      return [prediction, 0, dense(probability)]; // raw_prediction is not bound
    };
  } else {
    compute = (x) => [predict(x)];
  }
  return {
    inputs: [featuresType(size)],
    outputs: order.map((i) => types[i]!),
    run(args: Value[]): Value[] {
      const all = compute(featureVector(args[0]!, size, where));
      return order.map((i) => all[i]!);
    },
  };
}
