// S3's read-after-write through the node's cache of object and bucket records (fs and s3 nodes
// keep them decoded: engine/store/unit-store.ts CACHED; pg-s3 nodes none): each write below comes
// after a GET that cached the record it changes, and the GET right after the write's answer sees
// the write. A foreign tenant is refused whether the record is cached or not.

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  CompleteMultipartUploadCommand, CopyObjectCommand, CreateBucketCommand, CreateMultipartUploadCommand, DeleteBucketCommand, DeleteObjectCommand,
  DeleteObjectsCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, type S3Client, UploadPartCommand,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s3Client, s3Failure } from './helpers/s3-client.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const KEY_A = { accessKeyId: 'AKIARAWA00000001', secretAccessKey: 'raw-a-secret-0123456789abcdefghijklmnopq' };
const KEY_B = { accessKeyId: 'AKIARAWB00000001', secretAccessKey: 'raw-b-secret-0123456789abcdefghijklmnopq' };

let server: TestServer;
let a: S3Client;
let b: S3Client;
const dir = tempRoot('svc-s3-raw-');

const md5 = (data: string | Buffer) => crypto.createHash('md5').update(data).digest('hex');
const bucketName = () => `raw-${crypto.randomUUID().slice(0, 8)}`;

/** The object's body and ETag as a GET answers them now. */
async function got(client: S3Client, bucket: string, key: string): Promise<{ body: string; etag: string | undefined; type: string | undefined }> {
  const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return { body: await res.Body!.transformToString(), etag: res.ETag, type: res.ContentType };
}

beforeAll(async () => {
  const keysFile = path.join(dir, 'keys.json');
  fs.writeFileSync(keysFile, JSON.stringify({
    keys: [
      { ...KEY_A, tenant: 'raw-a', sub: 'robot-a', scope: 'blob.read blob.write blob.delete' },
      { ...KEY_B, tenant: 'raw-b', sub: 'robot-b', scope: 'blob.read blob.write blob.delete' },
    ],
  }));
  server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 's3-raw-test-secret-0123456789abcdef0', SVC_S3_KEYS_FILE: keysFile });
  a = s3Client(server.s3Url, KEY_A);
  b = s3Client(server.s3Url, KEY_B);
});

afterAll(async () => {
  a?.destroy();
  b?.destroy();
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('S3 read-after-write on a node that caches records', () => {
  it('a GET right after PutObject, an overwrite, CopyObject and CompleteMultipartUpload answers each write', async () => {
    const bucket = bucketName();
    await a.send(new CreateBucketCommand({ Bucket: bucket }));
    await a.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'one', ContentType: 'text/plain' }));
    expect(await got(a, bucket, 'k')).toEqual({ body: 'one', etag: `"${md5('one')}"`, type: 'text/plain' });
    // Cached now (read twice): each write below replaces what the cache holds.
    expect((await got(a, bucket, 'k')).body).toBe('one');

    await a.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'two', ContentType: 'text/csv' }));
    expect(await got(a, bucket, 'k')).toEqual({ body: 'two', etag: `"${md5('two')}"`, type: 'text/csv' });
    expect((await a.send(new HeadObjectCommand({ Bucket: bucket, Key: 'k' }))).ETag).toBe(`"${md5('two')}"`);

    await a.send(new PutObjectCommand({ Bucket: bucket, Key: 'source', Body: 'three' }));
    await a.send(new CopyObjectCommand({ Bucket: bucket, Key: 'k', CopySource: `${bucket}/source`, MetadataDirective: 'REPLACE', ContentType: 'text/x-copy' }));
    expect(await got(a, bucket, 'k')).toEqual({ body: 'three', etag: `"${md5('three')}"`, type: 'text/x-copy' });

    const part1 = Buffer.alloc(5 * 1024 * 1024, 'a');
    const part2 = Buffer.from('tail');
    const { UploadId } = await a.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'k', ContentType: 'application/x-parts' }));
    const e1 = (await a.send(new UploadPartCommand({ Bucket: bucket, Key: 'k', UploadId, PartNumber: 1, Body: part1 }))).ETag;
    const e2 = (await a.send(new UploadPartCommand({ Bucket: bucket, Key: 'k', UploadId, PartNumber: 2, Body: part2 }))).ETag;
    // Until Complete the object is the copy's.
    expect((await got(a, bucket, 'k')).body).toBe('three');
    await a.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'k', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: e1 }, { PartNumber: 2, ETag: e2 }] } }));
    const after = await a.send(new HeadObjectCommand({ Bucket: bucket, Key: 'k' }));
    expect(after.ContentLength).toBe(part1.length + part2.length);
    expect(after.ETag).toMatch(/-2"$/);
    expect(after.ContentType).toBe('application/x-parts');
  });

  it('a GET right after DeleteObject and DeleteObjects is NoSuchKey', async () => {
    const bucket = bucketName();
    await a.send(new CreateBucketCommand({ Bucket: bucket }));
    for (const key of ['one', 'two', 'three']) {
      await a.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: key }));
      expect((await got(a, bucket, key)).body).toBe(key);
    }
    await a.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'one' }));
    expect(await s3Failure(got(a, bucket, 'one'))).toMatchObject({ name: 'NoSuchKey', status: 404 });
    await a.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'two' }, { Key: 'three' }] } }));
    expect(await s3Failure(got(a, bucket, 'two'))).toMatchObject({ name: 'NoSuchKey', status: 404 });
    expect(await s3Failure(got(a, bucket, 'three'))).toMatchObject({ name: 'NoSuchKey', status: 404 });
    // Written again: answered again.
    await a.send(new PutObjectCommand({ Bucket: bucket, Key: 'two', Body: 'again' }));
    expect((await got(a, bucket, 'two')).body).toBe('again');
  });

  it('another tenant is AccessDenied on a cached record, and after DeleteBucket and its CreateBucket by another tenant the name is the new owner\'s', async () => {
    const bucket = bucketName();
    await a.send(new CreateBucketCommand({ Bucket: bucket }));
    await a.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'mine' }));
    expect((await got(a, bucket, 'k')).body).toBe('mine');
    expect(await s3Failure(got(b, bucket, 'k'))).toMatchObject({ name: 'AccessDenied', status: 403 });
    expect(await s3Failure(b.send(new HeadObjectCommand({ Bucket: bucket, Key: 'k' })))).toMatchObject({ status: 403 });
    expect(await s3Failure(got(b, bucket, 'absent'))).toMatchObject({ name: 'AccessDenied', status: 403 });

    await a.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'k' }));
    await a.send(new DeleteBucketCommand({ Bucket: bucket }));
    expect(await s3Failure(got(a, bucket, 'k'))).toMatchObject({ name: 'NoSuchBucket', status: 404 });
    await b.send(new CreateBucketCommand({ Bucket: bucket }));
    // The bucket's record is b's at once: a's reads of it are refused, b's find no object.
    expect(await s3Failure(got(a, bucket, 'k'))).toMatchObject({ name: 'AccessDenied', status: 403 });
    expect(await s3Failure(got(b, bucket, 'k'))).toMatchObject({ name: 'NoSuchKey', status: 404 });
    await b.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'theirs' }));
    expect((await got(b, bucket, 'k')).body).toBe('theirs');
    // Cached for b now: a is still refused.
    expect(await s3Failure(got(a, bucket, 'k'))).toMatchObject({ name: 'AccessDenied', status: 403 });
    expect(await s3Failure(a.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'intruder' })))).toMatchObject({ name: 'AccessDenied', status: 403 });
    expect((await got(b, bucket, 'k')).body).toBe('theirs');
  });
});
