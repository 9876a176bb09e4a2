// bisecting_k_means: a tree of cluster centres in tree.json (pre-order, one JSON object per
// line: {index, norm, values, numChildren}); a point descends to the child centre nearest by
// fastSquaredDistance (first on ties) and is assigned the leaf's index, as an int.

import type { NodeSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import { scalar, type Value } from '../../types.js';
import { outputOrder, type CompiledStage, type OpDefinition } from '../op.js';
import { fastSquaredDistance, norm2, type Centre } from './k-means.js';
import { featureVector, featuresType, requireFeatures } from './vector.js';

interface ClusterNode {
  index: number;
  centre: Centre;
  children: number[];
}

function parseClusterTree(text: string, where: string): ClusterNode[] {
  const nodes: ClusterNode[] = [];
  // Nodes still expecting children, with how many they still expect.
  const open: { node: ClusterNode; remaining: number }[] = [];
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  for (const [i, line] of lines.entries()) {
    let raw: { index?: unknown; norm?: unknown; values?: unknown; numChildren?: unknown };
    try {
      raw = JSON.parse(line) as typeof raw;
    } catch {
      throw bundleError(`${where}: line ${i + 1} is not JSON`);
    }
    const values = raw.values;
    if (typeof raw.index !== 'number' || !Array.isArray(values) || !values.every((v) => typeof v === 'number')) {
      throw bundleError(`${where}: line ${i + 1} is not a cluster node`);
    }
    const numChildren = typeof raw.numChildren === 'number' ? raw.numChildren : 0;
    const norm = typeof raw.norm === 'number' ? raw.norm : norm2(values as number[]);
    const node: ClusterNode = { index: raw.index, centre: { values: Float64Array.from(values as number[]), norm }, children: [] };
    if (i > 0) {
      const parent = open[open.length - 1];
      if (!parent) throw bundleError(`${where}: nodes after the end of the tree (line ${i + 1})`);
      parent.node.children.push(nodes.length);
      if (--parent.remaining === 0) open.pop();
    }
    nodes.push(node);
    if (numChildren > 0) open.push({ node, remaining: numChildren });
  }
  if (nodes.length === 0 || open.length > 0) throw bundleError(`${where}: incomplete cluster tree`);
  return nodes;
}

export const bisectingKMeans: OpDefinition = {
  op: 'bisecting_k_means',
  className: 'BisectingKMeans',
  compile(node: NodeSpec): CompiledStage {
    requireFeatures(node);
    outputOrder(node, ['prediction']);
    const nodes = parseClusterTree(node.text('tree.json'), `${node.path}/tree.json`);
    const size = nodes[0]!.centre.values.length;
    if (nodes.some((n) => n.centre.values.length !== size)) throw bundleError(`${node.path}: cluster centres of different sizes`);
    const where = node.path;
    return {
      inputs: [featuresType(size)],
      outputs: node.outputs.map(() => scalar('int')),
      run(args: Value[]): Value[] {
        const x = featureVector(args[0]!, size, where);
        const xNorm = norm2(x.values);
        let current = nodes[0]!;
        while (current.children.length > 0) {
          let best = current.children[0]!;
          let bestCost = Infinity;
          for (const child of current.children) {
            const cost = fastSquaredDistance(nodes[child]!.centre, x, xNorm);
            if (cost < bestCost) {
              bestCost = cost;
              best = child;
            }
          }
          current = nodes[best]!;
        }
        return [current.index];
      },
    };
  },
};
