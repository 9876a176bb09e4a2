// Destroys pools of the service while their threads are still loading a task module: the model
// runtime's (the largest module graph), at delays around the time a thread takes to be ready,
// measured again every few rounds to follow the machine's load. Prints `ok ...` when it lives.
import { createWorkerPool } from '../../dist/engine/worker-pool.js';

const MODULE = new URL('../../dist/workers/model.js', import.meta.url).href;
const PROBE = new URL('./pool-tasks.mjs', import.meta.url).href;
const ROUNDS = Number(process.argv[2] ?? 100);
const THREADS = 2;

function startPool() {
  return createWorkerPool({ filename: MODULE, minThreads: THREADS, maxThreads: THREADS });
}

/** Until both threads have loaded the module and answered a task. */
async function readyMs() {
  const started = performance.now();
  const pool = startPool();
  await Promise.all(Array.from({ length: THREADS }, () => pool.run(null, { filename: PROBE, name: 'moduleLoading' })));
  const ms = performance.now() - started;
  await pool.destroy();
  return ms;
}

let ready = 0;
for (let round = 0; round < ROUNDS; round++) {
  if (round % 25 === 0) ready = await readyMs();
  const pool = startPool();
  await new Promise((resolve) => setTimeout(resolve, ready * (0.6 + 0.5 * Math.random())));
  await pool.destroy();
}
console.log(`ok: ${ROUNDS} pools destroyed while loading (threads ready in ${ready.toFixed(0)} ms)`);
