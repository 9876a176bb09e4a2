// S3's checksum types through the listener with the AWS SDK (docs/s3.md "Checksum types"):
// FULL_OBJECT multipart uploads (lib-storage's Upload with CRC64NVME, whose default type it is;
// CRC32 with x-amz-checksum-type FULL_OBJECT) answer the CRC of the whole object's bytes, computed
// here independently (zlib, the AWS SDK's CRC-64/NVME), on Complete, HEAD and GET with checksum
// mode; Complete's stated checksum and type are checked (BadDigest, InvalidRequest); COMPOSITE
// uploads keep `-N`; pairs S3 refuses are 400; a PutObject's checksum is FULL_OBJECT.

import crypto from 'node:crypto';
import zlib from 'node:zlib';
import {
  CompleteMultipartUploadCommand, CopyObjectCommand, CreateBucketCommand, CreateMultipartUploadCommand, GetObjectCommand, HeadObjectCommand, ListMultipartUploadsCommand,
  ListObjectsV2Command, ListPartsCommand, PutObjectCommand, S3Client, S3ServiceException, UploadPartCommand,
} from '@aws-sdk/client-s3';
import { Crc32c, Crc64Nvme } from '@aws-sdk/checksums/crc';
import { Upload } from '@aws-sdk/lib-storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededBytes } from './helpers/http.js';
import { s3Client } from './helpers/s3-client.js';
import { type TestServer, startServer } from './helpers/server.js';

const MiB = 1024 * 1024;
const BUCKET = 'sums';
let server: TestServer;
let s3: S3Client;

const crc32 = (data: Uint8Array) => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(zlib.crc32(data));
  return out.toString('base64');
};
const sdkDigest = async (hasher: { update(d: Uint8Array): void; digest(): Promise<Uint8Array> }, data: Uint8Array) => {
  hasher.update(data);
  return Buffer.from(await hasher.digest()).toString('base64');
};
const crc64nvme = (data: Uint8Array) => sdkDigest(new Crc64Nvme(), data);
const crc32c = (data: Uint8Array) => sdkDigest(new Crc32c(), data);

/** The S3 error a command fails with: code, status and message. */
async function refusal(p: Promise<unknown>): Promise<{ name: string; status?: number; message: string }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof S3ServiceException) return { name: err.name, status: err.$metadata.httpStatusCode, message: err.message };
    throw err;
  }
  throw new Error('expected a failure');
}

beforeAll(async () => {
  server = await startServer({});
  s3 = s3Client(server.s3Url, { accessKeyId: 'anyone', secretAccessKey: 'anything-at-all-0123456789abcdefgh' });
  await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

describe('S3 checksum types', () => {
  it('lib-storage Upload with CRC64NVME: FULL_OBJECT, the CRC-64/NVME of the whole bytes (no -N) on Complete, HEAD and GET with checksum mode', async () => {
    const body = Buffer.concat([seededBytes(5 * MiB, 1), seededBytes(5 * MiB, 2), seededBytes(5 * MiB, 3), seededBytes(123_457, 4)]);
    const expected = await crc64nvme(body);
    const done = await new Upload({ client: s3, params: { Bucket: BUCKET, Key: 'full-64.bin', Body: body, ChecksumAlgorithm: 'CRC64NVME' }, queueSize: 4, partSize: 5 * MiB }).done();
    expect(done.ChecksumCRC64NVME).toBe(expected);
    expect(done.ChecksumType).toBe('FULL_OBJECT');
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'full-64.bin', ChecksumMode: 'ENABLED' }));
    expect(head.ChecksumCRC64NVME).toBe(expected);
    expect(head.ChecksumType).toBe('FULL_OBJECT');
    // The SDK validates a full-object checksum against the body it reads.
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'full-64.bin', ChecksumMode: 'ENABLED' }));
    expect(got.ChecksumType).toBe('FULL_OBJECT');
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).toBe(true);
  });

  it('CRC32 with ChecksumType FULL_OBJECT: answered by Create and ListParts; Complete checks the stated checksum and type; the object\'s CRC-32 is zlib\'s', async () => {
    const Key = 'full-32.bin';
    const parts = [seededBytes(5 * MiB, 11), seededBytes(5 * MiB + 3, 12), seededBytes(1, 13)];
    const whole = Buffer.concat(parts);
    const created = await s3.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key, ChecksumAlgorithm: 'CRC32', ChecksumType: 'FULL_OBJECT' }));
    expect(created.ChecksumAlgorithm).toBe('CRC32');
    expect(created.ChecksumType).toBe('FULL_OBJECT');
    const UploadId = created.UploadId!;
    const sent: Array<{ PartNumber: number; ETag: string; ChecksumCRC32: string }> = [];
    for (const [i, Body] of parts.entries()) {
      const r = await s3.send(new UploadPartCommand({ Bucket: BUCKET, Key, UploadId, PartNumber: i + 1, Body, ChecksumAlgorithm: 'CRC32' }));
      expect(r.ChecksumCRC32).toBe(crc32(Body));
      sent.push({ PartNumber: i + 1, ETag: r.ETag!, ChecksumCRC32: r.ChecksumCRC32! });
    }
    const listed = await s3.send(new ListPartsCommand({ Bucket: BUCKET, Key, UploadId }));
    expect([listed.ChecksumAlgorithm, listed.ChecksumType]).toEqual(['CRC32', 'FULL_OBJECT']);
    const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: BUCKET, Prefix: Key }));
    expect(uploads.Uploads?.map((u) => [u.ChecksumAlgorithm, u.ChecksumType])).toEqual([['CRC32', 'FULL_OBJECT']]);
    const complete = (more: Record<string, string>) =>
      s3.send(new CompleteMultipartUploadCommand({ Bucket: BUCKET, Key, UploadId, MultipartUpload: { Parts: sent }, ...more }));
    // A wrong checksum of the object: 400 BadDigest, the upload still open.
    expect(await refusal(complete({ ChecksumCRC32: crc32(parts[0]!) }))).toMatchObject({ name: 'BadDigest', status: 400 });
    expect(await refusal(complete({ ChecksumType: 'COMPOSITE' }))).toEqual({
      name: 'InvalidRequest', status: 400, message: 'The upload was created using the FULL_OBJECT checksum mode. The complete request must use the same checksum mode.',
    });
    expect(await refusal(complete({ ChecksumCRC32C: await crc32c(whole) }))).toMatchObject({ name: 'InvalidRequest', status: 400 });
    const done = await complete({ ChecksumCRC32: crc32(whole), ChecksumType: 'FULL_OBJECT' });
    expect(done.ChecksumCRC32).toBe(crc32(whole));
    expect(done.ChecksumType).toBe('FULL_OBJECT');
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key, ChecksumMode: 'ENABLED' }));
    expect([head.ChecksumCRC32, head.ChecksumType]).toEqual([crc32(whole), 'FULL_OBJECT']);
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key, ChecksumMode: 'ENABLED' }));
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(whole)).toBe(true);
  });

  it('COMPOSITE (CRC32C\'s default) still answers the checksum of the parts\' checksums, -N', async () => {
    const Key = 'composite.bin';
    const parts = [seededBytes(5 * MiB, 21), seededBytes(1000, 22)];
    const created = await s3.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key, ChecksumAlgorithm: 'CRC32C' }));
    expect(created.ChecksumType).toBe('COMPOSITE');
    const sent: Array<{ PartNumber: number; ETag: string; ChecksumCRC32C: string }> = [];
    for (const [i, Body] of parts.entries()) {
      const r = await s3.send(new UploadPartCommand({ Bucket: BUCKET, Key, UploadId: created.UploadId, PartNumber: i + 1, Body, ChecksumAlgorithm: 'CRC32C' }));
      sent.push({ PartNumber: i + 1, ETag: r.ETag!, ChecksumCRC32C: r.ChecksumCRC32C! });
    }
    const composite = `${await crc32c(Buffer.concat(await Promise.all(parts.map(async (p) => Buffer.from(await crc32c(p), 'base64')))))}-2`;
    const done = await s3.send(new CompleteMultipartUploadCommand({ Bucket: BUCKET, Key, UploadId: created.UploadId, MultipartUpload: { Parts: sent } }));
    expect([done.ChecksumCRC32C, done.ChecksumType]).toEqual([composite, 'COMPOSITE']);
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key, ChecksumMode: 'ENABLED' }));
    expect([head.ChecksumCRC32C, head.ChecksumType]).toEqual([composite, 'COMPOSITE']);
    // CopyObject: the copy keeps the source's checksum (no byte moves), answered in CopyObjectResult with its type.
    const copied = await s3.send(new CopyObjectCommand({ Bucket: BUCKET, Key: 'composite-copy.bin', CopySource: `${BUCKET}/${Key}` }));
    expect(copied.CopyObjectResult).toMatchObject({ ChecksumCRC32C: composite, ChecksumType: 'COMPOSITE' });
    const copyHead = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'composite-copy.bin', ChecksumMode: 'ENABLED' }));
    expect([copyHead.ChecksumCRC32C, copyHead.ChecksumType]).toEqual([composite, 'COMPOSITE']);
  });

  it('CopyObjectResult carries the source\'s checksum and ChecksumType (COPY and REPLACE); none for a source without one', async () => {
    const body = crypto.randomBytes(20_000);
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'copy-src.bin', Body: body, ChecksumAlgorithm: 'CRC32' }));
    for (const MetadataDirective of ['COPY', 'REPLACE'] as const) {
      const copied = await s3.send(new CopyObjectCommand({ Bucket: BUCKET, Key: `copy-${MetadataDirective}.bin`, CopySource: `${BUCKET}/copy-src.bin`, MetadataDirective }));
      expect(copied.CopyObjectResult).toEqual({ ETag: `"${crypto.createHash('md5').update(body).digest('hex')}"`, LastModified: expect.any(Date), ChecksumCRC32: crc32(body), ChecksumType: 'FULL_OBJECT' });
    }
    // A source stored without a checksum (no SDK default: a client with checksums only when required): no checksum, no type.
    const plainClient = s3Client(server.s3Url, { accessKeyId: 'anyone', secretAccessKey: 'anything-at-all-0123456789abcdefgh' }, { requestChecksumCalculation: 'WHEN_REQUIRED' });
    await plainClient.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'copy-plain.bin', Body: body }));
    const plain = await plainClient.send(new CopyObjectCommand({ Bucket: BUCKET, Key: 'copy-plain-2.bin', CopySource: `${BUCKET}/copy-plain.bin` }));
    expect(plain.CopyObjectResult).toEqual({ ETag: `"${crypto.createHash('md5').update(body).digest('hex')}"`, LastModified: expect.any(Date) });
    plainClient.destroy();
  });

  it('pairs S3 refuses are 400 InvalidRequest: SHA256 or SHA1 FULL_OBJECT, CRC64NVME COMPOSITE, a type without an algorithm', async () => {
    const create = (more: Record<string, string>) => s3.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: 'refused.bin', ...more }));
    expect(await refusal(create({ ChecksumAlgorithm: 'SHA256', ChecksumType: 'FULL_OBJECT' }))).toEqual({
      name: 'InvalidRequest', status: 400, message: 'The FULL_OBJECT checksum type cannot be used with the sha256 checksum algorithm.',
    });
    expect(await refusal(create({ ChecksumAlgorithm: 'SHA1', ChecksumType: 'FULL_OBJECT' }))).toMatchObject({ name: 'InvalidRequest', status: 400 });
    expect(await refusal(create({ ChecksumAlgorithm: 'CRC64NVME', ChecksumType: 'COMPOSITE' }))).toEqual({
      name: 'InvalidRequest', status: 400, message: 'The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm.',
    });
    expect(await refusal(create({ ChecksumType: 'FULL_OBJECT' }))).toMatchObject({ name: 'InvalidRequest', status: 400 });
    const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: BUCKET, Prefix: 'refused.bin' }));
    expect(uploads.Uploads ?? []).toEqual([]);
  });

  it('a PutObject\'s checksum is FULL_OBJECT (PutObject, HEAD with checksum mode, ListObjectsV2)', async () => {
    const body = crypto.randomBytes(10_000);
    const put = await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'single.bin', Body: body, ChecksumAlgorithm: 'CRC32' }));
    expect([put.ChecksumCRC32, put.ChecksumType]).toEqual([crc32(body), 'FULL_OBJECT']);
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'single.bin', ChecksumMode: 'ENABLED' }));
    expect([head.ChecksumCRC32, head.ChecksumType]).toEqual([crc32(body), 'FULL_OBJECT']);
    // Without checksum mode: neither.
    const plain = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'single.bin' }));
    expect([plain.ChecksumCRC32, plain.ChecksumType]).toEqual([undefined, undefined]);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 's' }));
    expect(listed.Contents?.map((o) => [o.Key, o.ChecksumAlgorithm, o.ChecksumType])).toEqual([['single.bin', ['CRC32'], 'FULL_OBJECT']]);
  });
});
