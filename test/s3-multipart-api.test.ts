// S3 multipart uploads through the listener with real clients (@aws-sdk/client-s3 and
// @aws-sdk/lib-storage's Upload, the SDK's default checksums), security on, two tenants and a
// tenant with a quota: a managed upload of 3 × 5 MiB + a tail, GET and HEAD with partNumber,
// ListParts, ListMultipartUploads, Abort, S3's refusals of Complete (EntityTooSmall, InvalidPart),
// UploadPartCopy (a whole object; ranges of objects, multipart ones too; its refusals), the tenants' isolation, open uploads' parts against the quota,
// and an open upload's parts kept by garbage collection (security off, GC waiting for nothing).

import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CreateBucketCommand, CreateMultipartUploadCommand, GetObjectCommand, HeadObjectCommand,
  ListMultipartUploadsCommand, ListPartsCommand, PutObjectCommand, S3Client, UploadPartCommand, UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { gcRun } from './helpers/gc.js';
import { seededBytes } from './helpers/http.js';
import { s3Client, s3Failure, signedPut } from './helpers/s3-client.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const MiB = 1024 * 1024;
const KEY_A = { accessKeyId: 'AKIATEAMA0000001', secretAccessKey: 'team-a-secret-0123456789abcdefghijklmnop' };
const KEY_B = { accessKeyId: 'AKIATEAMB0000001', secretAccessKey: 'team-b-secret-0123456789abcdefghijklmnop' };
const KEY_Q = { accessKeyId: 'AKIATEAMQ0000001', secretAccessKey: 'team-q-secret-0123456789abcdefghijklmnop' };

let server: TestServer;
/** The server's environment (a second pg-s3 node starts with it). */
let env: Record<string, string>;
let a: S3Client;
let b: S3Client;
let q: S3Client;
const dir = tempRoot('svc-s3-multipart-api-');

const client = s3Client;

const failure = s3Failure;

const md5 = (data: Uint8Array) => crypto.createHash('md5').update(data).digest();
const multipartEtag = (parts: Uint8Array[]) => `"${crypto.createHash('md5').update(Buffer.concat(parts.map(md5))).digest('hex')}-${parts.length}"`;
/** The X-Svc-Blob-Id a HeadObject answers (the SDK's output does not carry it): read from the raw response. */
async function blobIdOf(s3: S3Client, Bucket: string, Key: string): Promise<string | undefined> {
  const command = new HeadObjectCommand({ Bucket, Key });
  let id: string | undefined;
  command.middlewareStack.add((next) => async (args) => {
    const out = await next(args);
    id = (out.response as { headers: Record<string, string> }).headers['x-svc-blob-id'];
    return out;
  }, { step: 'deserialize' });
  await s3.send(command);
  return id;
}

const bytesOf = async (body: unknown) => Buffer.from(await (body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());

beforeAll(async () => {
  const keysFile = path.join(dir, 'keys.json');
  fs.writeFileSync(keysFile, JSON.stringify({
    keys: [
      { ...KEY_A, tenant: 'team-a', sub: 'robot-a', scope: 'blob.read blob.write blob.delete' },
      { ...KEY_B, tenant: 'team-b', sub: 'robot-b', scope: 'blob.read blob.write blob.delete' },
      { ...KEY_Q, tenant: 'team-q', sub: 'robot-q', scope: 'blob.read blob.write blob.delete' },
    ],
  }));
  const policyFile = path.join(dir, 'policy.json');
  fs.writeFileSync(policyFile, JSON.stringify({ tenants: { 'team-q': { quotaBytes: 12 * MiB } } }));
  env = { SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 's3-multipart-api-secret-0123456789abcdef', SVC_S3_KEYS_FILE: keysFile, SVC_TENANT_POLICY_FILE: policyFile };
  server = await startServer(env);
  a = client(server.s3Url, KEY_A);
  b = client(server.s3Url, KEY_B);
  q = client(server.s3Url, KEY_Q);
  await a.send(new CreateBucketCommand({ Bucket: 'mpu' }));
}, 60_000);

afterAll(async () => {
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('S3 multipart uploads with @aws-sdk/client-s3 and lib-storage', () => {
  const body = seededBytes(15 * MiB + 123_457, 39);
  const parts = [0, 1, 2, 3].map((i) => body.subarray(i * 5 * MiB, Math.min((i + 1) * 5 * MiB, body.length)));

  it('a managed Upload of 3 × 5 MiB + a tail (queueSize 4, default checksums): the multipart ETag, the bytes, the blob id', async () => {
    const upload = new Upload({ client: a, params: { Bucket: 'mpu', Key: 'big/object.bin', Body: body, ContentType: 'application/x-test' }, queueSize: 4, partSize: 5 * MiB });
    const done = await upload.done();
    expect(done.ETag).toBe(multipartEtag(parts));
    const got = await a.send(new GetObjectCommand({ Bucket: 'mpu', Key: 'big/object.bin' }));
    expect(got.ETag).toBe(multipartEtag(parts));
    expect(got.ContentType).toBe('application/x-test');
    expect((await bytesOf(got.Body)).equals(body)).toBe(true);
  });

  it('GET and HEAD with partNumber: the part\'s bytes (206), the parts count; past the last part 416 InvalidPartNumber', async () => {
    const second = await a.send(new GetObjectCommand({ Bucket: 'mpu', Key: 'big/object.bin', PartNumber: 2 }));
    expect(second.$metadata.httpStatusCode).toBe(206);
    expect(second.ContentRange).toBe(`bytes ${5 * MiB}-${10 * MiB - 1}/${body.length}`);
    expect(second.PartsCount).toBe(4);
    expect((await bytesOf(second.Body)).equals(parts[1]!)).toBe(true);
    const tail = await a.send(new HeadObjectCommand({ Bucket: 'mpu', Key: 'big/object.bin', PartNumber: 4 }));
    expect(tail.ContentLength).toBe(parts[3]!.length);
    expect(await failure(a.send(new GetObjectCommand({ Bucket: 'mpu', Key: 'big/object.bin', PartNumber: 5 })))).toEqual({ name: 'InvalidPartNumber', status: 416 });
    // An object not uploaded in parts: part 1 is all of it.
    await a.send(new PutObjectCommand({ Bucket: 'mpu', Key: 'small', Body: 'small bytes' }));
    const whole = await a.send(new GetObjectCommand({ Bucket: 'mpu', Key: 'small', PartNumber: 1 }));
    expect(await whole.Body!.transformToString()).toBe('small bytes');
  });

  it('ListParts, ListMultipartUploads, Complete\'s refusals (InvalidPart, EntityTooSmall), Abort', async () => {
    const { UploadId } = await a.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key: 'manual.bin' }));
    expect(UploadId).toBeTruthy();
    const small = [seededBytes(MiB, 1), seededBytes(MiB, 2)];
    // Out of order and in parallel.
    const sent = await Promise.all([2, 1].map((n) => a.send(new UploadPartCommand({ Bucket: 'mpu', Key: 'manual.bin', UploadId, PartNumber: n, Body: small[n - 1] }))));
    expect(sent[1]!.ETag).toBe(`"${md5(small[0]!).toString('hex')}"`);
    const listed = await a.send(new ListPartsCommand({ Bucket: 'mpu', Key: 'manual.bin', UploadId }));
    expect(listed.Parts?.map((p) => [p.PartNumber, p.Size, p.ETag])).toEqual([[1, MiB, sent[1]!.ETag], [2, MiB, sent[0]!.ETag]]);
    const uploads = await a.send(new ListMultipartUploadsCommand({ Bucket: 'mpu' }));
    expect(uploads.Uploads?.map((u) => [u.Key, u.UploadId])).toEqual([['manual.bin', UploadId]]);
    const complete = (Parts: Array<{ PartNumber: number; ETag: string }>) =>
      a.send(new CompleteMultipartUploadCommand({ Bucket: 'mpu', Key: 'manual.bin', UploadId, MultipartUpload: { Parts } }));
    expect(await failure(complete([{ PartNumber: 1, ETag: sent[1]!.ETag! }, { PartNumber: 2, ETag: '"00000000000000000000000000000000"' }]))).toEqual({ name: 'InvalidPart', status: 400 });
    expect(await failure(complete([{ PartNumber: 1, ETag: sent[1]!.ETag! }, { PartNumber: 2, ETag: sent[0]!.ETag! }]))).toEqual({ name: 'EntityTooSmall', status: 400 });
    // Another tenant sees nothing of it.
    expect(await failure(b.send(new ListPartsCommand({ Bucket: 'mpu', Key: 'manual.bin', UploadId })))).toEqual({ name: 'AccessDenied', status: 403 });
    expect(await failure(b.send(new UploadPartCommand({ Bucket: 'mpu', Key: 'manual.bin', UploadId, PartNumber: 3, Body: 'x' })))).toEqual({ name: 'AccessDenied', status: 403 });
    // A part's body is checked as PutObject's: a Content-MD5 that is not its MD5; a streamed body (aws-chunked, CRC32 trailer).
    const wrong = crypto.createHash('md5').update('other').digest('base64');
    expect(await failure(a.send(new UploadPartCommand({ Bucket: 'mpu', Key: 'manual.bin', UploadId, PartNumber: 3, Body: small[0], ContentMD5: wrong })))).toEqual({ name: 'BadDigest', status: 400 });
    // A signature over another body's SHA-256: 400 XAmzContentSHA256Mismatch; neither refused part is on record.
    const otherSha = crypto.createHash('sha256').update('other').digest('hex');
    const mismatched = await signedPut(server.s3Url, `/mpu/manual.bin?partNumber=3&uploadId=${encodeURIComponent(UploadId!)}`, KEY_A, small[0]!, otherSha);
    expect(mismatched.status).toBe(400);
    expect(await mismatched.text()).toContain('<Code>XAmzContentSHA256Mismatch</Code>');
    expect((await a.send(new ListPartsCommand({ Bucket: 'mpu', Key: 'manual.bin', UploadId }))).Parts?.map((p) => p.PartNumber)).toEqual([1, 2]);
    const { Readable } = await import('node:stream');
    const streamed = await a.send(new UploadPartCommand({
      Bucket: 'mpu', Key: 'manual.bin', UploadId, PartNumber: 3, Body: Readable.from([small[1]!.subarray(0, 300_000), small[1]!.subarray(300_000)]), ContentLength: small[1]!.length,
    }));
    expect(streamed.ETag).toBe(sent[0]!.ETag);
    expect(streamed.ChecksumCRC32).toBe(sent[0]!.ChecksumCRC32);
    expect(streamed.ChecksumCRC32).toBeDefined();
    await a.send(new AbortMultipartUploadCommand({ Bucket: 'mpu', Key: 'manual.bin', UploadId }));
    expect((await a.send(new ListMultipartUploadsCommand({ Bucket: 'mpu' }))).Uploads ?? []).toEqual([]);
    expect(await failure(a.send(new ListPartsCommand({ Bucket: 'mpu', Key: 'manual.bin', UploadId })))).toEqual({ name: 'NoSuchUpload', status: 404 });
  });

  it('x-amz-mp-object-size on Complete: another size than the parts\' total is 400 InvalidRequest, a malformed one 400 InvalidArgument; nothing published; the right one completes', async () => {
    const Key = 'sized.bin';
    const bytes = [seededBytes(5 * MiB, 31), seededBytes(1234, 32)];
    const whole = Buffer.concat(bytes);
    const { UploadId } = await a.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key }));
    const Parts: Array<{ PartNumber: number; ETag: string }> = [];
    for (const [i, Body] of bytes.entries()) Parts.push({ PartNumber: i + 1, ETag: (await a.send(new UploadPartCommand({ Bucket: 'mpu', Key, UploadId, PartNumber: i + 1, Body }))).ETag! });
    const complete = (MpuObjectSize?: number, raw?: string) => {
      const command = new CompleteMultipartUploadCommand({ Bucket: 'mpu', Key, UploadId, MultipartUpload: { Parts }, ...(MpuObjectSize === undefined ? {} : { MpuObjectSize }) });
      // A value the SDK would not write (it serializes a number): set before signing.
      if (raw !== undefined) {
        command.middlewareStack.add((next) => async (args) => {
          (args.request as { headers: Record<string, string> }).headers['x-amz-mp-object-size'] = raw;
          return next(args);
        }, { step: 'build' });
      }
      return a.send(command);
    };
    const res = await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: 'team-a', sub: 'test', ttl_seconds: 600, scope: 'blob.read' }) });
    const token = ((await res.json()) as { access_token: string }).access_token;
    const blobId = `sha-256:${crypto.createHash('sha256').update(whole).digest('hex')}:${whole.length}`;
    const published = async () => (await fetch(`${server.url}/api/v1/blobs/${blobId}`, { method: 'HEAD', headers: { Authorization: `Bearer ${token}` } })).status;
    expect(await failure(complete(whole.length - 1))).toEqual({ name: 'InvalidRequest', status: 400 });
    expect(await failure(complete(whole.length + 1))).toEqual({ name: 'InvalidRequest', status: 400 });
    for (const raw of ['12x', '-1', '1.5', '1e6']) expect(await failure(complete(undefined, raw))).toEqual({ name: 'InvalidArgument', status: 400 });
    // Refused: no object, no blob, the upload and its parts as they were.
    expect(await failure(a.send(new HeadObjectCommand({ Bucket: 'mpu', Key })))).toEqual({ name: 'NotFound', status: 404 });
    expect(await published()).toBe(404);
    expect((await a.send(new ListPartsCommand({ Bucket: 'mpu', Key, UploadId }))).Parts?.map((p) => p.PartNumber)).toEqual([1, 2]);
    const done = await complete(whole.length);
    expect(done.ETag).toBe(multipartEtag(bytes));
    expect(await published()).toBe(200);
    expect((await bytesOf((await a.send(new GetObjectCommand({ Bucket: 'mpu', Key }))).Body)).equals(whole)).toBe(true);
  });

  it('UploadPartCopy of a whole object: its blocks become the part', async () => {
    const source = seededBytes(5 * MiB, 7);
    await a.send(new PutObjectCommand({ Bucket: 'mpu', Key: 'source.bin', Body: source }));
    const { UploadId } = await a.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key: 'copied.bin' }));
    const copied = await a.send(new UploadPartCopyCommand({ Bucket: 'mpu', Key: 'copied.bin', UploadId, PartNumber: 1, CopySource: 'mpu/source.bin' }));
    expect(copied.CopyPartResult?.ETag).toBe(`"${md5(source).toString('hex')}"`);
    // Another tenant's object cannot be the source.
    await b.send(new CreateBucketCommand({ Bucket: 'mp-b' }));
    const theirs = await b.send(new CreateMultipartUploadCommand({ Bucket: 'mp-b', Key: 'stolen.bin' }));
    expect(await failure(b.send(new UploadPartCopyCommand({ Bucket: 'mp-b', Key: 'stolen.bin', UploadId: theirs.UploadId, PartNumber: 1, CopySource: 'mpu/source.bin' }))))
      .toEqual({ name: 'AccessDenied', status: 403 });
    const tail = Buffer.from('the tail');
    const last = await a.send(new UploadPartCommand({ Bucket: 'mpu', Key: 'copied.bin', UploadId, PartNumber: 2, Body: tail }));
    const done = await a.send(new CompleteMultipartUploadCommand({
      Bucket: 'mpu', Key: 'copied.bin', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: copied.CopyPartResult!.ETag! }, { PartNumber: 2, ETag: last.ETag! }] },
    }));
    expect(done.ETag).toBe(multipartEtag([source, tail]));
    const got = await a.send(new GetObjectCommand({ Bucket: 'mpu', Key: 'copied.bin' }));
    expect((await bytesOf(got.Body)).equals(Buffer.concat([source, tail]))).toBe(true);
  });

  describe('UploadPartCopy of ranges and of multipart objects', () => {
    const big = seededBytes(12 * MiB, 51);
    const mpParts = [seededBytes(5 * MiB, 52), seededBytes(MiB + 77, 53)];
    const mpBytes = Buffer.concat(mpParts);
    const tiny = Buffer.from('a tiny source, kept inline');
    let bigEtag = '';

    beforeAll(async () => {
      bigEtag = (await a.send(new PutObjectCommand({ Bucket: 'mpu', Key: 'copy-src/big.bin', Body: big }))).ETag!;
      await a.send(new PutObjectCommand({ Bucket: 'mpu', Key: 'copy-src/tiny.txt', Body: tiny }));
      const { UploadId } = await a.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key: 'copy-src/multi.bin' }));
      const etags: string[] = [];
      for (const [i, part] of mpParts.entries()) etags.push((await a.send(new UploadPartCommand({ Bucket: 'mpu', Key: 'copy-src/multi.bin', UploadId, PartNumber: i + 1, Body: part }))).ETag!);
      await a.send(new CompleteMultipartUploadCommand({ Bucket: 'mpu', Key: 'copy-src/multi.bin', UploadId, MultipartUpload: { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) } }));
    });

    it('ranges of a 12 MiB object, a whole multipart object, a range of one, a tiny object: each part the MD5 of its bytes; the object byte-exact, its ETag -5 and blob id right', async () => {
      const { UploadId } = await a.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key: 'assembled.bin' }));
      const copy = (PartNumber: number, CopySource: string, CopySourceRange?: string) =>
        a.send(new UploadPartCopyCommand({ Bucket: 'mpu', Key: 'assembled.bin', UploadId, PartNumber, CopySource, ...(CopySourceRange ? { CopySourceRange } : {}) }));
      // Part 1 cuts the source's blocks (its bytes ingested); parts 2 and 3 fall on block
      // boundaries (a multipart object's parts end blocks): named, not written; part 4 ends the source.
      const wanted: Array<[string, string | undefined, Buffer]> = [
        ['mpu/copy-src/big.bin', `bytes=1000-${1000 + 5 * MiB + 4321 - 1}`, big.subarray(1000, 1000 + 5 * MiB + 4321)],
        ['mpu/copy-src/multi.bin', undefined, mpBytes],
        ['mpu/copy-src/multi.bin', `bytes=0-${5 * MiB - 1}`, mpParts[0]!],
        ['mpu/copy-src/big.bin', `bytes=${7 * MiB}-${12 * MiB - 1}`, big.subarray(7 * MiB)],
        ['mpu/copy-src/tiny.txt', undefined, tiny],
      ];
      const etags: string[] = [];
      for (const [i, [source, range, bytes]] of wanted.entries()) {
        const copied = await copy(i + 1, source, range);
        expect(copied.CopyPartResult?.ETag).toBe(`"${md5(bytes).toString('hex')}"`);
        etags.push(copied.CopyPartResult!.ETag!);
      }
      const listed = await a.send(new ListPartsCommand({ Bucket: 'mpu', Key: 'assembled.bin', UploadId }));
      expect(listed.Parts?.map((p) => p.Size)).toEqual(wanted.map(([, , bytes]) => bytes.length));
      const done = await a.send(new CompleteMultipartUploadCommand({
        Bucket: 'mpu', Key: 'assembled.bin', UploadId, MultipartUpload: { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) },
      }));
      const all = Buffer.concat(wanted.map(([, , bytes]) => bytes));
      expect(done.ETag).toBe(multipartEtag(wanted.map(([, , bytes]) => bytes)));
      const got = await a.send(new GetObjectCommand({ Bucket: 'mpu', Key: 'assembled.bin' }));
      expect(got.ETag).toBe(done.ETag);
      expect((await bytesOf(got.Body)).equals(all)).toBe(true);
      // The blob's id is the SHA-256 of the bytes (the parts' hashes were taken right).
      expect(await blobIdOf(a, 'mpu', 'assembled.bin')).toBe(`sha-256:${crypto.createHash('sha256').update(all).digest('hex')}:${all.length}`);
    });

    it('with the upload\'s checksum algorithm, a copied range carries the checksum of its bytes', async () => {
      const { UploadId } = await a.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key: 'summed.bin', ChecksumAlgorithm: 'SHA256' }));
      const copied = await a.send(new UploadPartCopyCommand({ Bucket: 'mpu', Key: 'summed.bin', UploadId, PartNumber: 1, CopySource: 'mpu/copy-src/multi.bin', CopySourceRange: `bytes=${5 * MiB}-${mpBytes.length - 1}` }));
      expect(copied.CopyPartResult?.ChecksumSHA256).toBe(crypto.createHash('sha256').update(mpParts[1]!).digest('base64'));
      expect(copied.CopyPartResult?.ETag).toBe(`"${md5(mpParts[1]!).toString('hex')}"`);
      await a.send(new AbortMultipartUploadCommand({ Bucket: 'mpu', Key: 'summed.bin', UploadId }));
    });

    /** An upload of `refused.bin` and a copy of big.bin into its part 1 (more: the request's other fields). */
    async function refusedCopy() {
      const { UploadId } = await a.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key: 'refused.bin' }));
      return (more: Partial<ConstructorParameters<typeof UploadPartCopyCommand>[0]>) =>
        a.send(new UploadPartCopyCommand({ Bucket: 'mpu', Key: 'refused.bin', UploadId, PartNumber: 1, CopySource: 'mpu/copy-src/big.bin', ...more }));
    }

    it('a malformed x-amz-copy-source-range: 400 InvalidArgument', async () => {
      const copy = await refusedCopy();
      for (const range of ['bytes=abc', 'bytes=10-', 'bytes=20-10', 'items=0-9', 'bytes=-5', 'bytes=0-9,20-29']) {
        expect(await failure(copy({ CopySourceRange: range })), range).toEqual({ name: 'InvalidArgument', status: 400 });
      }
    });

    it('a range past the source\'s end: 416 InvalidRange', async () => {
      const copy = await refusedCopy();
      expect(await failure(copy({ CopySourceRange: `bytes=0-${12 * MiB}` }))).toEqual({ name: 'InvalidRange', status: 416 });
      expect(await failure(copy({ CopySourceRange: `bytes=${12 * MiB}-${12 * MiB + 10}` }))).toEqual({ name: 'InvalidRange', status: 416 });
      // The last byte is in.
      expect((await copy({ CopySourceRange: `bytes=${12 * MiB - 1}-${12 * MiB - 1}` })).CopyPartResult?.ETag).toBe(`"${md5(big.subarray(12 * MiB - 1)).toString('hex')}"`);
    });

    it('a range of another tenant\'s object: 403 AccessDenied', async () => {
      await b.send(new CreateBucketCommand({ Bucket: 'mp-b-range' }));
      const theirs = await b.send(new CreateMultipartUploadCommand({ Bucket: 'mp-b-range', Key: 'stolen.bin' }));
      expect(await failure(b.send(new UploadPartCopyCommand({ Bucket: 'mp-b-range', Key: 'stolen.bin', UploadId: theirs.UploadId, PartNumber: 1, CopySource: 'mpu/copy-src/big.bin', CopySourceRange: 'bytes=0-99' }))))
        .toEqual({ name: 'AccessDenied', status: 403 });
    });

    it('x-amz-copy-source-if-* as CopyObject has them: 412 PreconditionFailed, or the range copied', async () => {
      const copy = await refusedCopy();
      const hourAgo = new Date(Date.now() - 3_600_000);
      const inAnHour = new Date(Date.now() + 3_600_000);
      expect(await failure(copy({ CopySourceRange: 'bytes=0-99', CopySourceIfMatch: '"0123456789abcdef0123456789abcdef"' }))).toEqual({ name: 'PreconditionFailed', status: 412 });
      expect(await failure(copy({ CopySourceRange: 'bytes=0-99', CopySourceIfNoneMatch: bigEtag }))).toEqual({ name: 'PreconditionFailed', status: 412 });
      expect(await failure(copy({ CopySourceRange: 'bytes=0-99', CopySourceIfUnmodifiedSince: hourAgo }))).toEqual({ name: 'PreconditionFailed', status: 412 });
      expect(await failure(copy({ CopySource: 'mpu/copy-src/multi.bin', CopySourceIfModifiedSince: inAnHour }))).toEqual({ name: 'PreconditionFailed', status: 412 });
      const held = await copy({ CopySourceRange: 'bytes=0-99', CopySourceIfMatch: bigEtag, CopySourceIfModifiedSince: hourAgo });
      expect(held.CopyPartResult?.ETag).toBe(`"${md5(big.subarray(0, 100)).toString('hex')}"`);
    });
  });

  it('the parts of a tenant\'s open uploads count against its quota (507) until the upload is aborted', async () => {
    await q.send(new CreateBucketCommand({ Bucket: 'quota' }));
    const { UploadId } = await q.send(new CreateMultipartUploadCommand({ Bucket: 'quota', Key: 'open.bin' }));
    for (const n of [1, 2]) await q.send(new UploadPartCommand({ Bucket: 'quota', Key: 'open.bin', UploadId, PartNumber: n, Body: seededBytes(5 * MiB, 100 + n) }));
    // 10 MiB of parts on record, a 12 MiB quota: 3 MiB more does not fit, as an object or as another upload's part.
    expect(await failure(q.send(new PutObjectCommand({ Bucket: 'quota', Key: 'other.bin', Body: seededBytes(3 * MiB, 5) })))).toMatchObject({ status: 507 });
    const other = await q.send(new CreateMultipartUploadCommand({ Bucket: 'quota', Key: 'other.bin' }));
    expect(await failure(q.send(new UploadPartCommand({ Bucket: 'quota', Key: 'other.bin', UploadId: other.UploadId, PartNumber: 1, Body: seededBytes(3 * MiB, 6) })))).toMatchObject({ status: 507 });
    // The upload's own next part is judged beside the others: 1 MiB more fits, and so does its Complete.
    const last = await q.send(new UploadPartCommand({ Bucket: 'quota', Key: 'open.bin', UploadId, PartNumber: 3, Body: seededBytes(MiB, 103) }));
    expect(last.ETag).toBeTruthy();
    await q.send(new AbortMultipartUploadCommand({ Bucket: 'quota', Key: 'open.bin', UploadId }));
    const put = await q.send(new PutObjectCommand({ Bucket: 'quota', Key: 'other.bin', Body: seededBytes(3 * MiB, 5) }));
    expect(put.ETag).toBeTruthy();
    // Completed, an upload's parts are its object's bytes, counted once.
    const next = await q.send(new CreateMultipartUploadCommand({ Bucket: 'quota', Key: 'done.bin' }));
    const etags: string[] = [];
    for (const n of [1, 2]) etags.push((await q.send(new UploadPartCommand({ Bucket: 'quota', Key: 'done.bin', UploadId: next.UploadId, PartNumber: n, Body: seededBytes(n === 1 ? 5 * MiB : MiB, 200 + n) }))).ETag!);
    await q.send(new CompleteMultipartUploadCommand({ Bucket: 'quota', Key: 'done.bin', UploadId: next.UploadId, MultipartUpload: { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) } }));
    const fits = await q.send(new PutObjectCommand({ Bucket: 'quota', Key: 'two-more.bin', Body: seededBytes(2 * MiB, 7) }));
    expect(fits.ETag).toBeTruthy();
  });
});

describe('garbage collection and open multipart uploads (security off)', () => {
  let open: TestServer;
  let s3: S3Client;
  beforeAll(async () => {
    open = await startServer({ SVC_GC_MIN_AGE: '0s', SVC_GC_QUARANTINE_AGE: '0s', SVC_DURABILITY: 'relaxed' });
    s3 = client(open.s3Url, { accessKeyId: 'anyone', secretAccessKey: 'anything-at-all-0123456789abcdefgh' });
  }, 60_000);
  afterAll(async () => {
    await open?.stop();
  });

  it('keeps the blocks of an open upload\'s parts through a quarantine and a purge; the completed object reads back', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'gc-bucket' }));
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: 'gc-bucket', Key: 'kept.bin' }));
    const bytes = [seededBytes(5 * MiB, 11), seededBytes(2 * MiB, 12)];
    const etags: string[] = [];
    for (const [i, part] of bytes.entries()) etags.push((await s3.send(new UploadPartCommand({ Bucket: 'gc-bucket', Key: 'kept.bin', UploadId, PartNumber: i + 1, Body: part }))).ETag!);
    await gcRun(open.url, 'quarantine', true);
    await gcRun(open.url, 'purge', true);
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: 'gc-bucket', Key: 'kept.bin', UploadId, MultipartUpload: { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) } }));
    const got = await s3.send(new GetObjectCommand({ Bucket: 'gc-bucket', Key: 'kept.bin' }));
    expect((await bytesOf(got.Body)).equals(Buffer.concat(bytes))).toBe(true);
  });
});

describe('UploadPartCopy whose client goes away (security off, SVC_INGEST_BUFFER_BYTES at its 16 MiB floor)', () => {
  let open: TestServer;
  let s3: S3Client;
  beforeAll(async () => {
    open = await startServer({ SVC_INGEST_BUFFER_BYTES: '16MiB', SVC_DURABILITY: 'relaxed' });
    s3 = client(open.s3Url, { accessKeyId: 'anyone', secretAccessKey: 'anything-at-all-0123456789abcdefgh' });
  }, 60_000);
  afterAll(async () => {
    await open?.stop();
  });

  /** A gauge of the server's /metrics (open with security off). */
  const gauge = async (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await fetch(`${open.url}/metrics`)).text())?.[1]);
  /**
   * Until `name` is `value`: polled, never a fixed pause. 5 s without it fails: less than uWS's
   * idle timeout (10 s), which would end the blocker below and free the memory by itself.
   */
  async function gaugeIs(name: string, value: number): Promise<void> {
    for (const until = Date.now() + 5_000; ; await new Promise((r) => setTimeout(r, 20))) {
      const now = await gauge(name);
      if (now === value) return;
      if (Date.now() > until) throw new Error(`${name} is ${now}, not ${value}, after 5 s`);
    }
  }

  it('a range copy into a new part stops when its client leaves: its ingest ends while another upload still holds the memory, and no part is recorded', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'gone' }));
    const source = seededBytes(300_000, 91);
    await s3.send(new PutObjectCommand({ Bucket: 'gone', Key: 'source.bin', Body: source }));
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: 'gone', Key: 'copied.bin' }));
    const url = new URL(open.s3Url);
    // An upload that takes the whole transfer budget and holds it: its body comes later.
    const blockerBody = seededBytes(64 * MiB, 92);
    const blocker = http.request({ host: url.hostname, port: url.port, method: 'PUT', path: '/gone/blocker.bin', headers: { 'Content-Length': String(blockerBody.length) } });
    const blockerDone = new Promise<number>((resolve, reject) => {
      blocker.on('response', (res) => { res.resume(); res.on('end', () => resolve(res.statusCode!)); });
      blocker.on('error', reject);
    });
    // Awaited below; a failure before that must not surface as an unhandled rejection instead of the assertion's error.
    blockerDone.catch(() => {});
    blocker.write(blockerBody.subarray(0, MiB));
    await gaugeIs('svc_transfers_in_flight', 1);
    // A range that cuts a block: streamed into the part's own ingest, which waits for memory.
    const copy = http.request({
      host: url.hostname, port: url.port, method: 'PUT', path: `/gone/copied.bin?partNumber=1&uploadId=${encodeURIComponent(UploadId!)}`,
      headers: { 'x-amz-copy-source': '/gone/source.bin', 'x-amz-copy-source-range': 'bytes=1-200000', 'Content-Length': '0' },
    });
    copy.on('error', () => {});
    copy.end();
    await gaugeIs('svc_transfers_queued', 1);
    copy.destroy();
    // The copy's ingest leaves the queue while the blocker still holds the budget: it did not wait to run to its end.
    await gaugeIs('svc_transfers_queued', 0);
    expect(await gauge('svc_transfers_in_flight')).toBe(1);
    expect((await s3.send(new ListPartsCommand({ Bucket: 'gone', Key: 'copied.bin', UploadId }))).Parts ?? []).toEqual([]);
    // The blocker ends; the budget frees and nothing of the copy resumes.
    blocker.end(blockerBody.subarray(MiB));
    expect(await blockerDone).toBe(200);
    await gaugeIs('svc_transfers_in_flight', 0);
    expect(await gauge('svc_transfers_queued')).toBe(0);
    expect((await s3.send(new ListPartsCommand({ Bucket: 'gone', Key: 'copied.bin', UploadId }))).Parts ?? []).toEqual([]);
    // The same copy with its client staying: the part, the MD5 of its bytes.
    const copied = await s3.send(new UploadPartCopyCommand({ Bucket: 'gone', Key: 'copied.bin', UploadId, PartNumber: 1, CopySource: 'gone/source.bin', CopySourceRange: 'bytes=1-200000' }));
    expect(copied.CopyPartResult?.ETag).toBe(`"${md5(source.subarray(1, 200_001)).toString('hex')}"`);
  });
});

describe.skipIf(TEST_BACKEND !== 'pg-s3')('two pg-s3 nodes: one upload\'s parts on both', () => {
  let second: TestServer;
  beforeAll(async () => {
    second = await startServer({ ...(await backendEnv(server.root)), ...env });
  }, 60_000);
  afterAll(async () => {
    await second?.stop();
  });

  it('parts alternate between the nodes (in parallel, out of order); either lists them, completes, and reads the object', async () => {
    const other = client(second.s3Url, KEY_A);
    const { UploadId } = await other.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key: 'two-nodes.bin' }));
    const bytes = [seededBytes(5 * MiB, 81), seededBytes(5 * MiB, 82), seededBytes(5 * MiB, 83), seededBytes(777_777, 84)];
    const sent = await Promise.all([3, 0, 2, 1].map((i) =>
      (i % 2 === 0 ? a : other).send(new UploadPartCommand({ Bucket: 'mpu', Key: 'two-nodes.bin', UploadId, PartNumber: i + 1, Body: bytes[i] })).then((r) => [i, r.ETag!] as const)));
    const etags = sent.sort((x, y) => x[0] - y[0]).map(([, etag]) => etag);
    const listed = await a.send(new ListPartsCommand({ Bucket: 'mpu', Key: 'two-nodes.bin', UploadId }));
    expect(listed.Parts?.map((p) => p.ETag)).toEqual(etags);
    const done = await a.send(new CompleteMultipartUploadCommand({
      Bucket: 'mpu', Key: 'two-nodes.bin', UploadId, MultipartUpload: { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) },
    }));
    expect(done.ETag).toBe(multipartEtag(bytes));
    for (const node of [a, other]) {
      const got = await node.send(new GetObjectCommand({ Bucket: 'mpu', Key: 'two-nodes.bin' }));
      expect((await bytesOf(got.Body)).equals(Buffer.concat(bytes))).toBe(true);
    }
  });
});
