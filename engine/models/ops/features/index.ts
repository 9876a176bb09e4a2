// Feature transformers (string indexers, encoders, assemblers, scalers, text, ...).
import type { OpDefinition } from '../op.js';
import { binarizer, bucketizer, imputer } from './discretizers.js';
import { hashingTermFrequency } from './hashing-tf.js';
import { interaction } from './interaction.js';
import { oneHotEncoder } from './one-hot-encoder.js';
import { maxAbsScaler, minMaxScaler, standardScaler } from './scalers.js';
import { reverseStringIndexer, stringIndexer } from './string-indexer.js';
import { countVectorizer, ngram, regexTokenizer, stopWordsRemover, tokenizer } from './text.js';
import { vectorAssembler } from './vector-assembler.js';
import { elementwiseProduct, idf, normalizer, pca } from './vector-ops.js';

export const featureOps: OpDefinition[] = [
  stringIndexer, oneHotEncoder, vectorAssembler, standardScaler,
  reverseStringIndexer, minMaxScaler, maxAbsScaler, binarizer, bucketizer, imputer, normalizer, pca, interaction,
  elementwiseProduct, tokenizer, regexTokenizer, hashingTermFrequency, countVectorizer, idf, ngram, stopWordsRemover,
];
