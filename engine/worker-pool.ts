// The Piscina pools of the service, whose threads load task modules with import() only.
//
// Piscina loads a task module with require() first, and Node 20 lets require() load an ES module.
// When a thread is terminated during that synchronous load (a pool destroyed, or a thread
// replaced, while its threads are still starting), Node 20 aborts the whole process with a V8
// fatal error ("IsGraphAsync must be used on an instantiated module") instead of ending the
// thread. With require(esm) turned off in the pool's threads, that require() fails at once and
// Piscina falls back to import(), whose interruption ends only the thread.

import { Piscina } from 'piscina';

type PoolOptions = NonNullable<ConstructorParameters<typeof Piscina>[0]>;

/** Turns require(esm) off where it is on (Node 20.19 and later); earlier Node has no such flag. */
const WORKER_EXEC_ARGV: readonly string[] = process.features.require_module
  ? [...process.execArgv, '--no-experimental-require-module']
  : [...process.execArgv];

export function createWorkerPool(options: PoolOptions): Piscina {
  return new Piscina({ ...options, execArgv: [...WORKER_EXEC_ARGV] });
}
