// The S3 block store against a real S3-protocol server (s3rver on a loopback port): blocks are
// written once (a second put finds them present), written again with alwaysWrite, read whole and
// into a caller's buffer, and a missing block or bucket is an error.
import { randomBytes, createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { tempRoot } from './helpers/server.js';

const { S3BlockStore } = await import('../dist/engine/store/s3/block-store.js');
const { blockWriter } = await import('../dist/engine/store/block-writer.js');

const BUCKET = 'blocks';
const work = tempRoot('svc-s3-blocks-');
let s3: S3rver;
let endpoint: string;

const location = (bucket = BUCKET) => ({ kind: 's3' as const, endpoint, region: 'us-east-1', bucket, prefix: 'svc/', forcePathStyle: true });
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  // s3rver's fixed credentials, read by the AWS SDK's standard chain as a deployment's would be.
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: join(work, 's3') });
  const { port } = (await s3.run()) as { port: number };
  endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1' });
  await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  client.destroy();
});

afterAll(async () => {
  await s3?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('S3 block store (s3rver)', () => {
  test('writes a block once under its content key, then finds it present; alwaysWrite writes it again', async () => {
    const store = new S3BlockStore(location());
    const bytes = randomBytes(300_000);
    const hex = sha(bytes);
    const pieces = [bytes.subarray(0, 100_000), bytes.subarray(100_000)];
    expect(await store.put(hex, bytes.length, pieces)).toBe('written');
    expect(await store.put(hex, bytes.length, pieces)).toBe('present');
    expect(await store.put(hex, bytes.length, pieces, true)).toBe('present');
    const raw = await store.client.send(new GetObjectCommand({ Bucket: BUCKET, Key: `svc/blocks/${hex.slice(0, 3)}/${hex}-${bytes.length}` }));
    expect(Buffer.from(await raw.Body!.transformToByteArray()).equals(bytes)).toBe(true);
    expect((await store.read(hex, bytes.length)).equals(bytes)).toBe(true);
    expect((await store.readWhole(hex, bytes.length)).equals(bytes)).toBe(true);
    const into = Buffer.alloc(512 * 1024);
    const read = await store.read(hex, bytes.length, into);
    expect(read.buffer).toBe(into.buffer);
    expect(read.equals(bytes)).toBe(true);
  });

  test('a block of another size is another object; a missing block is an error', async () => {
    const store = new S3BlockStore(location());
    const bytes = randomBytes(1000);
    const hex = sha(bytes);
    expect(await store.put(hex, 1000, [bytes])).toBe('written');
    await expect(store.read(hex, 999)).rejects.toThrow();
    await expect(store.read(sha(randomBytes(8)), 8)).rejects.toThrow();
  });

  test('a worker thread opens the same store from its location', async () => {
    const writer = await blockWriter(location());
    const bytes = randomBytes(4096);
    const hex = sha(bytes);
    expect(await writer.put(hex, 4096, [bytes])).toBe('written');
    expect((await new S3BlockStore(location()).read(hex, 4096)).equals(bytes)).toBe(true);
  });

  test('readiness probes the bucket', async () => {
    await expect(new S3BlockStore(location()).probe()).resolves.toBeUndefined();
    await expect(new S3BlockStore(location('no-such-bucket')).probe()).rejects.toThrow();
  });
});
