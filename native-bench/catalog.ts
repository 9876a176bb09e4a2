import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { open } from 'lmdb';
import { pack } from 'msgpackr';
import { type BenchResult, MiB, consume, runGroup } from './harness.js';

/** Writes issued in one event turn: lmdb-js commits them as one transaction. */
const PUT_BATCH = 1000;
/** Reads per timed iteration. */
const GET_BATCH = 1000;
/** Records present before the read benchmark. */
const PREFILL = 100_000;
const KEY_BYTES = 32;

/** A manifest-like record of a two-block blob (msgpack, ~200 bytes). */
function record(i: number) {
  return {
    size: 1_500_000 + i,
    mediaType: 'application/octet-stream',
    chunker: 'fastcdc-262144-1048576-4194304',
    createdAt: 1_795_000_000_000 + i,
    seq: i,
    refs: randomBytes(80),
    sizes: Buffer.alloc(8, i & 0xff),
  };
}

/**
 * The catalog's LMDB as engine/store/catalog.ts opens it (msgpack values, relaxed = noSync),
 * with 32-byte binary keys like the block and content ids.
 */
export async function benchCatalog(): Promise<{ results: BenchResult[]; valueBytes: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-native-bench-lmdb-'));
  const root = open({ path: dir, noSubdir: false, noSync: true, mapSize: 2 ** 31, encoding: 'msgpack', useVersions: false });
  try {
    const db = root.openDB<ReturnType<typeof record>, Buffer>({ name: 'bench', keyEncoding: 'binary' });
    const values = Array.from({ length: 256 }, (_, i) => record(i));
    const valueBytes = Math.round(values.reduce((n, v) => n + pack(v).length, 0) / values.length);

    // Key pool: a slice of random bytes per key; puts run past the prefilled range (wrapping
    // into overwrites only if a run ever exceeds the pool).
    const POOL_KEYS = 1 << 20;
    const pool = randomBytes(POOL_KEYS * KEY_BYTES);
    const key = (i: number) => pool.subarray((i % POOL_KEYS) * KEY_BYTES, (i % POOL_KEYS) * KEY_BYTES + KEY_BYTES);

    await db.batch(() => {
      for (let i = 0; i < PREFILL; i++) db.put(key(i), values[i & 255]);
    });
    if (db.get(key(PREFILL - 1)) === undefined) throw new Error('LMDB prefill read back nothing');

    let next = PREFILL;
    let r = 0x9e3779b9;
    const results = await runGroup('catalog (LMDB)', [
      {
        name: `lmdb put async, batches of ${PUT_BATCH}, ~${valueBytes} B msgpack`,
        async: true,
        opsPerIteration: PUT_BATCH,
        fn: async () => {
          let last: Promise<boolean> | undefined;
          for (let j = 0; j < PUT_BATCH; j++, next++) last = db.put(key(next), values[next & 255]);
          await last;
        },
      },
      {
        name: `lmdb get sync, random keys of ${PREFILL / 1000}k, ~${valueBytes} B msgpack`,
        opsPerIteration: GET_BATCH,
        fn: () => {
          let found = 0;
          for (let j = 0; j < GET_BATCH; j++) {
            r ^= r << 13;
            r ^= r >>> 17;
            r ^= r << 5;
            if (db.get(key((r >>> 0) % PREFILL)) !== undefined) found++;
          }
          if (found !== GET_BATCH) throw new Error(`lmdb get found ${found} of ${GET_BATCH}`);
          consume(found);
        },
      },
    ]);
    process.stderr.write(`  lmdb: ${next - PREFILL} puts timed, data file ${(fs.statSync(path.join(dir, 'data.mdb')).size / MiB).toFixed(0)} MiB\n`);
    return { results, valueBytes };
  } finally {
    await root.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
