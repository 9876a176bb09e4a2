import { randomFillSync } from 'node:crypto';
import { copyInto, nativeSharedCopy } from '../engine/cas/shared-copy.js';
import { type BenchResult, MiB, runGroup } from './harness.js';

/** Receive-buffer-sized pieces, as uWS hands a body over. */
const PIECE = 64 * 1024;

/**
 * Plain 1 MiB memory copies: the reference every other byte-processing rate compares to; then
 * 1 MiB into shared memory in 64 KiB pieces, as an upload's body goes into its segments, with
 * V8's copy and with native/shared-copy.c's memcpy (when built).
 */
export async function benchMemcopy(): Promise<BenchResult[]> {
  const src = randomFillSync(Buffer.allocUnsafe(1 * MiB));
  const dst = Buffer.allocUnsafe(1 * MiB);
  const srcU8 = new Uint8Array(src.buffer, src.byteOffset, src.length);
  const dstU8 = new Uint8Array(new ArrayBuffer(1 * MiB));
  const shared = new Uint8Array(new WebAssembly.Memory({ initial: 16, maximum: 16, shared: true }).buffer);
  const intoShared = (copy: (target: Uint8Array, at: number, source: Uint8Array) => void) => () => {
    for (let at = 0; at < MiB; at += PIECE) copy(shared, at, srcU8.subarray(at, at + PIECE));
  };
  const cases = [
    { name: 'memcpy 1 MiB: Buffer.copy', bytesPerOp: 1 * MiB, fn: () => void src.copy(dst) },
    { name: 'memcpy 1 MiB: Uint8Array.set', bytesPerOp: 1 * MiB, fn: () => dstU8.set(srcU8) },
    { name: 'into shared memory 1 MiB: Uint8Array.set', bytesPerOp: 1 * MiB, fn: intoShared((t, at, s) => t.set(s, at)) },
  ];
  if (nativeSharedCopy) cases.push({ name: 'into shared memory 1 MiB: native copy', bytesPerOp: 1 * MiB, fn: intoShared(copyInto) });
  return runGroup('memory copy', cases);
}
