// The S3 object operations: PutObject (the body streamed into an ingest for the caller, checked,
// then published and named), GetObject and HeadObject (the blob's bytes with ranges, the four
// conditionals and response-* overrides), DeleteObject and CopyObject (a record naming the
// source's blob: no bytes copied). The engine (engine/s3/s3-service.ts) does the work.

import { EMPTY_BLOB_ID, EMPTY_MD5, type ObjectRead } from '../../engine/s3/s3-service.js';
import { preconditionFailed } from '../../engine/s3/errors.js';
import { type ChecksumType, checksumTypeOfValue } from '../../engine/s3/checksum-types.js';
import type { ObjectRecord } from '../../engine/s3/records.js';
import { readConditions, serveBlob } from '../blob-serving.js';
import { evaluate } from '../conditional.js';
import { answerError } from './s3-answer.js';
import { bodyChecksOf, requestBodyOf, type MeasuredBody, pumpBody } from './s3-body.js';
import { type S3Call, sendXml } from './s3-call.js';
import { S3Error } from './s3-error.js';
import { contentLengthOf, metaOf, writeConditionsOf } from './s3-head.js';
import { copyObjectXml } from './xml.js';

const DEFAULT_CONTENT_TYPE = 'binary/octet-stream';

/** PutObject. */
export async function putObject(call: S3Call): Promise<void> {
  const { engine, ex, head, principal, payload } = call;
  const { bucket, key } = head;
  const meta = metaOf(head);
  const conditions = writeConditionsOf(head);
  const checks = bodyChecksOf(head, payload);
  const length = payload.kind === 'chunked' ? payload.decodedLength : contentLengthOf(head);
  if (length === undefined) throw new S3Error('MissingContentLength', 'You must provide the Content-Length HTTP header.');
  await engine.s3.beforePut(principal, bucket, key, conditions);
  const source = requestBodyOf(ex, head);
  let measured: MeasuredBody;
  let blobId: string;
  let tookHold = false;
  let publishedSince: number | undefined;
  if (length === 0) {
    // The store keeps no empty blobs: an empty object names the id of zero bytes (engine/s3/s3-service.ts).
    measured = await pumpBody(ex, source, checks, { push: () => { throw new S3Error('IncompleteBody', 'The body is longer than its declared length'); } }, engine.stats);
    blobId = EMPTY_BLOB_ID;
  } else {
    const stated = { ...(payload.kind === 'sha256' ? { sha256: payload.sha256 } : {}), ...(checks.contentMd5 === undefined ? {} : { contentMd5: checks.contentMd5 }) };
    const ingest = await engine.s3.ingest(call.gated ? principal : undefined, { declaredLength: length, contentType: meta.contentType }, stated);
    measured = await pumpBody(ex, source, { ...checks, digestsBySink: true }, ingest, engine.stats);
    // Every check of the edge passed; the ingest checks the digests it measured, and only then publishes the blob.
    publishedSince = engine.clock.now();
    const result = await ingest.end();
    blobId = result.blob.id;
    tookHold = ingest.tookHold === true;
    measured = { ...measured, md5: result.md5! };
  }
  const record = await engine.s3.putObject(principal, bucket, key, { blobId, size: measured.size, etag: measured.md5, checksums: measured.checksums }, meta, conditions, tookHold, publishedSince);
  ex.send(200, { ETag: `"${record.etag}"`, 'X-Svc-Blob-Id': blobId, ...checksumHeaders(record), ...checksumTypeHeader(record) });
}

/** What the object's checksum covers (engine/s3/checksum-types.ts): FULL_OBJECT, or COMPOSITE for a multipart one's `-N`; none without a checksum. */
export function checksumTypeOf(record: Pick<ObjectRecord, 'checksums'>): ChecksumType | undefined {
  const value = Object.values(record.checksums)[0];
  return value === undefined ? undefined : checksumTypeOfValue(value);
}

/** `x-amz-checksum-type` of an object with a checksum (PutObject, and GetObject and HeadObject with x-amz-checksum-mode: ENABLED). */
function checksumTypeHeader(record: Pick<ObjectRecord, 'checksums'>): Record<string, string> {
  const type = checksumTypeOf(record);
  return type ? { 'x-amz-checksum-type': type } : {};
}

export function checksumHeaders(record: Pick<ObjectRecord, 'checksums'>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [algorithm, value] of Object.entries(record.checksums)) out[`x-amz-checksum-${algorithm.toLowerCase()}`] = value;
  return out;
}

const RESPONSE_OVERRIDES: ReadonlyArray<[string, string]> = [
  ['response-content-type', 'Content-Type'],
  ['response-content-language', 'Content-Language'],
  ['response-expires', 'Expires'],
  ['response-cache-control', 'Cache-Control'],
  ['response-content-disposition', 'Content-Disposition'],
  ['response-content-encoding', 'Content-Encoding'],
];

/** An object's answer besides the validators and the range: its headers, and the two serveBlob takes apart. */
interface ObjectAnswer {
  headers: Record<string, string>;
  contentType: string;
  /** null: no Cache-Control (serveBlob's default is the blob's `immutable`). */
  cacheControl: string | null;
}

function objectAnswer(call: S3Call, record: ObjectRecord): ObjectAnswer {
  // Built in one shape (no `delete`: an object that loses a property turns into a slow
  // dictionary for every header written after).
  const headers: Record<string, string> = { 'X-Svc-Blob-Id': record.blobId };
  let contentType = record.contentType ?? DEFAULT_CONTENT_TYPE;
  let cacheControl = record.cacheControl ?? null;
  if (record.contentEncoding !== undefined) headers['Content-Encoding'] = record.contentEncoding;
  if (record.contentDisposition !== undefined) headers['Content-Disposition'] = record.contentDisposition;
  if (record.expires !== undefined) headers.Expires = record.expires;
  for (const name in record.userMetadata) headers[`x-amz-meta-${name}`] = record.userMetadata[name]!;
  // The whole object's checksums: not for a part of it (S3 answers none for a range either).
  const whole = call.head.header('range') === undefined && call.query.get('partNumber') === undefined;
  if (call.head.header('x-amz-checksum-mode')?.toUpperCase() === 'ENABLED' && whole) Object.assign(headers, checksumHeaders(record), checksumTypeHeader(record));
  if (call.query.size > 0) {
    for (const [param, name] of RESPONSE_OVERRIDES) {
      const value = call.query.get(param);
      if (value === undefined) continue;
      if (name === 'Content-Type') contentType = value;
      else if (name === 'Cache-Control') cacheControl = value;
      else headers[name] = value;
    }
  }
  return { headers, contentType, cacheControl };
}

/** GetObject and HeadObject: answered at once when the engine has the object at hand (engine/s3/s3-service.ts getObject). */
export function getObject(call: S3Call): void | Promise<void> {
  const read = call.engine.s3.getObject(call.principal, call.head.bucket, call.head.key);
  if (read instanceof Promise) return read.then((r) => answerObject(call, r));
  answerObject(call, read);
}

function answerObject(call: S3Call, { record, manifest }: ObjectRead): void {
  const { engine, ex, head } = call;
  const conditions = readConditions({ getHeader: (name: string) => head.header(name) ?? '' } as Parameters<typeof readConditions>[0]);
  const partNumber = call.query.get('partNumber');
  const { headers, contentType, cacheControl } = objectAnswer(call, record);
  if (partNumber !== undefined) Object.assign(conditions, partRange(record, partNumber, conditions.range));
  if (record.parts !== undefined) headers['x-amz-mp-parts-count'] = String(record.parts.length);
  const etag = `"${record.etag}"`;
  const refuse = (status: 412 | 416, extra: Record<string, string>) =>
    answerError(ex, head.resource, status === 412 ? preconditionFailed() : new S3Error('InvalidRange', 'The requested range is not satisfiable', { ActualObjectSize: String(record.size) }), extra);
  const headOnly = ex.method === 'HEAD';
  if (!manifest) return serveEmpty(call, record, conditions, { ...headers, 'Content-Type': contentType, ...(cacheControl === null ? {} : { 'Cache-Control': cacheControl }) }, refuse);
  serveBlob(engine, ex, conditions, manifest, headOnly, { etag, mediaType: contentType, lastModifiedMs: record.lastModified, cacheControl, headers, refuse }, call.charge);
}

/**
 * GetObject and HeadObject with `partNumber`: part N of a multipart object is the range of its
 * bytes (206, as S3 answers); part 1 of an object that was not uploaded in parts is all of it.
 */
function partRange(record: ObjectRecord, raw: string, range: string | undefined): { range?: string; ifRange?: string } {
  if (range !== undefined) throw new S3Error('InvalidRequest', 'Cannot specify both Range header and partNumber query parameter');
  if (!/^\d{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > 10_000) throw new S3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive', { ArgumentName: 'partNumber', ArgumentValue: raw });
  const n = Number(raw);
  const parts = record.parts ?? [record.size];
  if (n > parts.length) throw new S3Error('InvalidPartNumber', 'The requested partnumber is not satisfiable', { PartNumberRequested: raw, ActualPartCount: String(parts.length) });
  if (record.parts === undefined) return {};
  const start = parts.slice(0, n - 1).reduce((sum, size) => sum + size, 0);
  // An empty part (only the last may be): no range of it can be said; the empty end of the object.
  if (parts[n - 1] === 0) return { range: `bytes=${record.size}-`, ifRange: undefined };
  return { range: `bytes=${start}-${start + parts[n - 1]! - 1}`, ifRange: undefined };
}

/** An empty object: its conditionals, and no bytes (a range of nothing is 416). */
function serveEmpty(call: S3Call, record: ObjectRecord, conditions: ReturnType<typeof readConditions>, headers: Record<string, string>, refuse: (status: 412 | 416, extra: Record<string, string>) => void): void {
  const lastModified = Math.floor(record.lastModified / 1000) * 1000;
  const validators = { ETag: `"${record.etag || EMPTY_MD5}"`, 'Last-Modified': new Date(lastModified).toUTCString() };
  const decision = evaluate({ etag: validators.ETag, lastModified, size: 0 }, conditions);
  if (decision.status === 304) return call.ex.send(304, validators);
  if (decision.status === 412 || decision.status === 416) return refuse(decision.status, validators);
  call.ex.send(200, { ...headers, ...validators, 'Accept-Ranges': 'bytes' }, new Uint8Array(0));
}

/** DeleteObject: 204 whether the key held an object or not. */
export async function deleteObject(call: S3Call): Promise<void> {
  await call.engine.s3.deleteObject(call.principal, call.head.bucket, call.head.key);
  call.ex.send(204, {});
}

/** `x-amz-copy-source`: `/bucket/key` or `bucket/key`, URL-encoded; a versionId is not served. */
export function copySourceOf(value: string): { bucket: string; key: string } {
  const [path, version] = value.split('?', 2) as [string, string | undefined];
  if (version !== undefined && /(^|&)versionId=/.test(version)) throw new S3Error('NotImplemented', 'Versioned copy sources are not implemented');
  let decoded: string;
  try {
    decoded = decodeURIComponent(path.startsWith('/') ? path.slice(1) : path);
  } catch {
    throw new S3Error('InvalidArgument', 'x-amz-copy-source is not valid percent-encoded UTF-8');
  }
  const slash = decoded.indexOf('/');
  if (slash <= 0 || slash === decoded.length - 1) throw new S3Error('InvalidArgument', 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey');
  return { bucket: decoded.slice(0, slash), key: decoded.slice(slash + 1) };
}

/** The x-amz-copy-source-if-* conditions as S3 combines them, checked against the source record. */
export function copyChecks(call: S3Call): (source: ObjectRecord) => void {
  const h = (name: string) => call.head.header(`x-amz-copy-source-if-${name}`);
  const ifMatch = h('match');
  const ifNoneMatch = h('none-match');
  const ifModifiedSince = dateOf(h('modified-since'));
  const ifUnmodifiedSince = dateOf(h('unmodified-since'));
  return (source) => {
    const etag = source.etag;
    const modified = Math.floor(source.lastModified / 1000) * 1000;
    const matches = (list: string) => list.split(',').some((t) => t.trim() === '*' || t.trim().replace(/^"(.*)"$/, '$1') === etag);
    // S3: If-Match true overrides If-Unmodified-Since false; If-None-Match false overrides If-Modified-Since true.
    if (ifMatch !== undefined && !matches(ifMatch)) throw preconditionFailed();
    if (ifMatch === undefined && ifUnmodifiedSince !== undefined && modified > ifUnmodifiedSince) throw preconditionFailed();
    if (ifNoneMatch !== undefined && matches(ifNoneMatch)) throw preconditionFailed();
    if (ifNoneMatch === undefined && ifModifiedSince !== undefined && modified <= ifModifiedSince) throw preconditionFailed();
  };
}

function dateOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** CopyObject (PUT with x-amz-copy-source): no bytes copied. */
export async function copyObject(call: S3Call): Promise<void> {
  const { engine, head, principal } = call;
  const source = copySourceOf(head.header('x-amz-copy-source')!);
  const directive = (head.header('x-amz-metadata-directive') ?? 'COPY').toUpperCase();
  if (directive !== 'COPY' && directive !== 'REPLACE') throw new S3Error('InvalidArgument', 'Unknown metadata directive.');
  const meta = directive === 'REPLACE' ? metaOf(head) : undefined;
  const record = await engine.s3.copyObject(principal, { ...source, check: copyChecks(call) }, head.bucket, head.key, meta, writeConditionsOf(head));
  // The copy's checksum is the source's (no byte moves), with its type, as HeadObject with checksum mode answers it.
  sendXml(call, copyObjectXml({ etag: `"${record.etag}"`, lastModified: new Date(record.lastModified), checksums: record.checksums, checksumType: checksumTypeOf(record) }), {
    'X-Svc-Blob-Id': record.blobId,
  });
}
