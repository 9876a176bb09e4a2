// The service's worker pools (engine/worker-pool): their threads load task modules with import(),
// so a pool destroyed while its threads are still starting ends those threads, not the process.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { createWorkerPool } from '../dist/engine/worker-pool.js';

const TASKS = new URL('./helpers/pool-tasks.mjs', import.meta.url).href;

test('pool threads run with require(esm) off, so Piscina imports their task modules', async () => {
  const pool = createWorkerPool({ filename: TASKS, minThreads: 1, maxThreads: 1 });
  try {
    const seen = await pool.run(null, { name: 'moduleLoading' });
    expect(seen).toEqual({ requireModule: false, loadedByRequire: false });
  } finally {
    await pool.destroy();
  }
});

test('destroying pools while their threads load a task module never aborts the process', () => {
  const child = spawnSync(process.execPath, [fileURLToPath(new URL('./helpers/pool-teardown.mjs', import.meta.url))], { encoding: 'utf8', timeout: 90_000 });
  // Node 20's require(esm) interrupted by a thread's termination aborts with SIGABRT and a V8 fatal error.
  expect({ status: child.status, signal: child.signal, fatal: /FATAL ERROR.*/.exec(child.stderr)?.[0] ?? null }).toEqual({ status: 0, signal: null, fatal: null });
  expect(child.stdout).toMatch(/^ok: 100 pools destroyed while loading/);
}, 120_000);
