// The S3 listener with a real client (@aws-sdk/client-s3) against the real server, security on,
// two tenants (a keys file with a key each): buckets, objects, ranges, conditionals, digests, the
// SDK's default checksums (aws-chunked with a CRC32 trailer), copy, lists, DeleteObjects, the
// tenants' isolation, SigV4's refusals and deduplication.

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  CopyObjectCommand, CreateBucketCommand, DeleteBucketCommand, DeleteObjectCommand, DeleteObjectsCommand, GetBucketLocationCommand, GetObjectCommand,
  HeadBucketCommand, HeadObjectCommand, ListBucketsCommand, ListObjectsCommand, ListObjectsV2Command, PutObjectCommand, S3Client,
} from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sha256, type S3Credentials, s3Client, s3Failure, signedPut } from './helpers/s3-client.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const KEY_A = { accessKeyId: 'AKIATEAMA0000001', secretAccessKey: 'team-a-secret-0123456789abcdefghijklmnop' };
const KEY_B = { accessKeyId: 'AKIATEAMB0000001', secretAccessKey: 'team-b-secret-0123456789abcdefghijklmnop' };
const READER = { accessKeyId: 'AKIAREADER000001', secretAccessKey: 'reader-secret-0123456789abcdefghijklmnop' };

let server: TestServer;
let a: S3Client;
let b: S3Client;
const dir = tempRoot('svc-s3-api-');

const client = (credentials: S3Credentials, more: Record<string, unknown> = {}) => s3Client(server.s3Url, credentials, more);

const failure = s3Failure;

const text = async (body: unknown) => (body as { transformToString(): Promise<string> }).transformToString();
const md5 = (data: string | Buffer) => crypto.createHash('md5').update(data).digest('hex');

beforeAll(async () => {
  const keysFile = path.join(dir, 'keys.json');
  fs.writeFileSync(keysFile, JSON.stringify({
    keys: [
      { ...KEY_A, tenant: 'team-a', sub: 'robot-a', scope: 'blob.read blob.write blob.delete' },
      { ...KEY_B, tenant: 'team-b', sub: 'robot-b', displayName: 'Team B', scope: 'blob.read blob.write blob.delete' },
      { ...READER, tenant: 'team-a', sub: 'reader-a', scope: 'blob.read' },
    ],
  }));
  server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 's3-api-test-secret-0123456789abcdef', SVC_S3_KEYS_FILE: keysFile });
  a = client(KEY_A);
  b = client(KEY_B);
});

afterAll(async () => {
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('S3 API with @aws-sdk/client-s3', () => {
  it('puts and gets an object: MD5 ETag, metadata, X-Svc-Blob-Id, the default CRC32 trailer', async () => {
    await a.send(new CreateBucketCommand({ Bucket: 'alpha' }));
    const body = 'hello, s3 world\n'.repeat(1000);
    const put = await a.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt', Body: body, ContentType: 'text/plain', Metadata: { color: 'blue' } }));
    expect(put.ETag).toBe(`"${md5(body)}"`);
    const got = await a.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt' }));
    expect(await text(got.Body)).toBe(body);
    expect(got.ETag).toBe(`"${md5(body)}"`);
    expect(got.ContentType).toBe('text/plain');
    expect(got.ContentLength).toBe(body.length);
    expect(got.Metadata).toEqual({ color: 'blue' });
    const head = await a.send(new HeadObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt' }));
    expect(head.ContentLength).toBe(body.length);
    expect(head.ETag).toBe(`"${md5(body)}"`);
    // A stream body: the SDK sends aws-chunked with an unsigned CRC32 trailer by default.
    const { Readable } = await import('node:stream');
    const streamed = Buffer.alloc(300_000, 7);
    const put2 = await a.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'streamed.bin', Body: Readable.from([streamed.subarray(0, 100_000), streamed.subarray(100_000)]), ContentLength: streamed.length }));
    expect(put2.ETag).toBe(`"${md5(streamed)}"`);
    expect(put2.ChecksumCRC32).toBeDefined();
    const back = await a.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'streamed.bin', ChecksumMode: 'ENABLED' }));
    expect(Buffer.from(await back.Body!.transformToByteArray()).equals(streamed)).toBe(true);
    expect(back.ChecksumCRC32).toBe(put2.ChecksumCRC32);
  });

  it('answers X-Svc-Blob-Id, and the same bytes under two keys are one blob', async () => {
    const body = crypto.randomBytes(100_000);
    await a.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'one', Body: body }));
    await a.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'two', Body: body }));
    const ids = await Promise.all(['one', 'two'].map(async (Key) => {
      const res = await fetch(await presignedUrl('HEAD', `/alpha/${Key}`, KEY_A), { method: 'HEAD' });
      expect(res.status).toBe(200);
      return res.headers.get('x-svc-blob-id');
    }));
    expect(ids[0]).toMatch(/^sha-256:[0-9a-f]{64}:100000$/);
    expect(ids[0]).toBe(ids[1]);
  });

  it('serves ranges and the conditionals (304, 412)', async () => {
    const got = await a.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt', Range: 'bytes=0-4' }));
    expect(await text(got.Body)).toBe('hello');
    expect(got.ContentRange).toBe(`bytes 0-4/${16 * 1000}`);
    const etag = `"${md5('hello, s3 world\n'.repeat(1000))}"`;
    expect(await failure(a.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt', IfNoneMatch: etag })))).toMatchObject({ status: 304 });
    expect(await failure(a.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt', IfMatch: '"0123"' })))).toEqual({ name: 'PreconditionFailed', status: 412 });
    expect(await failure(a.send(new HeadObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt', IfMatch: '"0123"' })))).toMatchObject({ status: 412 });
    const ok = await a.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt', IfMatch: etag, Range: 'bytes=-3' }));
    expect(await text(ok.Body)).toBe('ld\n');
    // Conditional writes: If-None-Match: * on an existing key, If-Match with another ETag.
    expect(await failure(a.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt', Body: 'x', IfNoneMatch: '*' })))).toEqual({ name: 'PreconditionFailed', status: 412 });
    expect(await failure(a.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt', Body: 'x', IfMatch: '"0123"' })))).toEqual({ name: 'PreconditionFailed', status: 412 });
    expect(await failure(a.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt', Range: 'bytes=99999-' })))).toEqual({ name: 'InvalidRange', status: 416 });
  });

  it('refuses a body whose Content-MD5 is not its MD5 (400 BadDigest)', async () => {
    const wrong = crypto.createHash('md5').update('other').digest('base64');
    expect(await failure(a.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'bad', Body: 'some bytes', ContentMD5: wrong })))).toEqual({ name: 'BadDigest', status: 400 });
    expect(await failure(a.send(new HeadObjectCommand({ Bucket: 'alpha', Key: 'bad' })))).toMatchObject({ status: 404 });
    const right = crypto.createHash('md5').update('some bytes').digest('base64');
    await a.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'good', Body: 'some bytes', ContentMD5: right }));
  });

  it('a body whose signed SHA-256 or Content-MD5 is not its own leaves nothing behind (small and scanned bodies)', async () => {
    await a.send(new CreateBucketCommand({ Bucket: 'digests' }));
    const token = await devToken('team-a');
    const published = async (body: Buffer) => (await fetch(`${server.url}/api/v1/blobs/sha-256:${sha256(body)}:${body.length}`, { method: 'HEAD', headers: { Authorization: `Bearer ${token}` } })).status;
    for (const size of [1000, 3 * 1024 * 1024 + 17]) {
      const body = crypto.randomBytes(size);
      // The signature covers another body's SHA-256: 400 XAmzContentSHA256Mismatch once the bytes are in.
      const mismatched = await signedPut(server.s3Url, '/digests/sha-mismatch', KEY_A, body, sha256(Buffer.from('other bytes')));
      expect(mismatched.status).toBe(400);
      expect(await mismatched.text()).toContain('<Code>XAmzContentSHA256Mismatch</Code>');
      // A Content-MD5 of other bytes (signed SHA-256 right): 400 BadDigest.
      const badMd5 = await signedPut(server.s3Url, '/digests/md5-mismatch', KEY_A, body, sha256(body), { 'content-md5': crypto.createHash('md5').update('other').digest('base64') });
      expect(badMd5.status).toBe(400);
      expect(await badMd5.text()).toContain('<Code>BadDigest</Code>');
      expect(await published(body)).toBe(404);
      expect(await failure(a.send(new HeadObjectCommand({ Bucket: 'digests', Key: 'sha-mismatch' })))).toMatchObject({ status: 404 });
      expect(await failure(a.send(new HeadObjectCommand({ Bucket: 'digests', Key: 'md5-mismatch' })))).toMatchObject({ status: 404 });
      // Both right: 200, the ETag is the body's MD5 and the blob its SHA-256.
      const ok = await signedPut(server.s3Url, '/digests/digests-right', KEY_A, body, sha256(body), { 'content-md5': crypto.createHash('md5').update(body).digest('base64') });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('etag')).toBe(`"${md5(body)}"`);
      expect(ok.headers.get('x-svc-blob-id')).toBe(`sha-256:${sha256(body)}:${body.length}`);
      expect(await published(body)).toBe(200);
    }
    await a.send(new DeleteObjectCommand({ Bucket: 'digests', Key: 'digests-right' }));
    await a.send(new DeleteBucketCommand({ Bucket: 'digests' }));
  });

  it('stores empty objects', async () => {
    const put = await a.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'empty/', Body: '' }));
    expect(put.ETag).toBe(`"${md5('')}"`);
    const got = await a.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'empty/' }));
    expect(await text(got.Body)).toBe('');
    await a.send(new DeleteObjectCommand({ Bucket: 'alpha', Key: 'empty/' }));
  });

  it('copies an object without its bytes: COPY and REPLACE, x-amz-copy-source-if-*', async () => {
    await a.send(new CreateBucketCommand({ Bucket: 'alpha-copies' }));
    const copied = await a.send(new CopyObjectCommand({ Bucket: 'alpha-copies', Key: 'copy.txt', CopySource: 'alpha/dir/hello.txt' }));
    expect(copied.CopyObjectResult?.ETag).toBe(`"${md5('hello, s3 world\n'.repeat(1000))}"`);
    const head = await a.send(new HeadObjectCommand({ Bucket: 'alpha-copies', Key: 'copy.txt' }));
    expect(head.Metadata).toEqual({ color: 'blue' });
    expect(head.ContentType).toBe('text/plain');
    await a.send(new CopyObjectCommand({ Bucket: 'alpha-copies', Key: 'copy.txt', CopySource: 'alpha-copies/copy.txt', MetadataDirective: 'REPLACE', Metadata: { color: 'red' }, ContentType: 'text/x-red' }));
    const replaced = await a.send(new HeadObjectCommand({ Bucket: 'alpha-copies', Key: 'copy.txt' }));
    expect(replaced.Metadata).toEqual({ color: 'red' });
    expect(replaced.ContentType).toBe('text/x-red');
    expect(await failure(a.send(new CopyObjectCommand({ Bucket: 'alpha-copies', Key: 'c2', CopySource: 'alpha/dir/hello.txt', CopySourceIfMatch: '"nope"' })))).toEqual({ name: 'PreconditionFailed', status: 412 });
    expect(await failure(a.send(new CopyObjectCommand({ Bucket: 'alpha-copies', Key: 'c2', CopySource: 'alpha/missing' })))).toEqual({ name: 'NoSuchKey', status: 404 });
  });

  it('lists with ListObjectsV2 (delimiter, pagination) and v1', async () => {
    await a.send(new CreateBucketCommand({ Bucket: 'alpha-list' }));
    const keys = ['a/1', 'a/2', 'b/1', 'c', 'd', 'e/f/g'];
    for (const Key of keys) await a.send(new PutObjectCommand({ Bucket: 'alpha-list', Key, Body: Key }));
    const top = await a.send(new ListObjectsV2Command({ Bucket: 'alpha-list', Delimiter: '/' }));
    expect(top.Contents?.map((c) => c.Key)).toEqual(['c', 'd']);
    expect(top.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['a/', 'b/', 'e/']);
    expect(top.KeyCount).toBe(5);
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await a.send(new ListObjectsV2Command({ Bucket: 'alpha-list', MaxKeys: 2, ContinuationToken: token }));
      seen.push(...(page.Contents ?? []).map((c) => c.Key!));
      token = page.NextContinuationToken;
      expect(page.IsTruncated).toBe(token !== undefined);
      pages++;
    } while (token);
    expect(seen).toEqual(keys);
    expect(pages).toBe(3);
    const after = await a.send(new ListObjectsV2Command({ Bucket: 'alpha-list', StartAfter: 'b/1', Prefix: '', FetchOwner: true }));
    expect(after.Contents?.map((c) => c.Key)).toEqual(['c', 'd', 'e/f/g']);
    expect(after.Contents?.[0]?.Owner?.ID).toBe('robot-a');
    const v1 = await a.send(new ListObjectsCommand({ Bucket: 'alpha-list', Prefix: 'a/', Marker: 'a/1' }));
    expect(v1.Contents?.map((c) => c.Key)).toEqual(['a/2']);
    // A token opens only for its caller and its listing.
    const first = await a.send(new ListObjectsV2Command({ Bucket: 'alpha-list', MaxKeys: 1 }));
    expect(await failure(b.send(new ListObjectsV2Command({ Bucket: 'alpha-list', ContinuationToken: first.NextContinuationToken })))).toEqual({ name: 'AccessDenied', status: 403 });
    expect(await failure(client(READER).send(new ListObjectsV2Command({ Bucket: 'alpha-list', ContinuationToken: first.NextContinuationToken })))).toEqual({ name: 'InvalidArgument', status: 400 });
    expect(await failure(a.send(new ListObjectsV2Command({ Bucket: 'alpha-list', Prefix: 'a', ContinuationToken: first.NextContinuationToken })))).toEqual({ name: 'InvalidArgument', status: 400 });
  });

  it('deletes objects one by one and by DeleteObjects (quiet too), then the bucket', async () => {
    await a.send(new DeleteObjectCommand({ Bucket: 'alpha-list', Key: 'c' }));
    await a.send(new DeleteObjectCommand({ Bucket: 'alpha-list', Key: 'never-was' }));
    expect(await failure(a.send(new DeleteBucketCommand({ Bucket: 'alpha-list' })))).toEqual({ name: 'BucketNotEmpty', status: 409 });
    const res = await a.send(new DeleteObjectsCommand({ Bucket: 'alpha-list', Delete: { Objects: [{ Key: 'a/1' }, { Key: 'a/2' }] } }));
    expect(res.Deleted?.map((d) => d.Key).sort()).toEqual(['a/1', 'a/2']);
    const quiet = await a.send(new DeleteObjectsCommand({ Bucket: 'alpha-list', Delete: { Quiet: true, Objects: [{ Key: 'b/1' }, { Key: 'd' }, { Key: 'e/f/g' }] } }));
    expect(quiet.Deleted ?? []).toEqual([]);
    expect(quiet.Errors ?? []).toEqual([]);
    expect((await a.send(new ListObjectsV2Command({ Bucket: 'alpha-list' }))).KeyCount).toBe(0);
    await a.send(new DeleteBucketCommand({ Bucket: 'alpha-list' }));
    expect(await failure(a.send(new HeadBucketCommand({ Bucket: 'alpha-list' })))).toMatchObject({ status: 404 });
  });

  it('keeps tenants apart: buckets, names, listings', async () => {
    const names = (await a.send(new ListBucketsCommand({}))).Buckets?.map((x) => x.Name);
    expect(names).toEqual(['alpha', 'alpha-copies']);
    expect((await b.send(new ListBucketsCommand({}))).Buckets ?? []).toEqual([]);
    expect(await failure(b.send(new CreateBucketCommand({ Bucket: 'alpha' })))).toEqual({ name: 'BucketAlreadyExists', status: 409 });
    expect(await failure(b.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'dir/hello.txt' })))).toEqual({ name: 'AccessDenied', status: 403 });
    expect(await failure(b.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'x', Body: 'x' })))).toEqual({ name: 'AccessDenied', status: 403 });
    expect(await failure(b.send(new ListObjectsV2Command({ Bucket: 'alpha' })))).toEqual({ name: 'AccessDenied', status: 403 });
    expect(await failure(b.send(new CopyObjectCommand({ Bucket: 'alpha', Key: 'x', CopySource: 'alpha/dir/hello.txt' })))).toEqual({ name: 'AccessDenied', status: 403 });
    await b.send(new CreateBucketCommand({ Bucket: 'beta' }));
    expect(await failure(a.send(new HeadBucketCommand({ Bucket: 'beta' })))).toMatchObject({ status: 403 });
    expect((await a.send(new GetBucketLocationCommand({ Bucket: 'alpha' }))).LocationConstraint ?? '').toBe('');
    // A read-only key of team A reads, and may not write.
    const reader = client(READER);
    expect(await text((await reader.send(new GetObjectCommand({ Bucket: 'alpha', Key: 'good' }))).Body)).toBe('some bytes');
    expect(await failure(reader.send(new PutObjectCommand({ Bucket: 'alpha', Key: 'r', Body: 'r' })))).toEqual({ name: 'AccessDenied', status: 403 });
  });

  it('refuses a bad signature, an unknown key, a skewed clock and an expired presigned URL', async () => {
    const wrongSecret = client({ accessKeyId: KEY_A.accessKeyId, secretAccessKey: 'not-the-secret-0123456789abcdefghijklmno' });
    expect(await failure(wrongSecret.send(new ListBucketsCommand({})))).toEqual({ name: 'SignatureDoesNotMatch', status: 403 });
    const unknown = client({ accessKeyId: 'AKIANOBODY000001', secretAccessKey: KEY_A.secretAccessKey });
    expect(await failure(unknown.send(new ListBucketsCommand({})))).toEqual({ name: 'InvalidAccessKeyId', status: 403 });
    const skewed = client(KEY_A, { systemClockOffset: -20 * 60_000, retryStrategy: undefined });
    expect(await failure(skewed.send(new ListBucketsCommand({})))).toEqual({ name: 'RequestTimeTooSkewed', status: 403 });
    // A presigned URL: good now, AccessDenied once expired.
    const url = await presignedUrl('GET', '/alpha/good', KEY_A, 60);
    const ok = await fetch(url);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe('some bytes');
    const expired = await presignedUrl('GET', '/alpha/good', KEY_A, 60, new Date(Date.now() - 10 * 60_000));
    const refused = await fetch(expired);
    expect(refused.status).toBe(403);
    const xml = await refused.text();
    expect(xml).toContain('<Code>AccessDenied</Code>');
    expect(xml).toContain('<Message>Request has expired</Message>');
    expect(xml).toContain('<Resource>/alpha/good</Resource>');
    expect(xml).toMatch(/<RequestId>[^<]+<\/RequestId>/);
    expect(refused.headers.get('x-amz-request-id')).toBeTruthy();
    // Unsigned: AccessDenied; HEAD answers no body.
    const unsigned = await fetch(`${server.s3Url}/alpha/good`, { method: 'HEAD' });
    expect(unsigned.status).toBe(403);
    expect(await unsigned.text()).toBe('');
  });

  it('DELETE /api/v1/blobs/{id} of a blob the tenant\'s objects name is 409 blob_in_use (nothing changes); another tenant\'s delete of the same bytes drops only its own hold; once the objects go, the delete goes through', async () => {
    await a.send(new CreateBucketCommand({ Bucket: 'in-use' }));
    const body = crypto.randomBytes(60_000);
    const blobId = `sha-256:${sha256(body)}:${body.length}`;
    await a.send(new PutObjectCommand({ Bucket: 'in-use', Key: 'one', Body: body }));
    await a.send(new PutObjectCommand({ Bucket: 'in-use', Key: 'two', Body: body }));
    const tokenA = await devToken('team-a', 'blob.read blob.write blob.delete');
    const tokenB = await devToken('team-b', 'blob.read blob.write blob.delete');
    const blobApi = (token: string, method: string, id = blobId, more: RequestInit = {}) =>
      fetch(`${server.url}/api/v1/blobs${id ? `/${id}` : ''}`, { method, ...more, headers: { Authorization: `Bearer ${token}`, ...(more.headers as Record<string, string> | undefined) } });

    const refused = await blobApi(tokenA, 'DELETE');
    expect(refused.status).toBe(409);
    expect(await refused.json()).toEqual({
      error: 'blob_in_use',
      message: `Blob ${blobId} is the content of 2 S3 objects of this tenant; delete the S3 objects first`,
    });
    expect((await blobApi(tokenA, 'HEAD')).status).toBe(200);
    expect(Buffer.from(await (await a.send(new GetObjectCommand({ Bucket: 'in-use', Key: 'one' }))).Body!.transformToByteArray()).equals(body)).toBe(true);

    // Team B holds the same bytes (its own upload): its delete drops its hold only.
    const posted = await blobApi(tokenB, 'POST', '', { body, headers: { 'Content-Type': 'application/octet-stream' } });
    expect(posted.status).toBe(201);
    expect((await blobApi(tokenB, 'DELETE')).status).toBe(204);
    expect((await blobApi(tokenB, 'HEAD')).status).toBe(404);
    expect((await blobApi(tokenA, 'HEAD')).status).toBe(200);
    expect(Buffer.from(await (await a.send(new GetObjectCommand({ Bucket: 'in-use', Key: 'two' }))).Body!.transformToByteArray()).equals(body)).toBe(true);

    // One object left: still refused, and says so.
    await a.send(new DeleteObjectCommand({ Bucket: 'in-use', Key: 'one' }));
    const still = await blobApi(tokenA, 'DELETE');
    expect(still.status).toBe(409);
    expect(((await still.json()) as { message: string }).message).toBe(`Blob ${blobId} is the content of 1 S3 object of this tenant; delete the S3 objects first`);
    // Its hold kept by the object, uploaded again through the blob API: the delete is still refused.
    expect((await blobApi(tokenA, 'POST', '', { body, headers: { 'Content-Type': 'application/octet-stream' } })).status).toBe(201);
    expect((await blobApi(tokenA, 'DELETE')).status).toBe(409);
    // The last object goes, and with it the hold; the blob API's delete then finds nothing.
    await a.send(new DeleteObjectCommand({ Bucket: 'in-use', Key: 'two' }));
    expect((await blobApi(tokenA, 'HEAD')).status).toBe(404);
    expect((await blobApi(tokenA, 'DELETE')).status).toBe(404);

    // A blob the tenant holds through the blob API alone deletes as before, then S3 can name the same bytes again.
    const other = crypto.randomBytes(30_000);
    const otherId = `sha-256:${sha256(other)}:${other.length}`;
    expect((await blobApi(tokenA, 'POST', '', { body: other, headers: { 'Content-Type': 'application/octet-stream' } })).status).toBe(201);
    expect((await blobApi(tokenA, 'DELETE', otherId)).status).toBe(204);
    await a.send(new PutObjectCommand({ Bucket: 'in-use', Key: 'other', Body: other }));
    expect((await blobApi(tokenA, 'HEAD', otherId)).status).toBe(200);
    expect((await blobApi(tokenA, 'DELETE', otherId)).status).toBe(409);
    await a.send(new DeleteObjectCommand({ Bucket: 'in-use', Key: 'other' }));
    await a.send(new DeleteBucketCommand({ Bucket: 'in-use' }));
  });

  it('answers 501 NotImplemented in S3 XML for what is not served (tagging)', async () => {
    const res = await fetch(await presignedUrl('GET', '/alpha/good?tagging=', KEY_A));
    expect(res.status).toBe(501);
    expect(await res.text()).toContain('<Code>NotImplemented</Code>');
  });
});

const sha256 = (data: Buffer) => crypto.createHash('sha256').update(data).digest('hex');

/** A bearer token of `tenant` for the blob API (the server's dev tokens). */
async function devToken(tenant: string, scope = 'blob.read'): Promise<string> {
  const res = await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: tenant, sub: 'test', ttl_seconds: 600, scope }) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** A presigned URL signed with @smithy/signature-v4 (what @aws-sdk/s3-request-presigner does). */
async function presignedUrl(method: string, pathAndQuery: string, key: { accessKeyId: string; secretAccessKey: string }, expiresIn = 300, signingDate?: Date): Promise<string> {
  const url = new URL(`${server.s3Url}${pathAndQuery}`);
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: key, sha256: Sha256, uriEscapePath: false, applyChecksum: false });
  const query: Record<string, string> = {};
  url.searchParams.forEach((v, k) => (query[k] = v));
  const signed = await signer.presign(
    { method, protocol: 'http:', hostname: url.hostname, port: Number(url.port), path: url.pathname, query, headers: { host: url.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } },
    // As @aws-sdk/s3-request-presigner: the payload is UNSIGNED-PAYLOAD, and that header stays out of the URL.
    { expiresIn, unhoistableHeaders: new Set(['x-amz-content-sha256']), unsignableHeaders: new Set(['x-amz-content-sha256']), ...(signingDate ? { signingDate } : {}) },
  );
  const out = new URL(`${server.s3Url}${signed.path}`);
  for (const [k, v] of Object.entries(signed.query ?? {})) out.searchParams.set(k, String(v));
  return out.toString().replace(/\+/g, '%20');
}
