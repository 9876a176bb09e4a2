// Store tasks of a remote block store on the main thread (engine/cas/local-stores.ts): which tasks
// the main thread takes, how its load is read, and that a task stores the same blocks there as on
// a worker thread of the real pool, against a real S3 server (s3rver).
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, GetObjectCommand } from '@aws-sdk/client-s3';
import { xxh64 } from '@node-rs/xxhash';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_STORE_BUSY_FRACTION, LOCAL_STORE_TASK_MAX_BYTES } from '../engine/base/limits.js';
import { runStoreTask } from '../engine/cas/block-task.js';
import { EventLoopLoad, localStores } from '../engine/cas/local-stores.js';
import type { StoreTask, StoreTaskResult } from '../engine/cas/protocol.js';
import type { BlockWriter, S3Location } from '../engine/store/block-store.js';
import { S3BlockStore } from '../engine/store/s3/block-store.js';
import { createWorkerPool } from '../engine/worker-pool.js';
import { type S3Endpoint, s3ClientFor, startS3rver } from './helpers/s3-servers.js';

const WORKER_MODULE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/workers/ingest.js');

/** The rule's tests never store: a writer that refuses to. */
const unused: BlockWriter = {
  put: () => {
    throw new Error('the rule was asked, not the store');
  },
  readWhole: () => {
    throw new Error('the rule was asked, not the store');
  },
};

describe('which store tasks the main thread takes', () => {
  it('takes every task up to LOCAL_STORE_TASK_MAX_BYTES, however busy it is', () => {
    const stores = localStores(unused, { busy: () => 1 });
    for (const hashed of [true, false]) {
      expect(stores.takes(1, hashed)).toBe(true);
      expect(stores.takes(LOCAL_STORE_TASK_MAX_BYTES, hashed)).toBe(true);
      expect(stores.takes(LOCAL_STORE_TASK_MAX_BYTES + 1, hashed)).toBe(false);
    }
  });

  it('takes a larger task only while its event loop was busy less than LOCAL_STORE_BUSY_FRACTION', () => {
    let busy = 0;
    const stores = localStores(unused, { busy: () => busy });
    const large = 4 * LOCAL_STORE_TASK_MAX_BYTES;
    expect(stores.takes(large, true)).toBe(true);
    busy = LOCAL_STORE_BUSY_FRACTION - 0.01;
    expect(stores.takes(large, true)).toBe(true);
    busy = LOCAL_STORE_BUSY_FRACTION;
    expect(stores.takes(large, true)).toBe(false);
  });

  it('leaves a larger task whose blocks are not hashed yet to the workers, however idle it is', () => {
    const stores = localStores(unused, { busy: () => 0 });
    expect(stores.takes(4 * LOCAL_STORE_TASK_MAX_BYTES, false)).toBe(false);
  });
});

describe('EventLoopLoad', () => {
  it('reads a blocked event loop as busy and a waiting one as idle, once per window', async () => {
    const load = new EventLoopLoad(100);
    expect(load.busy()).toBe(0);
    // Blocked for 150 ms: the window that ends now was all work.
    const until = performance.now() + 150;
    while (performance.now() < until);
    const blocked = load.busy();
    expect(blocked).toBeGreaterThan(0.8);
    // Read again within the window: the same figure, not a new one.
    expect(load.busy()).toBe(blocked);
    // Waiting on a timer for 150 ms: the next window was almost all idle.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(load.busy()).toBeLessThan(0.3);
  });
});

describe('a store task of an S3 store, on the main thread and on a worker', () => {
  let s3: S3Endpoint;
  let location: S3Location;
  let store: S3BlockStore;
  const saved = { ...process.env };

  beforeAll(async () => {
    s3 = await startS3rver();
    // The stores of every thread take credentials from the SDK's chain: the environment.
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey, AWS_REGION: s3.region });
    await s3ClientFor(s3).send(new CreateBucketCommand({ Bucket: 'local-stores' }));
    location = { kind: 's3', endpoint: s3.endpoint, region: s3.region, bucket: 'local-stores', prefix: 'p/', forcePathStyle: true };
    store = new S3BlockStore(location);
  });

  afterAll(async () => {
    await store?.close();
    await s3?.stop();
    process.env = saved;
  });

  /** Three blocks in one shared segment, and the task that stores them. */
  function taskOf(sizes: number[]): { task: StoreTask; blocks: Buffer[] } {
    const blocks = sizes.map((n) => randomBytes(n));
    const total = sizes.reduce((a, b) => a + b, 0);
    const segment = new Uint8Array(new SharedArrayBuffer(total));
    const bounds = [0];
    for (const b of blocks) {
      segment.set(b, bounds[bounds.length - 1]!);
      bounds.push(bounds[bounds.length - 1]! + b.length);
    }
    return { task: { segments: [segment], segmentSize: total, first: 0, end: total, bounds, store: location }, blocks };
  }

  async function expectStored(result: StoreTaskResult, blocks: Buffer[]): Promise<void> {
    expect(result.error).toBeUndefined();
    expect(result.blocks).toEqual(blocks.map((b) => ({ hex: createHash('sha256').update(b).digest('hex'), size: b.length, checksum: xxh64(b), fresh: true, written: true })));
    for (const [i, b] of blocks.entries()) {
      const got = await s3ClientFor(s3).send(new GetObjectCommand({ Bucket: 'local-stores', Key: store.key(result.blocks[i]!.hex, b.length) }));
      expect(Buffer.from(await got.Body!.transformToByteArray()).equals(b)).toBe(true);
    }
  }

  it('stores the blocks on the main thread with the store it is given', async () => {
    const { task, blocks } = taskOf([1000, 70_000, 5]);
    await expectStored(await runStoreTask(task, store), blocks);
    // Stored again: present, not written.
    const again = await runStoreTask(task, store);
    expect(again.blocks.map((b) => b.written ?? false)).toEqual([false, false, false]);
  });

  it('stores the same on a worker thread of the real pool', async () => {
    const pool = createWorkerPool({ filename: WORKER_MODULE, minThreads: 1, maxThreads: 1 });
    try {
      const { task, blocks } = taskOf([2000, 300_000]);
      await expectStored((await pool.run(task, { name: 'store' })) as StoreTaskResult, blocks);
    } finally {
      await pool.destroy();
    }
  });
});
