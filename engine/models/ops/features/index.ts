// Feature transformers (string indexers, encoders, assemblers, scalers, text, ...).
import type { OpDefinition } from '../op.js';

export const featureOps: OpDefinition[] = [];
