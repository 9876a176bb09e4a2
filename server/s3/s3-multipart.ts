// The S3 multipart operations (docs/s3.md "Multipart uploads"): CreateMultipartUpload, UploadPart
// (its body decoded and checked as PutObject's, s3-body.ts, and fed into the part's unlisted
// ingest while the part's own hashes see each piece), UploadPartCopy (a whole object or a range
// of one: the source's blocks or its bytes, engine/s3/part-copy.ts), CompleteMultipartUpload (the
// XML part list), AbortMultipartUpload, ListParts and ListMultipartUploads. The engine
// (engine/s3/multipart-uploads.ts through engine/s3/s3-service.ts) does the work.

import { S3_XML_BODY_MAX_BYTES } from '../../engine/base/limits.js';
import { type StatedObjectChecksum, isObjectChecksumValue, uploadChecksum } from '../../engine/s3/checksum-types.js';
import { CHECKSUM_ALGORITHMS, CHECKSUM_HEADER, type ChecksumAlgorithm, checksumAlgorithm } from '../../engine/s3/checksums.js';
import type { PartBody } from '../../engine/s3/multipart-uploads.js';
import type { CopyRange } from '../../engine/s3/part-copy.js';
import { Collector, bodyChecksOf, pumpBody, requestBodyOf } from './s3-body.js';
import { type S3Call, sendXml } from './s3-call.js';
import { S3Error } from './s3-error.js';
import { contentLengthOf, metaOf, writeConditionsOf } from './s3-head.js';
import { checksumHeaders, checksumTypeOf, copyChecks, copySourceOf } from './s3-objects.js';
import { parseCompleteMultipartUpload } from './xml-requests.js';
import { completeMultipartXml, copyPartXml, initiateMultipartXml, listMultipartUploadsXml, listPartsXml } from './xml.js';

/** `uploadId` of the query (present: the router chose the operation by it). */
const uploadIdOf = (call: S3Call) => call.query.get('uploadId') ?? '';

/** `partNumber` of the query: an integer 1 to 10,000 (the engine refuses one outside). */
function partNumberOf(call: S3Call): number {
  const raw = call.query.get('partNumber') ?? '';
  if (!/^\d{1,5}$/.test(raw)) throw new S3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive', { ArgumentName: 'partNumber', ArgumentValue: raw });
  return Number(raw);
}

/** An optional non-negative integer of the query (max-parts, part-number-marker, max-uploads). */
function integerOf(call: S3Call, name: string): number | undefined {
  const raw = call.query.get(name);
  if (raw === undefined) return undefined;
  if (!/^\d{1,9}$/.test(raw)) throw new S3Error('InvalidArgument', `Provided ${name} not an integer or within integer range`, { ArgumentName: name, ArgumentValue: raw });
  return Number(raw);
}

/**
 * CreateMultipartUpload (POST ?uploads): the object's metadata now, `x-amz-checksum-algorithm`
 * every part then carries and `x-amz-checksum-type` (what the object's checksum will cover: the
 * engine's defaults and refusals, engine/s3/checksum-types.ts), both answered.
 */
export async function createMultipartUpload(call: S3Call): Promise<void> {
  const { engine, head } = call;
  const declared = head.header('x-amz-checksum-algorithm');
  let algorithm: ChecksumAlgorithm | undefined;
  if (declared !== undefined) {
    algorithm = checksumAlgorithm(declared);
    if (!algorithm) throw new S3Error('InvalidRequest', `Checksum algorithm ${declared} is not supported.`);
  }
  const type = head.header('x-amz-checksum-type');
  const { uploadId, record } = await engine.s3.createMultipart(call.principal, head.bucket, head.key, metaOf(head), { ...(algorithm ? { algorithm } : {}), ...(type !== undefined ? { type } : {}) });
  const checksum = uploadChecksum(record);
  const headers: Record<string, string> = checksum ? { 'x-amz-checksum-algorithm': checksum.algorithm, 'x-amz-checksum-type': checksum.type } : {};
  sendXml(call, initiateMultipartXml({ bucket: head.bucket, key: head.key, uploadId }), headers);
}

/** UploadPart (PUT ?partNumber&uploadId): the body checked as PutObject's (Content-MD5, checksums, aws-chunked) into the part's ingest. */
export async function uploadPart(call: S3Call): Promise<void> {
  const { engine, ex, head, payload } = call;
  const checks = bodyChecksOf(head, payload);
  const length = payload.kind === 'chunked' ? payload.decodedLength : contentLengthOf(head);
  if (length === undefined) throw new S3Error('MissingContentLength', 'You must provide the Content-Length HTTP header.');
  const algorithm = checks.headerChecksum?.algorithm ?? checks.trailerChecksum;
  // The part hashes its bytes once (MD5, checksum) and compares what the request stated: Content-MD5, the checksum's header or trailer.
  const body: PartBody = {
    declaredLength: length,
    ...(checks.contentMd5 !== undefined ? { contentMd5: checks.contentMd5 } : {}),
    ...(payload.kind === 'sha256' ? { sha256: payload.sha256 } : {}),
    ...(algorithm ? { checksum: { algorithm, ...(checks.headerChecksum ? { value: checks.headerChecksum.value } : {}) } } : {}),
  };
  const part = await engine.s3.uploadPart(call.principal, head.bucket, head.key, uploadIdOf(call), partNumberOf(call), body);
  // A failure aborts the part's ingest (pumpBody); nothing is recorded before `finish`.
  const measured = await pumpBody(ex, requestBodyOf(ex, head), { ...checks, digestsBySink: true }, part.ingest, engine.stats, (bytes) => part.chunk(bytes));
  const uploaded = await part.finish(measured.trailerChecksum);
  ex.send(200, { ETag: `"${uploaded.etag}"`, ...checksumHeaders(uploaded) });
}

/**
 * `x-amz-copy-source-range: bytes=first-last` (both inclusive), or undefined. Malformed (or first
 * after last): 400 InvalidArgument; outside the source is the engine's 416 InvalidRange.
 */
export function copySourceRangeOf(value: string | undefined): CopyRange | undefined {
  if (value === undefined) return undefined;
  const m = /^bytes=(\d{1,16})-(\d{1,16})$/.exec(value.trim());
  const first = m ? Number(m[1]) : NaN;
  const last = m ? Number(m[2]) : NaN;
  if (!m || !Number.isSafeInteger(first) || !Number.isSafeInteger(last) || first > last) {
    throw new S3Error('InvalidArgument', 'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy', {
      ArgumentName: 'x-amz-copy-source-range', ArgumentValue: value,
    });
  }
  return { first, last };
}

/**
 * UploadPartCopy (PUT ?partNumber&uploadId with x-amz-copy-source): a whole object or a range of
 * one, multipart or not, under CopyObject's x-amz-copy-source-if-* (412); what is read and what
 * is copied is the engine's (engine/s3/part-copy.ts).
 */
export async function uploadPartCopy(call: S3Call): Promise<void> {
  const { engine, head, principal } = call;
  const source = copySourceOf(head.header('x-amz-copy-source')!);
  const partNumber = partNumberOf(call);
  const range = copySourceRangeOf(head.header('x-amz-copy-source-range'));
  // The client going away stops the copy (a range read into a new part can be long): nothing recorded.
  const gone = new AbortController();
  call.ex.onAbort(() => gone.abort());
  if (!call.ex.live) gone.abort();
  const read = await engine.s3.getObject(principal, source.bucket, source.key);
  copyChecks(call)(read.record);
  const uploaded = await engine.s3.copyPart(principal, read, head.bucket, head.key, uploadIdOf(call), partNumber, range, gone.signal);
  sendXml(call, copyPartXml({ etag: `"${uploaded.etag}"`, lastModified: new Date(engine.clock.now()), checksums: uploaded.checksums }));
}

/** CompleteMultipartUpload (POST ?uploadId): the XML list of parts, read within S3_XML_BODY_MAX_BYTES. */
export async function completeMultipartUpload(call: S3Call): Promise<void> {
  const { engine, ex, head } = call;
  const collector = new Collector(S3_XML_BODY_MAX_BYTES);
  // x-amz-checksum-* here is the object's (checked by the engine), not the XML body's.
  const stated = statedObjectChecksumOf(head);
  await pumpBody(ex, requestBodyOf(ex, head), bodyChecksOf(head, call.payload, { objectChecksum: true }), collector, engine.stats);
  const listed = parseCompleteMultipartUpload(collector.bytes());
  const completed = await engine.s3.completeMultipart(call.principal, head.bucket, head.key, uploadIdOf(call), listed, writeConditionsOf(head), stated);
  const host = head.header('host') ?? 'localhost';
  const location = `http://${host}/${encodeURIComponent(head.bucket)}/${head.key.split('/').map(encodeURIComponent).join('/')}`;
  sendXml(call, completeMultipartXml({ location, bucket: head.bucket, key: head.key, etag: `"${completed.etag}"`, checksums: completed.record.checksums, checksumType: checksumTypeOf(completed.record) }), {
    'X-Svc-Blob-Id': completed.blobId,
  });
}

/**
 * Complete's x-amz-checksum-type, x-amz-checksum-* (one; a composite value may end in `-N`) and
 * x-amz-mp-object-size (a decimal byte count, else 400 InvalidArgument): what the object must be.
 */
function statedObjectChecksumOf(head: S3Call['head']): StatedObjectChecksum {
  const stated: StatedObjectChecksum = {};
  const type = head.header('x-amz-checksum-type');
  if (type !== undefined) stated.type = type;
  const size = head.header('x-amz-mp-object-size');
  if (size !== undefined) {
    const trimmed = size.trim();
    if (!/^\d{1,16}$/.test(trimmed) || !Number.isSafeInteger(Number(trimmed))) {
      throw new S3Error('InvalidArgument', 'The x-amz-mp-object-size header value must be the object\'s size in bytes, a non-negative integer', { ArgumentName: 'x-amz-mp-object-size', ArgumentValue: size });
    }
    stated.objectSize = Number(trimmed);
  }
  for (const algorithm of CHECKSUM_ALGORITHMS) {
    const value = head.header(CHECKSUM_HEADER[algorithm])?.trim();
    if (value === undefined) continue;
    if (stated.checksum) throw new S3Error('InvalidRequest', 'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.');
    if (!isObjectChecksumValue(algorithm, value)) throw new S3Error('InvalidRequest', `Value for ${CHECKSUM_HEADER[algorithm]} header is invalid.`);
    stated.checksum = { algorithm, value };
  }
  return stated;
}

/** AbortMultipartUpload (DELETE ?uploadId): 204. */
export async function abortMultipartUpload(call: S3Call): Promise<void> {
  await call.engine.s3.abortMultipart(call.principal, call.head.bucket, call.head.key, uploadIdOf(call));
  call.ex.send(204, {});
}

/** ListParts (GET ?uploadId): part-number-marker, max-parts (≤ 1000). */
export async function listParts(call: S3Call): Promise<void> {
  const { head } = call;
  const partNumberMarker = integerOf(call, 'part-number-marker') ?? 0;
  const maxParts = integerOf(call, 'max-parts');
  const page = await call.engine.s3.listParts(call.principal, head.bucket, head.key, uploadIdOf(call), { partNumberMarker, maxParts });
  const owner = { id: page.upload.owner.subject, displayName: page.upload.owner.subject };
  const checksum = uploadChecksum(page.upload);
  sendXml(call, listPartsXml({
    ...(checksum ? { checksumAlgorithm: checksum.algorithm, checksumType: checksum.type } : {}),
    bucket: head.bucket, key: head.key, uploadId: uploadIdOf(call), owner, partNumberMarker, nextPartNumberMarker: page.nextPartNumberMarker,
    maxParts: Math.min(maxParts ?? 1000, 1000), isTruncated: page.truncated,
    parts: page.parts.map((p) => ({ partNumber: p.partNumber, lastModified: new Date(p.lastModified), etag: `"${p.etag}"`, size: p.size, checksums: p.checksums })),
  }));
}

/** ListMultipartUploads (GET ?uploads on a bucket): prefix, delimiter, key-marker, upload-id-marker, max-uploads, encoding-type. */
export async function listMultipartUploads(call: S3Call): Promise<void> {
  const { query, head } = call;
  const prefix = query.get('prefix') ?? '';
  const delimiter = query.get('delimiter') || undefined;
  const keyMarker = query.get('key-marker') ?? '';
  const uploadIdMarker = query.get('upload-id-marker') ?? '';
  const maxUploads = integerOf(call, 'max-uploads');
  const encoding = query.get('encoding-type');
  if (encoding !== undefined && encoding !== 'url') throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request', { ArgumentName: 'encoding-type', ArgumentValue: encoding });
  const page = await call.engine.s3.listUploads(call.principal, head.bucket, { prefix, delimiter, keyMarker: keyMarker || undefined, uploadIdMarker: uploadIdMarker || undefined, maxUploads });
  const uploads: Parameters<typeof listMultipartUploadsXml>[0]['uploads'][number][] = [];
  const commonPrefixes: string[] = [];
  for (const item of page.items) {
    if (item.prefix !== undefined) commonPrefixes.push(item.prefix);
    else if (item.value) {
      const { uploadId, record } = item.value;
      const checksum = uploadChecksum(record);
      uploads.push({
        key: item.key, uploadId, initiated: new Date(record.initiated), owner: { id: record.owner.subject, displayName: record.owner.subject },
        ...(checksum ? { checksumAlgorithm: checksum.algorithm, checksumType: checksum.type } : {}),
      });
    }
  }
  sendXml(call, listMultipartUploadsXml({
    bucket: head.bucket, keyMarker, uploadIdMarker, nextKeyMarker: page.nextKeyMarker, nextUploadIdMarker: page.nextUploadIdMarker, prefix, delimiter,
    maxUploads: Math.min(maxUploads ?? 1000, 1000), isTruncated: page.truncated, uploads, commonPrefixes, encodingType: encoding === 'url' ? 'url' : undefined,
  }));
}
