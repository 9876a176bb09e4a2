// generalized_linear_regression: eta = x · coefficients + intercept (link_prediction) and
// prediction = family.project(link⁻¹(eta)), with Spark's families, links and clamping.

import type { NodeSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import { DOUBLE, type Value } from '../../types.js';
import { outputOrder, type CompiledStage, type OpDefinition } from '../op.js';
import { normalCdf } from './special-functions.js';
import { dot, featureVector, featuresType, requireFeatures } from './vector.js';

const EPSILON = 1e-16;
const MAX = Number.MAX_VALUE;

/** Keeps a fitted mean inside the family's valid range. */
const PROJECT: Record<string, (mu: number) => number> = {
  gaussian: (mu) => (mu === -Infinity ? -MAX : mu === Infinity ? MAX : mu),
  binomial: (mu) => (mu < EPSILON ? EPSILON : mu > 1 - EPSILON ? 1 - EPSILON : mu),
  poisson: (mu) => (mu < EPSILON ? EPSILON : mu === Infinity || mu === -Infinity ? MAX : mu),
  gamma: (mu) => (mu < EPSILON ? EPSILON : mu === Infinity || mu === -Infinity ? MAX : mu),
};

const DEFAULT_LINK: Record<string, string> = { gaussian: 'identity', binomial: 'logit', poisson: 'log', gamma: 'inverse' };

const UNLINK: Record<string, (eta: number) => number> = {
  identity: (eta) => eta,
  logit: (eta) => 1 / (1 + Math.exp(-1 * eta)),
  log: (eta) => Math.exp(eta),
  inverse: (eta) => 1 / eta,
  probit: normalCdf,
  cloglog: (eta) => 1 - Math.exp(-1 * Math.exp(eta)),
  sqrt: (eta) => eta * eta,
};

export const generalizedLinearRegression: OpDefinition = {
  op: 'generalized_linear_regression',
  className: 'GeneralizedLinearRegression',
  compile(node: NodeSpec): CompiledStage {
    requireFeatures(node);
    const order = outputOrder(node, ['prediction', 'link_prediction']);
    const coefficients = Float64Array.from(node.attrs.doubles('coefficients'));
    const intercept = node.attrs.double('intercept');
    const family = node.attrs.string('family');
    const project = PROJECT[family];
    if (!project) throw bundleError(`${node.path}: unknown GLM family "${family}"`);
    const linkName = node.attrs.string('link', DEFAULT_LINK[family]) || DEFAULT_LINK[family]!;
    const unlink = UNLINK[linkName];
    if (!unlink) throw bundleError(`${node.path}: unknown GLM link "${linkName}"`);
    const size = coefficients.length;
    const where = node.path;
    return {
      inputs: [featuresType(size)],
      outputs: order.map(() => DOUBLE),
      run(args: Value[]): Value[] {
        const eta = dot(featureVector(args[0]!, size, where), coefficients) + intercept;
        const prediction = project(unlink(eta));
        return order.map((i) => (i === 0 ? prediction : eta));
      },
    };
  },
};
