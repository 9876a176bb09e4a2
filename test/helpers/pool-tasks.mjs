// Task module of test/worker-pool.test.ts.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** Whether require(esm) is on in this thread, and whether this module went through require(). */
export function moduleLoading() {
  return { requireModule: process.features.require_module, loadedByRequire: require.cache[new URL(import.meta.url).pathname] !== undefined };
}
