// Predictors (regressions, classifiers, trees and ensembles, clustering).
import type { OpDefinition } from '../op.js';
import { linearRegression } from './linear-regression.js';

export const predictorOps: OpDefinition[] = [linearRegression];
