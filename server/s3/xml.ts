// S3's XML answers, built with fast-xml-parser's XMLBuilder (text escaped by it): the error
// document and the results of the operations the S3 listener serves. Element names and nesting
// are those @aws-sdk/client-s3's deserializers read (its schemas: ListAllMyBucketsResult with
// <Buckets><Bucket>, flattened <Contents>, <CommonPrefixes>, <Part>, <Upload>, <Deleted>, <Error>).

import { XMLBuilder } from 'fast-xml-parser';
import type { ChecksumType } from '../../engine/s3/checksum-types.js';
import type { ChecksumAlgorithm } from '../../engine/s3/checksums.js';
import type { S3Error } from './s3-error.js';
import { uriEncode } from './sigv4-canonical.js';

export const S3_XMLNS = 'http://s3.amazonaws.com/doc/2006-03-01/';
const DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';

const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', format: false, suppressEmptyNode: false });

type Node = Record<string, unknown>;

/** A document: the declaration, then the root element (with S3's namespace unless `bare`). */
function document(root: string, body: Node, bare = false): string {
  return DECLARATION + builder.build({ [root]: bare ? body : { '@_xmlns': S3_XMLNS, ...body } });
}

/** Drops the fields whose value is undefined (absent elements, as S3 leaves them out). */
function present(node: Node): Node {
  const out: Node = {};
  for (const [k, v] of Object.entries(node)) if (v !== undefined) out[k] = v;
  return out;
}

const iso = (date: Date) => date.toISOString();

export interface Owner {
  id: string;
  displayName: string;
}

const ownerNode = (owner: Owner) => ({ ID: owner.id, DisplayName: owner.displayName });

/** Checksums of an object or part, by algorithm (base64 values). */
export type Checksums = Partial<Record<ChecksumAlgorithm, string>>;

const CHECKSUM_ELEMENT: Record<ChecksumAlgorithm, string> = {
  CRC32: 'ChecksumCRC32',
  CRC32C: 'ChecksumCRC32C',
  CRC64NVME: 'ChecksumCRC64NVME',
  SHA1: 'ChecksumSHA1',
  SHA256: 'ChecksumSHA256',
};

function checksumNodes(checksums: Checksums | undefined): Node {
  const out: Node = {};
  for (const [algorithm, value] of Object.entries(checksums ?? {})) out[CHECKSUM_ELEMENT[algorithm as ChecksumAlgorithm]] = value;
  return out;
}

/** `<Error><Code/><Message/><Resource/><RequestId/>…</Error>` (no namespace, as S3 writes it). */
export function errorXml(err: S3Error, resource: string, requestId: string): string {
  return document('Error', { Code: err.code, Message: err.message, ...err.extra, Resource: resource, RequestId: requestId }, true);
}

export function listBucketsXml(owner: Owner, buckets: ReadonlyArray<{ name: string; creationDate: Date }>): string {
  return document('ListAllMyBucketsResult', {
    Owner: ownerNode(owner),
    Buckets: { Bucket: buckets.map((b) => ({ Name: b.name, CreationDate: iso(b.creationDate) })) },
  });
}

/** GetBucketLocation: empty for us-east-1 (S3's answer there), else the region. */
export function locationXml(region: string): string {
  return document('LocationConstraint', { '#text': region === 'us-east-1' ? '' : region });
}

export interface ListedObject {
  key: string;
  lastModified: Date;
  etag: string;
  size: number;
  /** fetch-owner (v2) and always in v1. */
  owner?: Owner;
  checksumAlgorithm?: ChecksumAlgorithm;
  checksumType?: ChecksumType;
}

interface ListCommon {
  bucket: string;
  prefix: string;
  delimiter?: string;
  maxKeys: number;
  isTruncated: boolean;
  objects: readonly ListedObject[];
  commonPrefixes: readonly string[];
  /** `encoding-type=url`: keys, prefixes, delimiter and markers URL-encoded. */
  encodingType?: 'url';
}

export interface ListV1 extends ListCommon {
  marker: string;
  nextMarker?: string;
}

export interface ListV2 extends ListCommon {
  continuationToken?: string;
  nextContinuationToken?: string;
  startAfter?: string;
}

function listNodes(r: ListCommon): { head: Node; tail: Node } {
  const enc = (text: string | undefined) => (text === undefined || r.encodingType !== 'url' ? text : uriEncode(text, true));
  const contents = r.objects.map((o) =>
    present({
      Key: enc(o.key),
      LastModified: iso(o.lastModified),
      ETag: o.etag,
      ChecksumAlgorithm: o.checksumAlgorithm,
      ChecksumType: o.checksumType,
      Size: o.size,
      StorageClass: 'STANDARD',
      Owner: o.owner ? ownerNode(o.owner) : undefined,
    }),
  );
  return {
    head: present({ Name: r.bucket, Prefix: enc(r.prefix) }),
    tail: present({
      Delimiter: enc(r.delimiter),
      MaxKeys: r.maxKeys,
      EncodingType: r.encodingType,
      IsTruncated: r.isTruncated,
      Contents: contents.length > 0 ? contents : undefined,
      CommonPrefixes: r.commonPrefixes.length > 0 ? r.commonPrefixes.map((p) => ({ Prefix: enc(p) })) : undefined,
    }),
  };
}

/** ListObjects (v1): Marker always, NextMarker when truncated with a delimiter (S3's rule; the caller decides). */
export function listObjectsV1Xml(r: ListV1): string {
  const { head, tail } = listNodes(r);
  const enc = (text: string | undefined) => (text === undefined || r.encodingType !== 'url' ? text : uriEncode(text, true));
  return document('ListBucketResult', { ...head, ...present({ Marker: enc(r.marker), NextMarker: enc(r.nextMarker) }), ...tail });
}

export function listObjectsV2Xml(r: ListV2): string {
  const { head, tail } = listNodes(r);
  const enc = (text: string | undefined) => (text === undefined || r.encodingType !== 'url' ? text : uriEncode(text, true));
  return document('ListBucketResult', {
    ...head,
    ...present({ ContinuationToken: r.continuationToken, NextContinuationToken: r.nextContinuationToken, StartAfter: enc(r.startAfter) }),
    KeyCount: r.objects.length + r.commonPrefixes.length,
    ...tail,
  });
}

export function initiateMultipartXml(r: { bucket: string; key: string; uploadId: string }): string {
  return document('InitiateMultipartUploadResult', { Bucket: r.bucket, Key: r.key, UploadId: r.uploadId });
}

export function completeMultipartXml(r: { location: string; bucket: string; key: string; etag: string; checksums?: Checksums; checksumType?: ChecksumType }): string {
  return document('CompleteMultipartUploadResult', {
    Location: r.location, Bucket: r.bucket, Key: r.key, ETag: r.etag, ...checksumNodes(r.checksums), ...present({ ChecksumType: r.checksumType }),
  });
}

export interface ListedPart {
  partNumber: number;
  lastModified: Date;
  etag: string;
  size: number;
  checksums?: Checksums;
}

export function listPartsXml(r: {
  bucket: string;
  key: string;
  uploadId: string;
  owner: Owner;
  partNumberMarker: number;
  nextPartNumberMarker?: number;
  maxParts: number;
  isTruncated: boolean;
  parts: readonly ListedPart[];
  checksumAlgorithm?: ChecksumAlgorithm;
  checksumType?: ChecksumType;
}): string {
  return document('ListPartsResult', {
    Bucket: r.bucket,
    Key: r.key,
    UploadId: r.uploadId,
    Initiator: ownerNode(r.owner),
    Owner: ownerNode(r.owner),
    StorageClass: 'STANDARD',
    PartNumberMarker: r.partNumberMarker,
    ...present({ NextPartNumberMarker: r.nextPartNumberMarker }),
    MaxParts: r.maxParts,
    IsTruncated: r.isTruncated,
    ...(r.parts.length > 0
      ? { Part: r.parts.map((p) => ({ PartNumber: p.partNumber, LastModified: iso(p.lastModified), ETag: p.etag, Size: p.size, ...checksumNodes(p.checksums) })) }
      : {}),
    ...present({ ChecksumAlgorithm: r.checksumAlgorithm, ChecksumType: r.checksumType }),
  });
}

export function listMultipartUploadsXml(r: {
  bucket: string;
  keyMarker: string;
  uploadIdMarker: string;
  nextKeyMarker?: string;
  nextUploadIdMarker?: string;
  prefix: string;
  delimiter?: string;
  maxUploads: number;
  isTruncated: boolean;
  uploads: ReadonlyArray<{ key: string; uploadId: string; initiated: Date; owner: Owner; checksumAlgorithm?: ChecksumAlgorithm; checksumType?: ChecksumType }>;
  commonPrefixes: readonly string[];
  encodingType?: 'url';
}): string {
  const enc = (text: string | undefined) => (text === undefined || r.encodingType !== 'url' ? text : uriEncode(text, true));
  return document('ListMultipartUploadsResult', {
    Bucket: r.bucket,
    KeyMarker: enc(r.keyMarker),
    UploadIdMarker: r.uploadIdMarker,
    ...present({ NextKeyMarker: enc(r.nextKeyMarker), NextUploadIdMarker: r.nextUploadIdMarker }),
    Prefix: enc(r.prefix),
    ...present({ Delimiter: enc(r.delimiter), EncodingType: r.encodingType }),
    MaxUploads: r.maxUploads,
    IsTruncated: r.isTruncated,
    ...(r.uploads.length > 0
      ? {
          Upload: r.uploads.map((u) => ({
            Key: enc(u.key),
            UploadId: u.uploadId,
            Initiator: ownerNode(u.owner),
            Owner: ownerNode(u.owner),
            StorageClass: 'STANDARD',
            Initiated: iso(u.initiated),
            ...present({ ChecksumAlgorithm: u.checksumAlgorithm, ChecksumType: u.checksumType }),
          })),
        }
      : {}),
    ...(r.commonPrefixes.length > 0 ? { CommonPrefixes: r.commonPrefixes.map((p) => ({ Prefix: enc(p) })) } : {}),
  });
}

/** CopyObject's body (CopyObjectResult). */
export function copyObjectXml(r: { etag: string; lastModified: Date; checksums?: Checksums; checksumType?: ChecksumType }): string {
  // AWS's order: ChecksumType between LastModified and the checksums (CompleteMultipartUploadResult has it last).
  return document('CopyObjectResult', { ETag: r.etag, LastModified: iso(r.lastModified), ...present({ ChecksumType: r.checksumType }), ...checksumNodes(r.checksums) });
}

/** UploadPartCopy's body (CopyPartResult). */
export function copyPartXml(r: { etag: string; lastModified: Date; checksums?: Checksums }): string {
  return document('CopyPartResult', { ETag: r.etag, LastModified: iso(r.lastModified), ...checksumNodes(r.checksums) });
}

/** DeleteObjects: <Deleted> per key deleted (none when quiet), <Error> per key that was not. */
export function deleteResultXml(r: { deleted: readonly string[]; errors: ReadonlyArray<{ key: string; code: string; message: string }> }): string {
  return document('DeleteResult', {
    ...(r.deleted.length > 0 ? { Deleted: r.deleted.map((key) => ({ Key: key })) } : {}),
    ...(r.errors.length > 0 ? { Error: r.errors.map((e) => ({ Key: e.key, Code: e.code, Message: e.message })) } : {}),
  });
}
