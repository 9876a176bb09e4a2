import { createHash, randomFillSync } from 'node:crypto';
import { xxh3, xxh64 } from '@node-rs/xxhash';
import { createBLAKE3, createSHA256, createXXHash3 } from 'hash-wasm';
import { loadSha256Pair, newState } from '../engine/cas/sha256-pair.js';
import { type BenchCase, type BenchResult, MiB, prewarm, runGroup } from './harness.js';

/**
 * Whole-buffer digests over 1 MiB and 4 MiB of random bytes. SHA-256 names blocks and whole
 * objects; xxh64 is the per-block checksum stored in manifests (engine/cas/block-task.ts).
 * Every ingested byte is hashed into both an object and a block: "x2" cases hash the buffer into
 * two SHA-256 states (the second from byte 17 on, as a block starts anywhere), so their MB/s
 * counts the buffer once: node:crypto twice against the native pair (native/sha256-pair.c).
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
      {
        name: `sha256 x2 node:crypto ${label}`,
        bytesPerOp: size,
        fn: () => {
          createHash('sha256').update(buf).digest();
          createHash('sha256').update(buf.subarray(17)).digest();
        },
      },
    );
    const pair = loadSha256Pair();
    if (pair) {
      const a = newState(pair);
      const b = newState(pair);
      cases.push({
        name: `sha256 x2 native pair ${label}`,
        bytesPerOp: size,
        fn: () => {
          pair.init(a);
          pair.init(b);
          pair.update(a, null, buf.subarray(0, 17));
          pair.update(a, b, buf.subarray(17));
          pair.hex(a);
          pair.hex(b);
        },
      });
    }
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
