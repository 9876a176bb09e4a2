// S3's XML (issue 39): every answer document read back by @aws-sdk/client-s3's own deserializers
// (an S3Client whose HTTP handler answers our XML), the error document as the SDK raises it, and
// the request bodies the SDK writes (CompleteMultipartUpload, Delete) parsed by ours, with the
// refusals of the bounds.

import { Readable } from 'node:stream';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetBucketLocationCommand,
  GetObjectCommand,
  ListBucketsCommand,
  ListMultipartUploadsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { S3Error } from '../dist/server/s3/s3-error.js';
import { parseCompleteMultipartUpload, parseDelete } from '../dist/server/s3/xml-requests.js';
import * as xml from '../dist/server/s3/xml.js';

interface Exchange {
  body?: string;
}

/** An S3Client whose every request is answered `status` and `body`; the last request's body is kept. */
function client(status: number, body: string, seen: Exchange = {}): S3Client {
  return new S3Client({
    region: 'us-east-1',
    endpoint: 'http://localhost:9',
    forcePathStyle: true,
    credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' },
    maxAttempts: 1,
    requestHandler: {
      async handle(request: { body?: unknown }) {
        seen.body = typeof request.body === 'string' ? request.body : request.body instanceof Uint8Array ? Buffer.from(request.body).toString('utf8') : undefined;
        return { response: { statusCode: status, headers: { 'content-type': 'application/xml', 'x-amz-request-id': 'req-1' }, body: Readable.from([Buffer.from(body)]) } };
      },
    } as never,
  });
}

const owner = { id: 'alice', displayName: 'Alice' };
const when = new Date('2026-12-01T10:20:30.000Z');

describe('answers, read by @aws-sdk/client-s3', () => {
  it('ListBuckets', async () => {
    const out = await client(200, xml.listBucketsXml(owner, [{ name: 'photos', creationDate: when }, { name: 'logs', creationDate: when }])).send(new ListBucketsCommand({}));
    expect(out.Buckets).toEqual([{ Name: 'photos', CreationDate: when }, { Name: 'logs', CreationDate: when }]);
    expect(out.Owner).toEqual({ ID: 'alice', DisplayName: 'Alice' });
  });

  it('ListObjectsV2: contents with escaped keys, common prefixes, tokens', async () => {
    const body = xml.listObjectsV2Xml({
      bucket: 'photos',
      prefix: 'a/',
      delimiter: '/',
      maxKeys: 2,
      isTruncated: true,
      objects: [{ key: 'a/x&<y>"z\'.txt', lastModified: when, etag: '"0cc175b9c0f1b6a831c399e269772661"', size: 1, owner, checksumAlgorithm: 'CRC32' }],
      commonPrefixes: ['a/b/'],
      continuationToken: 'tok0',
      nextContinuationToken: 'tok1',
      startAfter: 'a/',
    });
    expect(body.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">')).toBe(true);
    const out = await client(200, body).send(new ListObjectsV2Command({ Bucket: 'photos' }));
    expect(out).toMatchObject({
      Name: 'photos',
      Prefix: 'a/',
      Delimiter: '/',
      MaxKeys: 2,
      KeyCount: 2,
      IsTruncated: true,
      ContinuationToken: 'tok0',
      NextContinuationToken: 'tok1',
      StartAfter: 'a/',
      CommonPrefixes: [{ Prefix: 'a/b/' }],
    });
    expect(out.Contents).toEqual([
      { Key: 'a/x&<y>"z\'.txt', LastModified: when, ETag: '"0cc175b9c0f1b6a831c399e269772661"', ChecksumAlgorithm: ['CRC32'], Size: 1, StorageClass: 'STANDARD', Owner: { ID: 'alice', DisplayName: 'Alice' } },
    ]);
  });

  it('ListObjects (v1) with markers; encoding-type=url encodes keys and prefixes', async () => {
    const body = xml.listObjectsV1Xml({
      bucket: 'b',
      prefix: 'dir one/',
      maxKeys: 1000,
      isTruncated: true,
      marker: 'dir one/a',
      nextMarker: 'dir one/c+d',
      objects: [{ key: 'dir one/c+d', lastModified: when, etag: '"e"', size: 0, owner }],
      commonPrefixes: [],
      encodingType: 'url',
    });
    const out = await client(200, body).send(new ListObjectsCommand({ Bucket: 'b', EncodingType: 'url' }));
    expect(out).toMatchObject({ Name: 'b', Prefix: 'dir%20one/', Marker: 'dir%20one/a', NextMarker: 'dir%20one/c%2Bd', EncodingType: 'url', IsTruncated: true, MaxKeys: 1000 });
    expect(out.Contents?.[0]?.Key).toBe('dir%20one/c%2Bd');
    expect(decodeURIComponent(out.Contents![0]!.Key!)).toBe('dir one/c+d');
    const empty = await client(200, xml.listObjectsV2Xml({ bucket: 'b', prefix: '', maxKeys: 1000, isTruncated: false, objects: [], commonPrefixes: [] })).send(new ListObjectsV2Command({ Bucket: 'b' }));
    expect([empty.KeyCount, empty.Contents, empty.IsTruncated]).toEqual([0, undefined, false]);
  });

  it('multipart: Initiate, Complete, ListParts, ListMultipartUploads', async () => {
    const init = await client(200, xml.initiateMultipartXml({ bucket: 'b', key: 'k', uploadId: 'up-1' })).send(new CreateMultipartUploadCommand({ Bucket: 'b', Key: 'k' }));
    expect([init.Bucket, init.Key, init.UploadId]).toEqual(['b', 'k', 'up-1']);
    const done = await client(200, xml.completeMultipartXml({ location: 'http://localhost:9000/b/k', bucket: 'b', key: 'k', etag: '"abc-2"', checksums: { CRC32: 'AAAAAA==' } })).send(
      new CompleteMultipartUploadCommand({ Bucket: 'b', Key: 'k', UploadId: 'up-1', MultipartUpload: { Parts: [{ PartNumber: 1, ETag: '"a"' }] } }),
    );
    expect([done.Location, done.ETag, done.ChecksumCRC32]).toEqual(['http://localhost:9000/b/k', '"abc-2"', 'AAAAAA==']);
    const parts = await client(200, xml.listPartsXml({
      bucket: 'b', key: 'k', uploadId: 'up-1', owner, partNumberMarker: 0, nextPartNumberMarker: 2, maxParts: 2, isTruncated: true,
      parts: [{ partNumber: 1, lastModified: when, etag: '"p1"', size: 5_242_880, checksums: { CRC32C: 'AAAAAA==' } }, { partNumber: 2, lastModified: when, etag: '"p2"', size: 7 }],
    })).send(new ListPartsCommand({ Bucket: 'b', Key: 'k', UploadId: 'up-1' }));
    expect(parts).toMatchObject({ Bucket: 'b', Key: 'k', UploadId: 'up-1', PartNumberMarker: '0', NextPartNumberMarker: '2', MaxParts: 2, IsTruncated: true, Owner: { ID: 'alice' }, Initiator: { ID: 'alice' } });
    expect(parts.Parts).toEqual([
      { PartNumber: 1, LastModified: when, ETag: '"p1"', Size: 5_242_880, ChecksumCRC32C: 'AAAAAA==' },
      { PartNumber: 2, LastModified: when, ETag: '"p2"', Size: 7 },
    ]);
    const uploads = await client(200, xml.listMultipartUploadsXml({
      bucket: 'b', keyMarker: '', uploadIdMarker: '', prefix: '', maxUploads: 1000, isTruncated: false,
      uploads: [{ key: 'k', uploadId: 'up-1', initiated: when, owner }], commonPrefixes: ['d/'], delimiter: '/',
    })).send(new ListMultipartUploadsCommand({ Bucket: 'b' }));
    expect(uploads).toMatchObject({ Bucket: 'b', MaxUploads: 1000, IsTruncated: false, Delimiter: '/', CommonPrefixes: [{ Prefix: 'd/' }] });
    expect(uploads.Uploads).toEqual([{ Key: 'k', UploadId: 'up-1', Initiated: when, StorageClass: 'STANDARD', Owner: { ID: 'alice', DisplayName: 'Alice' }, Initiator: { ID: 'alice', DisplayName: 'Alice' } }]);
  });

  it('CopyObject, DeleteObjects, GetBucketLocation', async () => {
    const copyBody = xml.copyObjectXml({ etag: '"e1"', lastModified: when, checksums: { SHA256: 'x'.repeat(43) + '=' }, checksumType: 'FULL_OBJECT' });
    // AWS's documented order: ETag, LastModified, ChecksumType, then the checksums.
    expect(copyBody).toMatch(/<CopyObjectResult[^>]*><ETag>&quot;e1&quot;<\/ETag><LastModified>[^<]+<\/LastModified><ChecksumType>FULL_OBJECT<\/ChecksumType><ChecksumSHA256>x+=<\/ChecksumSHA256><\/CopyObjectResult>/);
    const copy = await client(200, copyBody).send(new CopyObjectCommand({ Bucket: 'b', Key: 'k2', CopySource: 'b/k' }));
    expect(copy.CopyObjectResult).toEqual({ ETag: '"e1"', LastModified: when, ChecksumType: 'FULL_OBJECT', ChecksumSHA256: 'x'.repeat(43) + '=' });
    const deleted = await client(200, xml.deleteResultXml({ deleted: ['a', 'b&c'], errors: [{ key: 'd', code: 'AccessDenied', message: 'Access Denied' }] })).send(
      new DeleteObjectsCommand({ Bucket: 'b', Delete: { Objects: [{ Key: 'a' }] } }),
    );
    expect(deleted.Deleted).toEqual([{ Key: 'a' }, { Key: 'b&c' }]);
    expect(deleted.Errors).toEqual([{ Key: 'd', Code: 'AccessDenied', Message: 'Access Denied' }]);
    for (const [region, expected] of [['us-east-1', undefined], ['eu-west-1', 'eu-west-1']] as const) {
      const location = await client(200, xml.locationXml(region)).send(new GetBucketLocationCommand({ Bucket: 'b' }));
      expect(location.LocationConstraint || undefined).toBe(expected);
    }
  });

  it('the error document: the SDK raises the code, the message and the status', async () => {
    const body = xml.errorXml(new S3Error('NoSuchKey', 'The specified key does not exist.', { Key: 'missing.txt' }), '/b/missing.txt', 'req-1');
    expect(body).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>missing.txt</Key><Resource>/b/missing.txt</Resource><RequestId>req-1</RequestId></Error>',
    );
    const err = (await client(404, body).send(new GetObjectCommand({ Bucket: 'b', Key: 'missing.txt' })).then(() => undefined, (e: unknown) => e)) as { name: string; message: string; $metadata: { httpStatusCode: number } };
    expect([err.name, err.message, err.$metadata.httpStatusCode]).toEqual(['NoSuchKey', 'The specified key does not exist.', 404]);
    const skew = xml.errorXml(new S3Error('RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.', { ServerTime: when.toISOString() }), '/b', 'req-2');
    const skewed = (await client(403, skew).send(new ListObjectsV2Command({ Bucket: 'b' })).then(() => undefined, (e: unknown) => e)) as { name: string };
    expect(skewed.name).toBe('RequestTimeTooSkewed');
  });
});

function refusal(run: () => unknown): S3Error {
  try {
    run();
  } catch (err) {
    if (err instanceof S3Error) return err;
    throw err;
  }
  throw new Error('no refusal');
}

describe('request bodies', () => {
  it('parses the CompleteMultipartUpload body the SDK writes', async () => {
    const seen: Exchange = {};
    await client(200, xml.completeMultipartXml({ location: 'l', bucket: 'b', key: 'k', etag: '"e"' }), seen).send(
      new CompleteMultipartUploadCommand({
        Bucket: 'b', Key: 'k', UploadId: 'u',
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: '"a1"', ChecksumCRC32: 'AAAAAA==' }, { PartNumber: 2, ETag: '"a2"' }, { PartNumber: 10000, ETag: 'a3' }] },
      }),
    );
    expect(seen.body).toContain('<CompleteMultipartUpload');
    expect(parseCompleteMultipartUpload(seen.body!)).toEqual([
      { partNumber: 1, etag: 'a1', checksums: { CRC32: 'AAAAAA==' } },
      { partNumber: 2, etag: 'a2', checksums: {} },
      { partNumber: 10000, etag: 'a3', checksums: {} },
    ]);
  });

  it('parses the Delete body the SDK writes, quiet or not, keys kept exactly (spaces, entities)', async () => {
    for (const quiet of [true, false]) {
      const seen: Exchange = {};
      await client(200, xml.deleteResultXml({ deleted: [], errors: [] }), seen).send(
        new DeleteObjectsCommand({ Bucket: 'b', Delete: { Quiet: quiet, Objects: [{ Key: ' lead and trail ' }, { Key: 'a&b<c>' }, { Key: 'dir/é.txt' }] } }),
      );
      expect(parseDelete(seen.body!)).toEqual({ quiet, keys: [' lead and trail ', 'a&b<c>', 'dir/é.txt'] });
    }
  });

  it('refuses what is not S3\'s shape, parts out of order, and bodies past the bounds', () => {
    const part = (n: number) => `<Part><PartNumber>${n}</PartNumber><ETag>"e${n}"</ETag></Part>`;
    const complete = (inner: string) => `<CompleteMultipartUpload>${inner}</CompleteMultipartUpload>`;
    expect(parseCompleteMultipartUpload(complete(part(1) + part(3)))).toHaveLength(2);
    expect(refusal(() => parseCompleteMultipartUpload(complete(part(2) + part(1)))).code).toBe('InvalidPartOrder');
    expect(refusal(() => parseCompleteMultipartUpload(complete(part(2) + part(2)))).code).toBe('InvalidPartOrder');
    expect(refusal(() => parseCompleteMultipartUpload(complete(part(0)))).code).toBe('MalformedXML');
    expect(refusal(() => parseCompleteMultipartUpload(complete(part(10001)))).code).toBe('MalformedXML');
    expect(refusal(() => parseCompleteMultipartUpload(complete(''))).code).toBe('MalformedXML');
    expect(refusal(() => parseCompleteMultipartUpload(complete('<Part><PartNumber>1</PartNumber></Part>'))).code).toBe('MalformedXML');
    expect(refusal(() => parseCompleteMultipartUpload(complete(part(1)).replace('</Part>', '<ChecksumCRC32>nope</ChecksumCRC32></Part>'))).code).toBe('InvalidRequest');
    expect(refusal(() => parseCompleteMultipartUpload('<Other>' + part(1) + '</Other>')).code).toBe('MalformedXML');
    expect(refusal(() => parseCompleteMultipartUpload('<CompleteMultipartUpload><Part>')).code).toBe('MalformedXML');
    expect(refusal(() => parseCompleteMultipartUpload('<!DOCTYPE x [<!ENTITY a "aaaa">]>' + complete(part(1)))).code).toBe('MalformedXML');
    expect(refusal(() => parseCompleteMultipartUpload('')).code).toBe('MalformedXML');
    const many = complete(Array.from({ length: 10_001 }, (_, i) => part(i + 1)).join(''));
    expect(refusal(() => parseCompleteMultipartUpload(many)).code).toBe('MalformedXML');
    const big = complete(part(1) + ' '.repeat(2 * 1024 * 1024));
    expect(refusal(() => parseCompleteMultipartUpload(big))).toMatchObject({ code: 'MaxMessageLengthExceeded', status: 400 });
    const del = (inner: string) => `<Delete>${inner}</Delete>`;
    expect(refusal(() => parseDelete(del(Array.from({ length: 1001 }, (_, i) => `<Object><Key>k${i}</Key></Object>`).join('')))).code).toBe('MalformedXML');
    expect(parseDelete(del(Array.from({ length: 1000 }, (_, i) => `<Object><Key>k${i}</Key></Object>`).join(''))).keys).toHaveLength(1000);
    expect(refusal(() => parseDelete(del('<Object><Key></Key></Object>'))).code).toBe('MalformedXML');
    expect(refusal(() => parseDelete(del(`<Object><Key>${'k'.repeat(1025)}</Key></Object>`))).code).toBe('KeyTooLongError');
    expect(refusal(() => parseDelete(del('<Quiet>yes</Quiet><Object><Key>a</Key></Object>'))).code).toBe('MalformedXML');
    expect(refusal(() => parseDelete(del('<Object><Key>a</Key><Key>b</Key></Object>'))).code).toBe('MalformedXML');
  });
});
