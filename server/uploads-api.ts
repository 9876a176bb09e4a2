// Resumable upload sessions over HTTP (`/api/v1/uploads`): a thin layer over engine/uploads.

import type { Engine } from '../engine/engine.js';
import { SvcError, invalidUpload, tenantObjectLimit } from '../engine/errors.js';
import { DEFAULT_TENANT, type SessionRecord } from '../engine/store/index.js';
import type { ServerContext } from './server-context.js';
import { type BodySource, HeldBody, SocketBody } from './body-sources.js';
import { feedIngest } from './body-feed.js';
import { type Exchange, header, type RequestHead } from './exchange.js';
import { UUID, parseContentType } from './request-parsing.js';
import { type Router, forbidden } from './router.js';
import type { Principal } from '../engine/auth/index.js';

const COLLECTION = '/api/v1/uploads';
const SESSION = '/api/v1/uploads/:id';
const COMMIT = '/api/v1/uploads/:id/commit';

export function mountUploadsApi(router: Router, { engine }: ServerContext): void {
  const uploads = engine.uploads;
  const write = { fallbackCode: 'ingest_failed', capability: 'blob.write' };
  const read = { fallbackCode: 'ingest_failed', capability: 'blob.read' };
  const operation = { ...write, operation: true };

  router.on('POST', COLLECTION, async ({ ex, req, principal }) => {
    const id = sessionId(header(req, 'x-svc-upload-session-id'), 'X-Svc-Upload-Session-Id');
    const request = { tenant: tenantOf(req, principal), id, declaredLength: uploadLength(header(req, 'upload-length')), contentType: contentTypeOf(req) };
    const max = principal ? engine.policies.for(principal.tenant).maxObjectBytes : undefined;
    if (max !== undefined && request.declaredLength !== undefined && request.declaredLength > max) throw tenantObjectLimit(max);
    const record = await uploads.create(request);
    ex.json(201, statusJson(record), { ...sessionHeaders(record), Location: `${COLLECTION}/${record.id}` });
  }, write);

  router.on(['GET', 'HEAD'], SESSION, async ({ ex, req, params, principal }) => {
    const record = await uploads.status(tenantOf(req, principal), sessionId(params[0]));
    ex.json(200, statusJson(record), sessionHeaders(record));
  }, read);

  router.on('PATCH', SESSION, ({ ex, req, params, principal, chargeBytes }) => part(ex, req, params[0]!, engine, principal, chargeBytes), operation);

  router.on('POST', COMMIT, async ({ ex, req, params, principal }) => {
    const record = await uploads.commit(tenantOf(req, principal), sessionId(params[0]), principal ? (await engine.blobLimits(principal.tenant)).quotaBytes : undefined);
    ex.json(200, statusJson(record), { ...sessionHeaders(record), Location: `/api/v1/blobs/${record.committedBlob}` });
  }, operation);

  router.on('DELETE', SESSION, async ({ ex, req, params, principal }) => {
    await uploads.cancel(tenantOf(req, principal), sessionId(params[0]));
    ex.send(204, { 'Cache-Control': 'no-store' });
  }, write);
}

/**
 * PATCH: one part, its body held from the first byte while the session's lease is taken (the
 * catalog may be another process's); acknowledged once the part and the offset are durable.
 */
function part(ex: Exchange, req: RequestHead, id: string, engine: Engine, principal: Principal | undefined, chargeBytes: (bytes: number) => void): void {
  const declared = header(req, 'content-length');
  const maxPart = engine.config.uploads.maxPartBytes;
  let request: Parameters<Engine['uploads']['beginPart']>[0];
  try {
    if (principal) {
      // The tenant's object limit and the principal's byte budget, before any byte is taken.
      const max = engine.policies.for(principal.tenant).maxObjectBytes;
      const end = byteCount(header(req, 'upload-offset'), 'Upload-Offset', true) + byteCount(declared, 'Content-Length', true);
      if (max !== undefined && end > max) throw tenantObjectLimit(max);
      chargeBytes(byteCount(declared, 'Content-Length', true));
    }
    request = {
      tenant: tenantOf(req, principal),
      id: sessionId(id),
      partId: sessionId(header(req, 'upload-part-id'), 'Upload-Part-Id'),
      offset: byteCount(header(req, 'upload-offset'), 'Upload-Offset', true),
      length: byteCount(declared, 'Content-Length', true),
    };
  } catch (err) {
    afterBody(ex, new SocketBody(ex), declared, maxPart, () => ex.error(err, 'ingest_failed'));
    return;
  }
  const body = new HeldBody(ex.body);
  engine.uploads.beginPart(request).then(
    (started) => {
      if ('replayed' in started) {
        const record = started.replayed;
        afterBody(ex, body, declared, maxPart, () => ex.send(204, sessionHeaders(record)));
        return;
      }
      const upload = started.part;
      // The client went away while the lease was taken: give the session back.
      if (!ex.live) return upload.abort();
      feedIngest(ex, body, upload.ingest, engine.stats, {
        last: () =>
          upload.finish().then(
            (record) => ex.send(204, sessionHeaders(record)),
            (err) => ex.error(err, 'ingest_failed'),
          ),
        fail: (err) => void upload.release().then(() => ex.error(err, 'ingest_failed')),
        abort: () => upload.abort(),
      }, upload.ready);
    },
    (err: unknown) => afterBody(ex, body, declared, maxPart, () => ex.error(err, 'ingest_failed')),
  );
}

/**
 * Answers a part that will not be used once its body is read and dropped, so the client, still
 * sending, gets the answer and the connection stays usable. A body larger than a part may be,
 * or of unknown length, is not waited for: the answer is early (the exchange lingers, then closes).
 */
function afterBody(ex: Exchange, body: BodySource, declared: string | undefined, maxPart: number, answer: () => void): void {
  if (!ex.live) return;
  const length = declared !== undefined && /^[0-9]{1,16}$/.test(declared) ? Number(declared) : undefined;
  if (length === undefined || length === 0 || length > maxPart) {
    // A held body's socket was paused: it reads (and drops) what comes while the exchange lingers.
    body.resume();
    return answer();
  }
  body.start((_chunk, isLast) => {
    if (isLast) answer();
  });
  body.resume();
}

function statusJson(r: SessionRecord) {
  return {
    id: r.id,
    state: r.state,
    offset: r.offset,
    declaredLength: r.declaredLength,
    partCount: r.partCount,
    contentType: r.contentType ?? 'application/octet-stream',
    createdAt: new Date(r.createdAt).toISOString(),
    expiresAt: new Date(r.expiresAt).toISOString(),
    committedBlob: r.committedBlob,
  };
}

function sessionHeaders(r: SessionRecord): Record<string, string | undefined> {
  return {
    'Upload-Offset': String(r.offset),
    'Upload-Expires': new Date(r.expiresAt).toUTCString(),
    'Upload-Length': r.declaredLength === undefined ? undefined : String(r.declaredLength),
    'X-Svc-Upload-Session-Id': r.id,
    'Cache-Control': 'no-store',
  };
}

function sessionId(raw: string | undefined, name = 'The upload session id'): string {
  if (raw === undefined) throw invalidUpload(`${name} is required`);
  if (!UUID.test(raw)) throw invalidUpload(`${name} must be a canonical lowercase UUID`);
  return raw;
}

/** The session's tenant: the token's org_id with security on (a different X-Svc-Tenant-Id is 403), else the header's or the default. */
function tenantOf(req: RequestHead, principal: Principal | undefined): string {
  const raw = header(req, 'x-svc-tenant-id');
  if (principal) {
    if (raw !== undefined && raw !== principal.tenant) throw forbidden('X-Svc-Tenant-Id is not the token\'s org_id');
    return principal.tenant;
  }
  if (raw === undefined) return DEFAULT_TENANT;
  if (!UUID.test(raw)) throw invalidUpload('X-Svc-Tenant-Id must be a canonical lowercase UUID');
  return raw;
}

/** A decimal byte count (digits only, at most 2^53 - 1). */
function byteCount(raw: string | undefined, name: string, required: boolean): number {
  if (raw === undefined) {
    if (required) throw invalidUpload(`${name} is required`);
    return NaN;
  }
  if (!/^[0-9]{1,16}$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw invalidUpload(`${name} must be a decimal byte count`);
  return Number(raw);
}

function uploadLength(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = byteCount(raw, 'Upload-Length', true);
  if (n === 0) throw invalidUpload('Upload-Length must be at least 1 (empty blobs are not supported)');
  return n;
}

function contentTypeOf(req: RequestHead): string | undefined {
  try {
    return parseContentType(header(req, 'content-type'));
  } catch (err) {
    if (err instanceof SvcError && err.kind === 'unsupported_media_type') throw err;
    throw invalidUpload(`Invalid Content-Type: "${header(req, 'content-type')?.slice(0, 100)}" is not a media type`);
  }
}
