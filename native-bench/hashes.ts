import { createHash, randomFillSync } from 'node:crypto';
import { xxh3, xxh64 } from '@node-rs/xxhash';
import { createBLAKE3, createSHA256, createXXHash3 } from 'hash-wasm';
import { type BenchCase, type BenchResult, MiB, prewarm, runGroup } from './harness.js';

/**
 * Whole-buffer digests over 1 MiB and 4 MiB of random bytes. SHA-256 names blocks and whole
 * objects; xxh64 is the per-block checksum stored in manifests (engine/cas/block-task.ts).
 */
export async function benchHashes(): Promise<BenchResult[]> {
  const wasmSha256 = await createSHA256();
  const wasmBlake3 = await createBLAKE3();
  const wasmXxh3 = await createXXHash3();
  const cases: BenchCase[] = [];
  for (const size of [1 * MiB, 4 * MiB]) {
    const buf = randomFillSync(Buffer.allocUnsafe(size));
    const label = `${size / MiB} MiB`;
    cases.push(
      { name: `sha256 node:crypto ${label}`, bytesPerOp: size, fn: () => createHash('sha256').update(buf).digest() },
      { name: `sha256 hash-wasm ${label}`, bytesPerOp: size, fn: () => wasmSha256.init().update(buf).digest('binary') },
      { name: `blake3 hash-wasm ${label}`, bytesPerOp: size, fn: () => wasmBlake3.init().update(buf).digest('binary') },
      { name: `xxh3-64 hash-wasm ${label}`, bytesPerOp: size, fn: () => wasmXxh3.init().update(buf).digest('binary') },
      { name: `xxh64 @node-rs/xxhash ${label}`, bytesPerOp: size, fn: () => xxh64(buf) },
      { name: `xxh3.xxh64 @node-rs/xxhash ${label}`, bytesPerOp: size, fn: () => xxh3.xxh64(buf) },
    );
  }
  // Cross-check that the two SHA-256 implementations agree before timing them.
  const probe = randomFillSync(Buffer.allocUnsafe(4096));
  if (createHash('sha256').update(probe).digest('hex') !== wasmSha256.init().update(probe).digest('hex')) {
    throw new Error('node:crypto and hash-wasm SHA-256 disagree');
  }
  // Let V8 tier the wasm code up before anything is timed (see prewarm).
  const warmBuf = randomFillSync(Buffer.allocUnsafe(1 * MiB));
  for (const hasher of [wasmSha256, wasmBlake3, wasmXxh3]) prewarm(() => hasher.init().update(warmBuf).digest('binary'), 250);
  return runGroup('hashing', cases);
}
