// Decision trees and their ensembles: decision_tree_regression / _classifier,
// random_forest_regression / _classifier, gbt_regression / gbt_classifier.
// Ensemble trees are child model folders (tree0, tree1, ...) named by the `trees` attribute.

import type { ModelSpec, NodeSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import { DOUBLE, type Tensor, type Value } from '../../types.js';
import { outputOrder, type CompiledStage, type OpDefinition } from '../op.js';
import { compileClassifier, type ProbabilisticModel } from './classifier.js';
import { leafIndex, leafPrediction, minLeafSize, readTree, type DecisionTree } from './decision-tree.js';
import { featureVector, featuresType, requireFeatures } from './vector.js';

function checkedTree(model: ModelSpec, numFeatures: number, minValues: number): DecisionTree {
  const tree = readTree(model);
  if (tree.maxFeature >= numFeatures) {
    throw bundleError(`${model.path}: a split reads feature ${tree.maxFeature} of ${numFeatures}`);
  }
  if (minLeafSize(tree) < minValues) throw bundleError(`${model.path}: a leaf has fewer than ${minValues} values`);
  return tree;
}

function childTrees(node: NodeSpec, numFeatures: number, minValues: number): DecisionTree[] {
  const names = node.attrs.strings('trees');
  if (names.length === 0) throw bundleError(`${node.path}: ensemble without trees`);
  return names.map((name) => checkedTree(node.child(name), numFeatures, minValues));
}

function treeWeights(node: NodeSpec, count: number): Float64Array {
  const weights = node.attrs.doubles('tree_weights');
  if (weights.length !== count) throw bundleError(`${node.path}: ${weights.length} tree weights for ${count} trees`);
  return Float64Array.from(weights);
}

function thresholds(node: NodeSpec): Float64Array | undefined {
  return node.attrs.has('thresholds') ? Float64Array.from(node.attrs.doubles('thresholds')) : undefined;
}

/** A stage with one `prediction` output computed from the feature vector. */
function regressionStage(node: NodeSpec, numFeatures: number, predict: (x: Tensor) => number): CompiledStage {
  requireFeatures(node);
  outputOrder(node, ['prediction']);
  const where = node.path;
  return {
    inputs: [featuresType(numFeatures)],
    outputs: node.outputs.map(() => DOUBLE),
    run: (args: Value[]) => [predict(featureVector(args[0]!, numFeatures, where))],
  };
}

/** Scales values to sum 1, left alone when they sum to 0 (MLeap's normalizeToProbabilitiesInPlace). */
function normalizeInPlace(values: number[]): void {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i]!;
  if (sum === 0) return;
  for (let i = 0; i < values.length; i++) values[i] /= sum;
}

const decisionTreeRegression: OpDefinition = {
  op: 'decision_tree_regression',
  className: 'DecisionTreeRegression',
  compile(node) {
    const numFeatures = node.attrs.integer('num_features');
    const tree = checkedTree(node, numFeatures, 1);
    return regressionStage(node, numFeatures, (x) => leafPrediction(tree, x));
  },
};

const decisionTreeClassifier: OpDefinition = {
  op: 'decision_tree_classifier',
  className: 'DecisionTreeClassifier',
  compile(node) {
    const numFeatures = node.attrs.integer('num_features');
    const numClasses = node.attrs.integer('num_classes');
    const tree = checkedTree(node, numFeatures, numClasses);
    const model: ProbabilisticModel = {
      numClasses,
      numFeatures,
      thresholds: thresholds(node),
      predictRaw(x) {
        const leaf = leafIndex(tree, x);
        const start = tree.start[leaf]!;
        return Array.from(tree.values.subarray(start, start + tree.count[leaf]!));
      },
      rawToProbabilityInPlace: normalizeInPlace,
    };
    return compileClassifier(node, model);
  },
};

const randomForestRegression: OpDefinition = {
  op: 'random_forest_regression',
  className: 'RandomForestRegression',
  compile(node) {
    const numFeatures = node.attrs.integer('num_features');
    const trees = childTrees(node, numFeatures, 1);
    return regressionStage(node, numFeatures, (x) => {
      let sum = 0;
      for (let t = 0; t < trees.length; t++) sum += leafPrediction(trees[t]!, x);
      return sum / trees.length;
    });
  },
};

const randomForestClassifier: OpDefinition = {
  op: 'random_forest_classifier',
  className: 'RandomForestClassifier',
  compile(node) {
    const numFeatures = node.attrs.integer('num_features');
    const numClasses = node.attrs.integer('num_classes');
    const trees = childTrees(node, numFeatures, numClasses);
    const model: ProbabilisticModel = {
      numClasses,
      numFeatures,
      thresholds: thresholds(node),
      // Sum over trees of each tree's normalised leaf counts; a leaf counting nothing adds nothing.
      predictRaw(x) {
        const votes = new Array<number>(numClasses).fill(0);
        for (let t = 0; t < trees.length; t++) {
          const tree = trees[t]!;
          const leaf = leafIndex(tree, x);
          const start = tree.start[leaf]!;
          const end = start + tree.count[leaf]!;
          let total = 0;
          for (let i = start; i < end; i++) total += tree.values[i]!;
          if (total === 0) continue;
          for (let c = 0; c < numClasses; c++) votes[c] += tree.values[start + c]! / total;
        }
        return votes;
      },
      rawToProbabilityInPlace: normalizeInPlace,
    };
    return compileClassifier(node, model);
  },
};

/** Σ wᵢ · treeᵢ(x), in tree order. */
function weightedSum(trees: DecisionTree[], weights: Float64Array, x: Tensor): number {
  let sum = 0;
  for (let t = 0; t < trees.length; t++) sum += leafPrediction(trees[t]!, x) * weights[t]!;
  return sum;
}

const gbtRegression: OpDefinition = {
  op: 'gbt_regression',
  className: 'GBTRegression',
  compile(node) {
    const numFeatures = node.attrs.integer('num_features');
    const trees = childTrees(node, numFeatures, 1);
    const weights = treeWeights(node, trees.length);
    return regressionStage(node, numFeatures, (x) => weightedSum(trees, weights, x));
  },
};

export const gbtClassifier: OpDefinition = {
  op: 'gbt_classifier',
  className: 'GBTClassifier',
  compile(node) {
    const numClasses = node.attrs.integer('num_classes', 2);
    if (numClasses !== 2) throw bundleError(`${node.path}: gbt_classifier supports 2 classes, not ${numClasses}`);
    const numFeatures = node.attrs.integer('num_features');
    const trees = childTrees(node, numFeatures, 1);
    const weights = treeWeights(node, trees.length);
    const classThresholds = thresholds(node);
    const model: ProbabilisticModel = {
      numClasses: 2,
      numFeatures,
      thresholds: classThresholds,
      predictRaw(x) {
        const m = weightedSum(trees, weights, x);
        return [-m, m];
      },
      // Log loss: P(class 0) = 1 / (1 + e^(−2·raw₀)), P(class 1) = 1 − P(class 0).
      rawToProbabilityInPlace(values) {
        values[0] = 1 / (1 + Math.exp(-2 * values[0]!));
        values[1] = 1 - values[0];
      },
    };
    if (!classThresholds) model.predict = (x) => (weightedSum(trees, weights, x) > 0 ? 1 : 0);
    return compileClassifier(node, model);
  },
};

export const treeOps: OpDefinition[] = [
  decisionTreeRegression,
  decisionTreeClassifier,
  randomForestRegression,
  randomForestClassifier,
  gbtRegression,
  gbtClassifier,
];
