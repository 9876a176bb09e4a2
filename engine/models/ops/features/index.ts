// Feature transformers (string indexers, encoders, assemblers, scalers, text, ...).
import type { OpDefinition } from '../op.js';
import { oneHotEncoder } from './one-hot-encoder.js';
import { standardScaler } from './scalers.js';
import { stringIndexer } from './string-indexer.js';
import { vectorAssembler } from './vector-assembler.js';

export const featureOps: OpDefinition[] = [stringIndexer, oneHotEncoder, vectorAssembler, standardScaler];
