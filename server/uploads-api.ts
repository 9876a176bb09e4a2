// Resumable upload sessions over HTTP (`/api/v1/uploads`): a thin layer over engine/uploads.

import { SvcError, invalidUpload } from '../engine/base/errors.js';
import type { SessionRecord } from '../engine/store/index.js';
import type { ServerContext } from './server-context.js';
import { header, type RequestHead } from './exchange.js';
import { parseContentType } from './request-parsing.js';
import type { Router } from './router.js';
import { answerOnce, jsonAnswer, keyedRequest, scopeOf } from './idempotent.js';
import { byteCount, receivePart, sessionId, tenantOf } from './session-parts.js';

const COLLECTION = '/api/v1/uploads';
const SESSION = '/api/v1/uploads/:id';
const COMMIT = '/api/v1/uploads/:id/commit';
/** What defines a session's creation beside method and path (it has no body): the headers an Idempotency-Key's repeat must match. */
const SESSION_DEFINING = ['x-svc-upload-session-id', 'upload-length', 'content-type'];
const NO_BODY = async () => undefined;

export function mountUploadsApi(router: Router, { engine }: ServerContext): void {
  const uploads = engine.uploads;
  const write = { fallbackCode: 'ingest_failed', capability: 'blob.write' };
  const read = { fallbackCode: 'ingest_failed', capability: 'blob.read' };
  const operation = { ...write, operation: true };

  router.on('POST', COLLECTION, ({ ex, req, principal }) => {
    const id = sessionId(header(req, 'x-svc-upload-session-id'), 'X-Svc-Upload-Session-Id');
    const request = { tenant: tenantOf(req, principal), id, declaredLength: uploadLength(header(req, 'upload-length')), contentType: contentTypeOf(req) };
    // Answered once per Idempotency-Key (server/idempotent.ts); the session is in the upload catalog, its key's answer kept just after.
    const keyed = keyedRequest(req, ex.method, SESSION_DEFINING);
    return answerOnce(ex, engine.idempotency, scopeOf(request.tenant, principal), keyed, NO_BODY, async () => {
      // The engine reserves the room of an Upload-Length in the tenant's quota (413, 507 when it cannot).
      const record = await uploads.create(request, principal);
      return jsonAnswer(201, statusJson(record), { ...sessionHeaders(record), Location: `${COLLECTION}/${record.id}` });
    });
  }, write);

  router.on(['GET', 'HEAD'], SESSION, async ({ ex, req, params, principal }) => {
    const record = await uploads.status(tenantOf(req, principal), sessionId(params[0]));
    ex.json(200, statusJson(record), sessionHeaders(record));
  }, read);

  router.on('PATCH', SESSION, ({ ex, req, params, principal }) => {
    const declared = header(req, 'content-length');
    receivePart(ex, engine, declared, () => ({
      tenant: tenantOf(req, principal),
      id: sessionId(params[0]),
      partId: sessionId(header(req, 'upload-part-id'), 'Upload-Part-Id'),
      offset: byteCount(header(req, 'upload-offset'), 'Upload-Offset', true),
      length: byteCount(declared, 'Content-Length', true),
    }), { principal, answer: (record) => ex.send(204, sessionHeaders(record)) });
  }, operation);

  router.on('POST', COMMIT, async ({ ex, req, params, principal }) => {
    const id = sessionId(params[0]);
    // Within the room the tenant's quota leaves (the engine reads it: this session's reservation becomes the blob).
    const record = await uploads.commit(tenantOf(req, principal), id, principal);
    ex.json(200, statusJson(record), { ...sessionHeaders(record), Location: `/api/v1/blobs/${record.committedBlob}` });
  }, operation);

  router.on('DELETE', SESSION, async ({ ex, req, params, principal }) => {
    await uploads.cancel(tenantOf(req, principal), sessionId(params[0]));
    ex.send(204, { 'Cache-Control': 'no-store' });
  }, write);
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
    committedBlob: r.state === 'Committed' ? r.committedBlob : undefined,
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
