// The S3 bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
// GetBucketLocation, ListObjects (v1) and ListObjectsV2, DeleteObjects.

import { S3_XML_BODY_MAX_BYTES } from '../../engine/base/limits.js';
import { SvcError } from '../../engine/base/errors.js';
import type { ObjectRecord } from '../../engine/s3/records.js';
import type { Listed } from '../../engine/s3/listing.js';
import { checksumTypeOfValue } from '../../engine/s3/checksum-types.js';
import type { ChecksumAlgorithm } from '../../engine/s3/checksums.js';
import { Collector, bodyChecksOf, pumpBody, requestBodyOf } from './s3-body.js';
import { type S3Call, sendXml } from './s3-call.js';
import { S3Error } from './s3-error.js';
import { parseDelete } from './xml-requests.js';
import { type ListedObject, deleteResultXml, listBucketsXml, listObjectsV1Xml, listObjectsV2Xml, locationXml } from './xml.js';

const owner = (call: S3Call) => ({ id: call.principal.subject, displayName: call.displayName });

export async function listBuckets(call: S3Call): Promise<void> {
  const buckets = await call.engine.s3.listBuckets(call.principal);
  sendXml(call, listBucketsXml(owner(call), buckets.map((b) => ({ name: b.name, creationDate: new Date(b.created) }))));
}

/** A small body (XML), read whole within S3_XML_BODY_MAX_BYTES and checked like any body. */
async function readSmallBody(call: S3Call): Promise<Buffer> {
  const collector = new Collector(S3_XML_BODY_MAX_BYTES);
  await pumpBody(call.ex, requestBodyOf(call.ex, call.head), bodyChecksOf(call.head, call.payload), collector, call.engine.stats);
  return collector.bytes();
}

/** CreateBucket: its CreateBucketConfiguration (a LocationConstraint) is read and not needed: one region. */
export async function createBucket(call: S3Call): Promise<void> {
  await readSmallBody(call);
  await call.engine.s3.createBucket(call.principal, call.head.bucket);
  call.ex.send(200, { Location: `/${call.head.bucket}` });
}

export async function headBucket(call: S3Call): Promise<void> {
  await call.engine.s3.headBucket(call.principal, call.head.bucket);
  call.ex.send(200, { 'x-amz-bucket-region': call.engine.s3.region });
}

export async function deleteBucket(call: S3Call): Promise<void> {
  await call.engine.s3.deleteBucket(call.principal, call.head.bucket);
  call.ex.send(204, {});
}

export async function getBucketLocation(call: S3Call): Promise<void> {
  await call.engine.s3.headBucket(call.principal, call.head.bucket);
  sendXml(call, locationXml(call.engine.s3.region));
}

/** DeleteObjects (POST ?delete): each key deleted on its own; Quiet answers only the failures. */
export async function deleteObjects(call: S3Call): Promise<void> {
  const { quiet, keys } = parseDelete(await readSmallBody(call));
  const results = await call.engine.s3.deleteObjects(call.principal, call.head.bucket, keys);
  const deleted = quiet ? [] : results.filter((r) => !r.error).map((r) => r.key);
  const errors = results.flatMap((r) => (r.error ? [{ key: r.key, ...r.error }] : []));
  sendXml(call, deleteResultXml({ deleted, errors }));
}

function maxKeysOf(call: S3Call): number | undefined {
  const raw = call.query.get('max-keys');
  if (raw === undefined) return undefined;
  if (!/^\d{1,9}$/.test(raw)) throw new S3Error('InvalidArgument', 'Provided max-keys not an integer or within integer range', { ArgumentName: 'max-keys', ArgumentValue: raw });
  return Number(raw);
}

function encodingOf(call: S3Call): 'url' | undefined {
  const raw = call.query.get('encoding-type');
  if (raw === undefined) return undefined;
  if (raw !== 'url') throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request', { ArgumentName: 'encoding-type', ArgumentValue: raw });
  return 'url';
}

function listed(items: ReadonlyArray<Listed<ObjectRecord>>, withOwner: boolean): { objects: ListedObject[]; commonPrefixes: string[] } {
  const objects: ListedObject[] = [];
  const commonPrefixes: string[] = [];
  for (const item of items) {
    if (item.prefix !== undefined) {
      commonPrefixes.push(item.prefix);
      continue;
    }
    const r = item.value;
    const algorithm = Object.keys(r.checksums)[0] as ChecksumAlgorithm | undefined;
    objects.push({
      key: item.key,
      lastModified: new Date(r.lastModified),
      etag: `"${r.etag}"`,
      size: r.size,
      ...(withOwner ? { owner: { id: r.owner.subject, displayName: r.owner.subject } } : {}),
      ...(algorithm ? { checksumAlgorithm: algorithm, checksumType: checksumTypeOfValue(r.checksums[algorithm]!) } : {}),
    });
  }
  return { objects, commonPrefixes };
}

/** ListObjects (v1): Marker, and NextMarker when truncated with a delimiter (S3's rule). */
export async function listObjectsV1(call: S3Call): Promise<void> {
  const { query } = call;
  const prefix = query.get('prefix') ?? '';
  const delimiter = query.get('delimiter') || undefined;
  const marker = query.get('marker') ?? '';
  const maxKeys = maxKeysOf(call);
  const encodingType = encodingOf(call);
  const page = await call.engine.s3.listObjects(call.principal, call.head.bucket, { prefix, delimiter, maxKeys, after: marker || undefined });
  sendXml(call, listObjectsV1Xml({
    bucket: call.head.bucket, prefix, delimiter, maxKeys: Math.min(maxKeys ?? 1000, 1000), isTruncated: page.truncated, marker,
    nextMarker: page.truncated && delimiter ? page.next : undefined, encodingType, ...listed(page.items, true),
  }));
}

/** ListObjectsV2: the continuation token is the position sealed for this caller and this listing (engine cursors). */
export async function listObjectsV2(call: S3Call): Promise<void> {
  const { query, principal } = call;
  const prefix = query.get('prefix') ?? '';
  const delimiter = query.get('delimiter') || undefined;
  const startAfter = query.get('start-after');
  const token = query.get('continuation-token');
  const maxKeys = maxKeysOf(call);
  const encodingType = encodingOf(call);
  const cursors = call.engine.cursors.of('s3-objects', principal, {
    malformed: (message) => new SvcError('invalid', 'invalid_argument', `The continuation token provided is incorrect: ${message}`),
  });
  const listing = { bucket: call.head.bucket, prefix, delimiter: delimiter ?? null };
  // The bucket first: another tenant's is AccessDenied whatever token comes with it.
  if (token !== undefined) await call.engine.s3.headBucket(principal, call.head.bucket);
  let after = token === undefined ? undefined : cursors.open(listing, token);
  if (after === undefined && startAfter) after = startAfter;
  const page = await call.engine.s3.listObjects(principal, call.head.bucket, { prefix, delimiter, maxKeys, after });
  sendXml(call, listObjectsV2Xml({
    bucket: call.head.bucket, prefix, delimiter, maxKeys: Math.min(maxKeys ?? 1000, 1000), isTruncated: page.truncated,
    continuationToken: token, nextContinuationToken: page.truncated && page.next !== undefined ? cursors.seal(listing, page.next) : undefined,
    startAfter: startAfter || undefined, encodingType, ...listed(page.items, query.get('fetch-owner') === 'true'),
  }));
}
