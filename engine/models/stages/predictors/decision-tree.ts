// A decision tree from MLeap's tree.json (newline-delimited JSON nodes in pre-order: node,
// left subtree, right subtree), flattened into typed arrays so a row walks it with a loop:
// the left child of node i is node i + 1, the right child is `right[i]`.
//   continuous split: left when x[feature] <= threshold
//   categorical split: left when x[feature] ∈ categories (isLeft) or ∉ categories (!isLeft)

import type { ModelSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import type { Tensor } from '../../types.js';
import { element } from './vector.js';

const LEAF = 0;
const CONTINUOUS = 1;
const CATEGORICAL_LEFT = 2;
const CATEGORICAL_RIGHT = 3;

export interface DecisionTree {
  kind: Uint8Array;
  feature: Int32Array;
  threshold: Float64Array;
  right: Int32Array;
  /** Categorical splits: categories[start[i] .. start[i] + count[i]]; leaves: values likewise. */
  start: Int32Array;
  count: Int32Array;
  categories: Float64Array;
  values: Float64Array;
  /** Largest feature index any split reads. */
  maxFeature: number;
}

interface RawNode {
  type?: unknown;
  values?: unknown;
  split?: { type?: unknown; featureIndex?: unknown; threshold?: unknown; categories?: unknown; isLeft?: unknown };
}

/** Reads `tree.json` of a model folder. */
export function readTree(model: ModelSpec): DecisionTree {
  return parseTree(model.text('tree.json'), `${model.path}/tree.json`);
}

function parseTree(text: string, where: string): DecisionTree {
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  const n = lines.length;
  if (n === 0) throw bundleError(`${where}: empty tree`);
  const tree: DecisionTree = {
    kind: new Uint8Array(n),
    feature: new Int32Array(n),
    threshold: new Float64Array(n),
    right: new Int32Array(n).fill(-1),
    start: new Int32Array(n),
    count: new Int32Array(n),
    categories: new Float64Array(0),
    values: new Float64Array(0),
    maxFeature: -1,
  };
  const categories: number[] = [];
  const values: number[] = [];
  // Internal nodes still waiting for a child: the flag says whether the left one is done.
  const open: { index: number; leftDone: boolean }[] = [];
  for (let i = 0; i < n; i++) {
    if (i > 0) {
      const parent = open[open.length - 1];
      if (!parent) throw bundleError(`${where}: nodes after the end of the tree (line ${i + 1})`);
      if (parent.leftDone) {
        tree.right[parent.index] = i;
        open.pop();
      } else {
        parent.leftDone = true;
      }
    }
    const node = parseLine(lines[i]!, where, i);
    if (node.type === 'leaf') {
      const leafValues = numbers(node.values, where, i);
      tree.kind[i] = LEAF;
      tree.start[i] = values.length;
      tree.count[i] = leafValues.length;
      values.push(...leafValues);
      continue;
    }
    if (node.type !== 'internal' || !node.split) throw bundleError(`${where}: line ${i + 1} is neither a leaf nor an internal node`);
    const split = node.split;
    const feature = split.featureIndex;
    if (typeof feature !== 'number' || !Number.isInteger(feature) || feature < 0) {
      throw bundleError(`${where}: line ${i + 1} has no valid featureIndex`);
    }
    tree.feature[i] = feature;
    tree.maxFeature = Math.max(tree.maxFeature, feature);
    if (split.type === 'continuous') {
      if (typeof split.threshold !== 'number') throw bundleError(`${where}: line ${i + 1} has no threshold`);
      tree.kind[i] = CONTINUOUS;
      tree.threshold[i] = split.threshold;
    } else if (split.type === 'categorical') {
      const cats = numbers(split.categories ?? [], where, i);
      tree.kind[i] = split.isLeft === true ? CATEGORICAL_LEFT : CATEGORICAL_RIGHT;
      tree.start[i] = categories.length;
      tree.count[i] = cats.length;
      categories.push(...cats);
    } else {
      throw bundleError(`${where}: line ${i + 1} has an unknown split type`);
    }
    open.push({ index: i, leftDone: false });
  }
  if (open.length > 0) throw bundleError(`${where}: the tree ends before all its subtrees`);
  tree.categories = Float64Array.from(categories);
  tree.values = Float64Array.from(values);
  return tree;
}

/** Index of the leaf `x` falls in. */
export function leafIndex(tree: DecisionTree, x: Tensor): number {
  const { kind, feature, threshold, right, start, count, categories } = tree;
  const dense = x.kind === 'dense';
  const xs = x.values;
  let i = 0;
  for (;;) {
    const k = kind[i]!;
    if (k === LEAF) return i;
    const v = dense ? xs[feature[i]!]! : element(x, feature[i]!);
    let left: boolean;
    if (k === CONTINUOUS) {
      left = v <= threshold[i]!;
    } else {
      let found = false;
      const end = start[i]! + count[i]!;
      for (let c = start[i]!; c < end; c++) {
        if (categories[c] === v) {
          found = true;
          break;
        }
      }
      left = k === CATEGORICAL_LEFT ? found : !found;
    }
    i = left ? i + 1 : right[i]!;
  }
}

/** First value of the leaf (a regression tree's prediction; see `minLeafSize`). */
export function leafPrediction(tree: DecisionTree, x: Tensor): number {
  return tree.values[tree.start[leafIndex(tree, x)]!]!;
}

/** Minimum number of values over the leaves. */
export function minLeafSize(tree: DecisionTree): number {
  let min = Infinity;
  for (let i = 0; i < tree.kind.length; i++) if (tree.kind[i] === LEAF) min = Math.min(min, tree.count[i]!);
  return min;
}

function parseLine(line: string, where: string, i: number): RawNode {
  try {
    const node = JSON.parse(line) as unknown;
    if (typeof node === 'object' && node !== null && !Array.isArray(node)) return node as RawNode;
  } catch {
    // reported below
  }
  throw bundleError(`${where}: line ${i + 1} is not a JSON object`);
}

function numbers(raw: unknown, where: string, i: number): number[] {
  if (!Array.isArray(raw) || !raw.every((v) => typeof v === 'number')) {
    throw bundleError(`${where}: line ${i + 1} has a non-numeric list`);
  }
  return raw as number[];
}
