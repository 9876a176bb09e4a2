// Predictors (regressions, classifiers, trees and ensembles, clustering).
import type { OpDefinition } from '../op.js';
import { aftSurvivalRegression } from './aft-survival-regression.js';
import { bisectingKMeans } from './bisecting-k-means.js';
import { generalizedLinearRegression } from './glm.js';
import { kMeans } from './k-means.js';
import { isotonicRegression } from './isotonic-regression.js';
import { linearRegression } from './linear-regression.js';
import { logisticRegression } from './logistic-regression.js';
import { multiLayerPerceptronClassifier } from './multilayer-perceptron.js';
import { multinomialLabeler } from './multinomial-labeler.js';
import { naiveBayes } from './naive-bayes.js';
import { oneVsRest } from './one-vs-rest.js';
import { linearSvc, supportVectorMachine } from './svm.js';
import { treeOps } from './trees.js';

export const predictorOps: OpDefinition[] = [
  linearRegression,
  logisticRegression,
  generalizedLinearRegression,
  isotonicRegression,
  ...treeOps,
  naiveBayes,
  linearSvc,
  supportVectorMachine,
  kMeans,
  oneVsRest,
  multiLayerPerceptronClassifier,
  aftSurvivalRegression,
  bisectingKMeans,
  multinomialLabeler,
];
