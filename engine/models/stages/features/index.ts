// Feature transformers (string indexers, encoders, assemblers, scalers, text, ...).
import type { OpDefinition } from '../op.js';
import { binarizer, bucketizer, imputer } from './discretizers.js';
import { dct, polynomialExpansion } from './expansions.js';
import { hashingTermFrequency } from './hashing-tf.js';
import { interaction } from './interaction.js';
import { oneHotEncoder } from './one-hot-encoder.js';
import { mathBinary, mathUnary } from './math.js';
import { maxAbsScaler, minMaxScaler, standardScaler } from './scalers.js';
import { chiSqSelector, vectorIndexer, vectorSlicer } from './selectors.js';
import { reverseStringIndexer, stringIndexer } from './string-indexer.js';
import { countVectorizer, ngram, regexTokenizer, stopWordsRemover, tokenizer, wordFilter } from './text.js';
import { vectorAssembler } from './vector-assembler.js';
import { elementwiseProduct, idf, normalizer, pca } from './vector-ops.js';

export const featureOps: OpDefinition[] = [
  stringIndexer, oneHotEncoder, vectorAssembler, standardScaler,
  reverseStringIndexer, minMaxScaler, maxAbsScaler, binarizer, bucketizer, imputer, normalizer, pca, interaction,
  elementwiseProduct, tokenizer, regexTokenizer, hashingTermFrequency, countVectorizer, idf, ngram, stopWordsRemover,
  polynomialExpansion, dct, vectorSlicer, chiSqSelector, vectorIndexer, wordFilter, mathUnary, mathBinary,
];
