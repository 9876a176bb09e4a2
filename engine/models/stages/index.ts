// Every op the runtime supports, by op name. `pipeline` is handled by the pipeline compiler.

import { featureOps } from './features/index.js';
import type { OpDefinition } from './op.js';
import { predictorOps } from './predictors/index.js';

const definitions = new Map<string, OpDefinition>();
for (const def of [...featureOps, ...predictorOps]) {
  if (definitions.has(def.op)) throw new Error(`op ${def.op} is defined twice`);
  definitions.set(def.op, def);
}

export function opDefinition(op: string): OpDefinition | undefined {
  return definitions.get(op);
}

