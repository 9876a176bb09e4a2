// tus 1.0.0 at /files/ (docs/tus.md): core, creation, creation-with-upload, creation-defer-length,
// termination, expiration, checksum and concatenation, over the contract's resumable sessions. A tus upload is a
// session: /files/{id} and /api/v1/uploads/{id} name the same state and bytes, the same leases,
// expiry and cleanup; when its offset reaches its length it is committed as the contract's commit
// is, and the answer (and every later HEAD) names the blob. Errors keep svc's JSON envelope with
// the protocol's statuses; every answer says `Tus-Resumable: 1.0.0`.

import { createHash, randomUUID, type Hash } from 'node:crypto';
import type { Principal } from '../engine/auth/index.js';
import { SvcError, invalidUpload, payloadTooLarge, uploadNotFound } from '../engine/base/errors.js';
import type { SessionRecord, TusFacts } from '../engine/store/index.js';
import { TUS_MAX_PARTIALS } from '../engine/base/limits.js';
import { HeldBody } from './body-sources.js';
import { type Exchange, type RequestHead, header } from './exchange.js';
import { parseContentType } from './request-parsing.js';
import type { Call, Router } from './router.js';
import type { ServerContext } from './server-context.js';
import { answerOnce, emptyAnswer, keyedRequest, scopeOf } from './idempotent.js';
import { type BodyCheck, byteCount, receivePart, tenantOf } from './session-parts.js';

export const TUS_VERSION = '1.0.0';
const EXTENSIONS = 'creation,creation-with-upload,creation-defer-length,termination,expiration,checksum,concatenation';
const CHECKSUMS: Record<string, string> = { sha1: 'sha1', sha256: 'sha256' };
const OFFSET_STREAM = 'application/offset+octet-stream';
const COLLECTION = ['/files', '/files/'];
const UPLOAD = '/files/:id';
/** What defines a tus creation beside method and path: the headers an Idempotency-Key's repeat must match. */
const TUS_DEFINING = ['upload-length', 'upload-defer-length', 'upload-metadata', 'upload-concat', 'content-type'];
const NO_BODY = async () => undefined;

/** Every tus answer's header. */
export const TUS_HEADERS: ReadonlyArray<[string, string]> = [['Tus-Resumable', TUS_VERSION]];

/** What OPTIONS tells a tus client (the tus router's discovery headers). */
export function tusDiscovery(maxBytes: number): ReadonlyArray<[string, string]> {
  return [['Tus-Version', TUS_VERSION], ['Tus-Extension', EXTENSIONS], ['Tus-Max-Size', String(maxBytes)], ['Tus-Checksum-Algorithm', Object.keys(CHECKSUMS).join(',')]];
}

/** The headers a tus request is answered from, read before the handler's first await (uWS's request lives until then). */
interface TusHead {
  tenant: string;
  contentLength?: string;
  contentType?: string;
  uploadOffset?: string;
  uploadLength?: string;
  checksum?: string;
  /** Whether a body comes: a Content-Length above 0, or chunked. */
  carriesBytes: boolean;
}

function readHead(req: RequestHead, principal: Principal | undefined): TusHead {
  requireTus(req);
  const contentLength = header(req, 'content-length');
  return {
    tenant: tenantOf(req, principal),
    contentLength,
    contentType: header(req, 'content-type')?.split(';')[0]!.trim().toLowerCase(),
    uploadOffset: header(req, 'upload-offset'),
    uploadLength: header(req, 'upload-length'),
    checksum: header(req, 'upload-checksum'),
    carriesBytes: contentLength !== undefined ? contentLength !== '0' : header(req, 'transfer-encoding') !== undefined,
  };
}

export function mountTusApi(router: Router, { engine }: ServerContext): void {
  const uploads = engine.uploads;
  const maxBytes = engine.config.maxUploadBytes;
  const collection = { fallbackCode: 'ingest_failed', capability: 'blob.write', operation: true, name: '/files/' };
  const operation = { fallbackCode: 'ingest_failed', capability: 'blob.write', operation: true, name: UPLOAD };
  const write = { fallbackCode: 'ingest_failed', capability: 'blob.write', name: UPLOAD };
  const read = { fallbackCode: 'ingest_failed', capability: 'blob.read', name: UPLOAD };

  /** The upload a request names, as its tenant sees it; a terminated one is gone (410). */
  const current = async (tenant: string, id: string): Promise<SessionRecord> => {
    const record = await uploads.status(tenant, uploadId(id));
    if (record.state === 'Cancelled') throw new SvcError('gone', 'upload_terminated', `Upload ${record.id} was terminated`);
    return record;
  };

  /** Bytes for an upload (a PATCH, or a creation's): the part, then the commit once every byte is in. */
  const receive = (call: Call, head: TusHead, body: HeldBody, record: SessionRecord, created: boolean) => {
    const { ex, principal } = call;
    receivePart(ex, engine, head.contentLength, () => {
      if (head.contentType !== OFFSET_STREAM) throw wrongContentType();
      const offset = created ? 0 : byteCount(head.uploadOffset, 'Upload-Offset', true);
      const length = byteCount(head.contentLength, 'Content-Length', true);
      if (offset + length > maxBytes) throw payloadTooLarge(maxBytes);
      const total = record.declaredLength;
      if (total !== undefined && offset === record.offset && offset + length > total) {
        throw new SvcError('too_large', 'upload_length_exceeded', `The body would take the upload past its Upload-Length of ${total} bytes`);
      }
      return { tenant: record.tenant, id: record.id, partId: randomUUID(), offset, length, maxPartBytes: maxBytes };
    }, {
      principal,
      check: checksumOf(head.checksum),
      answer: async (after) => {
        // Complete once every byte is in: committed as the contract's commit is.
        const done = await uploads.commitIfWhole(after, principal);
        ex.send(created ? 201 : 204, { ...uploadHeaders(done), ...(created ? { Location: `/files/${done.id}` } : {}) });
      },
    }, body);
  };

  /** PATCH, or POST with X-HTTP-Method-Override: PATCH. */
  const patch = async (call: Call, head: TusHead) => {
    // Held from the first byte: uWS drops body data that arrives while nothing reads.
    const body = new HeldBody(call.ex.body);
    let record = await current(head.tenant, call.params[0]!);
    if (Array.isArray(record.tus?.concat)) throw new SvcError('forbidden', 'upload_final', 'A final upload takes no bytes: it is its partial uploads');
    // creation-defer-length: the length, once, with a PATCH.
    if (head.uploadLength !== undefined) {
      const length = uploadLength(head.uploadLength, maxBytes);
      // A deferred length reserves its room when it is declared (the engine: 413 or 507 now, as at creation).
      record = await uploads.declareLength(record.tenant, record.id, length, call.principal);
    }
    receive(call, head, body, record, false);
  };
  const terminate = async (ex: Exchange, head: TusHead, id: string) => {
    const record = await current(head.tenant, id);
    await uploads.cancel(record.tenant, record.id);
    ex.send(204, {});
  };
  const status = async (ex: Exchange, head: TusHead, id: string) => ex.send(200, uploadHeaders(await current(head.tenant, id)), '');

  for (const pattern of COLLECTION) {
    router.on('POST', pattern, async (call) => {
      const { ex, req, principal } = call;
      const head = readHead(req, principal);
      const { declaredLength, tus, contentType } = creation(req, maxBytes);
      const keyed = keyedRequest(req, ex.method, TUS_DEFINING);
      // A creation without bytes is answered once per Idempotency-Key (server/idempotent.ts); with bytes, a key is refused.
      if (keyed && head.carriesBytes) {
        throw new SvcError('invalid', 'idempotency_key_unsupported', 'An Idempotency-Key applies to a tus creation without bytes: create the upload with the key, then PATCH its bytes');
      }
      const once = (create: () => Promise<SessionRecord>) => answerOnce(ex, engine.idempotency, scopeOf(head.tenant, principal), keyed, NO_BODY, async () => {
        const record = await create();
        return emptyAnswer(201, { ...uploadHeaders(record), Location: `/files/${record.id}` });
      });
      if (Array.isArray(tus.concat)) {
        // A final upload: assembled now from its finished partial uploads, complete at creation.
        if (head.carriesBytes) throw new SvcError('forbidden', 'upload_final', 'A final upload takes no bytes of its own');
        // A new object all the same: the tenant's object limit, quota and the caller's byte budget apply to its length.
        const partials = tus.concat;
        return once(() => uploads.concatenate({ tenant: head.tenant, id: randomUUID(), partials, contentType, tus, maxBytes }, principal));
      }
      if (head.carriesBytes && head.contentType !== OFFSET_STREAM) throw wrongContentType();
      const body = head.carriesBytes ? new HeldBody(ex.body) : undefined;
      // The engine reserves the room of an Upload-Length in the tenant's quota, before any byte (413, 507 when it cannot).
      const start = () => uploads.create({ tenant: head.tenant, id: randomUUID(), declaredLength, contentType, tus }, principal);
      if (!body) return once(start);
      const record = await start();
      // creation-with-upload: the body is the upload's first bytes.
      receive(call, head, body, record, true);
    }, collection);
  }

  router.on('HEAD', UPLOAD, ({ ex, req, params, principal }) => status(ex, readHead(req, principal), params[0]!), read);
  router.on('PATCH', UPLOAD, (call) => patch(call, readHead(call.req, call.principal)), operation);
  router.on('DELETE', UPLOAD, ({ ex, req, params, principal }) => terminate(ex, readHead(req, principal), params[0]!), write);

  // X-HTTP-Method-Override: clients behind proxies that pass only GET and POST.
  router.on('POST', UPLOAD, (call) => {
    const method = header(call.req, 'x-http-method-override')?.toUpperCase();
    if (method !== 'PATCH' && method !== 'DELETE' && method !== 'HEAD') {
      throw new SvcError('method_not_allowed', 'method_not_allowed', 'POST on an upload needs X-HTTP-Method-Override: PATCH, DELETE or HEAD', { allow: 'DELETE, HEAD, OPTIONS, PATCH, POST' });
    }
    const head = readHead(call.req, call.principal);
    if (method === 'PATCH') return patch(call, head);
    return method === 'DELETE' ? terminate(call.ex, head, call.params[0]!) : status(call.ex, head, call.params[0]!);
  }, operation);
}

/** An upload's headers: where it stands, until when, and (complete) its blob. */
function uploadHeaders(r: SessionRecord): Record<string, string | undefined> {
  const blob = r.state === 'Committed' ? r.committedBlob : undefined;
  return {
    'Upload-Offset': String(r.offset),
    'Upload-Length': r.declaredLength === undefined ? undefined : String(r.declaredLength),
    'Upload-Defer-Length': r.declaredLength === undefined ? '1' : undefined,
    'Upload-Metadata': r.tus?.metadata,
    'Upload-Concat': r.tus?.concat === undefined ? undefined : r.tus.concat === 'partial' ? 'partial' : `final;${r.tus.concat.map((id) => `/files/${id}`).join(' ')}`,
    'Upload-Expires': r.state === 'Open' ? new Date(r.expiresAt).toUTCString() : undefined,
    'X-Svc-Blob-Id': blob,
    'X-Svc-Blob-Location': blob === undefined ? undefined : `/api/v1/blobs/${blob}`,
    'Cache-Control': 'no-store',
  };
}

/** 412 for a request that does not speak tus 1.0.0. */
function requireTus(req: RequestHead): void {
  const version = header(req, 'tus-resumable');
  if (version === TUS_VERSION) return;
  const message = version === undefined ? `Tus-Resumable: ${TUS_VERSION} is required` : `Tus-Resumable ${JSON.stringify(version.slice(0, 40))} is not supported; this server speaks ${TUS_VERSION}`;
  throw new SvcError('precondition_failed', 'tus_version_unsupported', message, { supportedVersions: TUS_VERSION });
}

/** What a creation request declares: its length (or that it comes later), its metadata and media type. */
function creation(req: RequestHead, maxBytes: number): { declaredLength?: number; tus: TusFacts; contentType?: string } {
  const length = header(req, 'upload-length');
  const deferred = header(req, 'upload-defer-length');
  if (deferred !== undefined && deferred !== '1') throw invalidUpload('Upload-Defer-Length must be 1');
  const final = header(req, 'upload-concat')?.startsWith('final;') ?? false;
  if (final && (length !== undefined || deferred !== undefined)) throw invalidUpload('A final upload takes its length from its partial uploads: no Upload-Length or Upload-Defer-Length');
  if (!final && (length === undefined) === (deferred === undefined)) throw invalidUpload('A creation needs Upload-Length or Upload-Defer-Length: 1 (one of them)');
  const concat = header(req, 'upload-concat');
  const partials = concat === undefined || concat === 'partial' ? undefined : finalOf(concat);
  const raw = header(req, 'upload-metadata');
  const metadata = raw === undefined ? undefined : parseUploadMetadata(raw);
  const type = metadata?.get('filetype') ?? metadata?.get('contentType');
  let contentType: string | undefined;
  if (type) {
    try {
      contentType = parseContentType(type);
    } catch {
      throw invalidUpload(`Upload-Metadata filetype ${JSON.stringify(type.slice(0, 100))} is not a media type`);
    }
  }
  const tus: TusFacts = {};
  if (raw !== undefined) tus.metadata = raw;
  if (concat === 'partial') tus.concat = 'partial';
  if (partials) tus.concat = partials;
  return { declaredLength: length === undefined ? undefined : uploadLength(length, maxBytes), tus, contentType };
}

/** `final;<url> <url> …`: the partial uploads' ids, in order (absolute URLs or paths under /files/). */
function finalOf(concat: string): string[] {
  if (!concat.startsWith('final;')) throw invalidUpload('Upload-Concat must be "partial" or "final;<upload URLs>"');
  const urls = concat.slice('final;'.length).trim().split(/ +/).filter(Boolean);
  if (urls.length === 0) throw invalidUpload('Upload-Concat: final names no partial upload');
  if (urls.length > TUS_MAX_PARTIALS) throw invalidUpload(`Upload-Concat: final names more than ${TUS_MAX_PARTIALS} partial uploads`);
  return urls.map((url) => {
    const id = /^(?:https?:\/\/[^/]+)?\/files\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(url)?.[1];
    if (!id) throw invalidUpload(`Upload-Concat: ${JSON.stringify(url.slice(0, 120))} is not an upload of this server`);
    return id;
  });
}

function uploadLength(raw: string, maxBytes: number): number {
  const n = byteCount(raw, 'Upload-Length', true);
  if (n === 0) throw invalidUpload('Upload-Length must be at least 1 (empty blobs are not supported)');
  if (n > maxBytes) throw payloadTooLarge(maxBytes);
  return n;
}

/**
 * `Upload-Metadata`: comma-separated `key base64value` pairs (the value may be left out), keys
 * unique, without spaces or commas. Returns the values decoded as UTF-8.
 */
export function parseUploadMetadata(raw: string): Map<string, string> {
  const out = new Map<string, string>();
  if (raw.trim() === '') return out;
  for (const pair of raw.split(',')) {
    const parts = pair.trim().split(' ');
    const [key, value = ''] = parts;
    if (parts.length > 2 || !key || !/^[\x21-\x7e]+$/.test(key)) throw invalidUpload(`Upload-Metadata: ${JSON.stringify(pair.slice(0, 80))} is not "key base64value"`);
    if (value.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) throw invalidUpload(`Upload-Metadata: the value of ${JSON.stringify(key)} is not Base64`);
    if (out.has(key)) throw invalidUpload(`Upload-Metadata: ${JSON.stringify(key)} is given twice`);
    out.set(key, Buffer.from(value, 'base64').toString('utf8'));
  }
  return out;
}

/** `Upload-Checksum: <algorithm> <base64 digest>` of the body, or undefined without one. */
function checksumOf(raw: string | undefined): BodyCheck | undefined {
  if (raw === undefined) return undefined;
  const [name, digest, ...rest] = raw.trim().split(' ');
  const algorithm = CHECKSUMS[name ?? ''];
  if (!algorithm) throw invalidUpload(`Upload-Checksum: ${JSON.stringify((name ?? '').slice(0, 40))} is not one of ${Object.keys(CHECKSUMS).join(', ')}`);
  if (rest.length > 0 || !digest || !/^[A-Za-z0-9+/]+={0,2}$/.test(digest)) throw invalidUpload('Upload-Checksum must be "<algorithm> <base64 digest>"');
  const hash: Hash = createHash(algorithm);
  return {
    update: (chunk) => hash.update(chunk),
    failure: () => (hash.digest('base64') === digest ? undefined : new SvcError('checksum_mismatch', 'checksum_mismatch', `The body's ${name} checksum is not the one in Upload-Checksum; nothing of it was kept`)),
  };
}

function uploadId(raw: string): string {
  // A tus client only ever sends back the Location it was given: anything else names no upload.
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(raw)) throw uploadNotFound(raw.slice(0, 80));
  return raw;
}

const wrongContentType = () => new SvcError('unsupported_media_type', 'unsupported_media_type', `A tus body must be ${OFFSET_STREAM}`);

