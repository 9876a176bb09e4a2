import { randomFillSync } from 'node:crypto';
import { type BenchResult, MiB, runGroup } from './harness.js';

/** Plain 1 MiB memory copies: the reference every other byte-processing rate compares to. */
export async function benchMemcopy(): Promise<BenchResult[]> {
  const src = randomFillSync(Buffer.allocUnsafe(1 * MiB));
  const dst = Buffer.allocUnsafe(1 * MiB);
  const srcU8 = new Uint8Array(src.buffer, src.byteOffset, src.length);
  const dstU8 = new Uint8Array(new ArrayBuffer(1 * MiB));
  return runGroup('memory copy', [
    { name: 'memcpy 1 MiB: Buffer.copy', bytesPerOp: 1 * MiB, fn: () => src.copy(dst) },
    { name: 'memcpy 1 MiB: Uint8Array.set', bytesPerOp: 1 * MiB, fn: () => dstU8.set(srcU8) },
  ]);
}
