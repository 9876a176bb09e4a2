// Predictors (regressions, classifiers, trees and ensembles, clustering).
import type { OpDefinition } from '../op.js';

export const predictorOps: OpDefinition[] = [];
