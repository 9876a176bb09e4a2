import { Worker } from 'node:worker_threads';
import { type BenchResult, MiB, runGroup } from './harness.js';

const SEGMENT = 1 * MiB;

/**
 * The worker touches the first and last byte (proving it can read the segment) and replies.
 * A transferred buffer is transferred back so the main thread owns it again for the next round,
 * as the engine recycles its segments.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', (msg) => {
  if (msg === 0) return parentPort.postMessage(0);
  const [mode, buf] = msg;
  const v = new Uint8Array(buf);
  const probe = v[0] ^ v[v.length - 1];
  if (mode === 'transfer') parentPort.postMessage(buf, [buf]);
  else parentPort.postMessage(probe);
});
`;

/**
 * Round trips to a worker thread carrying a 1 MiB segment: structured-clone copy of an
 * ArrayBuffer, transfer of an ArrayBuffer (and back), and a SharedArrayBuffer (what
 * engine/cas/block-task.ts receives). An empty message gives the fixed messaging cost.
 */
export async function benchHandoff(): Promise<BenchResult[]> {
  const worker = new Worker(WORKER_SOURCE, { eval: true });
  let pending: ((reply: unknown) => void) | undefined;
  worker.on('message', (reply: unknown) => {
    const resolve = pending;
    pending = undefined;
    resolve?.(reply);
  });
  const failed = new Promise<never>((_, reject) => worker.once('error', reject));
  failed.catch(() => {});
  const roundTrip = (msg: unknown, transfer?: ArrayBuffer[]) =>
    Promise.race([
      new Promise<unknown>((resolve) => {
        pending = resolve;
        worker.postMessage(msg, transfer);
      }),
      failed,
    ]);

  const fill = <T extends ArrayBufferLike>(u8: Uint8Array<T>): Uint8Array<T> => {
    for (let i = 0; i < u8.length; i += 4096) u8[i] = i & 0xff;
    u8[u8.length - 1] = 0x5a;
    return u8;
  };
  const copyBuf = fill(new Uint8Array(new ArrayBuffer(SEGMENT))).buffer;
  let transferBuf: ArrayBuffer = fill(new Uint8Array(new ArrayBuffer(SEGMENT))).buffer;
  const shared = fill(new Uint8Array(new SharedArrayBuffer(SEGMENT))).buffer;
  const expectProbe = (reply: unknown) => {
    if (reply !== 0x5a) throw new Error(`worker read ${String(reply)}, expected ${0x5a}`);
  };

  try {
    await roundTrip(0);
    return await runGroup('worker handoff', [
      { name: 'postMessage round trip, empty message', async: true, fn: () => roundTrip(0) },
      {
        name: 'hand 1 MiB to worker: ArrayBuffer copy (structured clone)',
        async: true,
        bytesPerOp: SEGMENT,
        units: ['ops/s', 'MB/s'],
        fn: async () => expectProbe(await roundTrip(['copy', copyBuf])),
      },
      {
        name: 'hand 1 MiB to worker: ArrayBuffer transfer (and back)',
        async: true,
        bytesPerOp: SEGMENT,
        units: ['ops/s', 'MB/s'],
        fn: async () => {
          const back = await roundTrip(['transfer', transferBuf], [transferBuf]);
          if (!(back instanceof ArrayBuffer) || back.byteLength !== SEGMENT) throw new Error('transfer did not come back');
          transferBuf = back;
        },
      },
      {
        name: 'hand 1 MiB to worker: SharedArrayBuffer (shared)',
        async: true,
        bytesPerOp: SEGMENT,
        units: ['ops/s', 'MB/s'],
        fn: async () => expectProbe(await roundTrip(['shared', shared])),
      },
    ]);
  } finally {
    await worker.terminate();
  }
}
