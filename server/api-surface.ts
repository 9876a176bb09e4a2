// The surface of the blob API, the operator endpoints and the document platform (one listener,
// SVC_HTTP_PORT): errors as `{ error, message }` (metadata writes: their rejected form), requests
// counted in the engine's stats and in `svc_http_requests_total`.

import { SvcError } from '../engine/base/errors.js';
import { MetadataRejection } from '../engine/documents/index.js';
import type { ServerContext } from './server-context.js';
import type { CorsPolicy } from './router.js';
import type { Surface } from './surface.js';
import type { Config } from '../engine/base/config.js';
import { headersOf, statusOf } from './failure-status.js';

/** Request headers a CORS preflight may name (docs: decisions, "Security"). */
const ALLOWED_REQUEST_HEADERS = [
  'authorization', 'content-type', 'if-match', 'if-modified-since', 'if-none-match', 'if-range', 'if-unmodified-since',
  'range', 'upload-length', 'upload-offset', 'upload-part-id', 'x-request-id', 'x-svc-tenant-id', 'x-svc-upload-session-id',
  // creating POSTs (server/idempotent.ts)
  'idempotency-key',
  // tus (server/tus-api.ts)
  'tus-resumable', 'upload-checksum', 'upload-concat', 'upload-defer-length', 'upload-metadata', 'x-http-method-override',
].join(', ');
const EXPOSED_HEADERS = [
  'Accept-Ranges', 'Content-Length', 'Content-Range', 'ETag', 'Last-Modified', 'Location', 'Upload-Length', 'Upload-Offset', 'Upload-Expires', 'X-Request-Id', 'X-Svc-Upload-Session-Id',
  'Tus-Resumable', 'Tus-Version', 'Tus-Extension', 'Tus-Max-Size', 'Tus-Checksum-Algorithm', 'Upload-Defer-Length', 'Upload-Metadata', 'Upload-Concat', 'X-Svc-Blob-Id', 'X-Svc-Blob-Location',
].join(', ');

/** CORS of the blob API, uploads and GC: any origin while security is off, the listed origins only when on. */
export function corsPolicy(config: Config): CorsPolicy {
  return { open: !config.securityEnabled, origins: new Set(config.corsAllowedOrigins), allowHeaders: ALLOWED_REQUEST_HEADERS, exposeHeaders: EXPOSED_HEADERS };
}

export function apiSurface({ engine, metrics }: Pick<ServerContext, 'engine' | 'metrics'>): Surface {
  return {
    log: engine.log,
    lingerBytes: engine.config.httpLingerBytes,
    known(err) {
      if (err instanceof MetadataRejection) return { status: statusOf(err), body: err.body(), headers: headersOf(err) };
      if (err instanceof SvcError) return { status: statusOf(err), body: envelope(err), headers: headersOf(err) };
      return undefined;
    },
    internal: (requestId, fallbackCode) => ({ status: 500, body: { error: fallbackCode, message: `Internal error (request ${requestId})` } }),
    begin() {
      engine.stats.recordRequest();
    },
    observe(route, method, status, seconds) {
      engine.stats.recordAnswer(status);
      metrics.observeHttp(`${COUNTED_METHODS.has(method) ? method : 'OTHER'} ${route}`, status, seconds);
    },
  };
}

/**
 * Methods counted under their own name; any other a client sends (uWS takes any token as a
 * method, and the fallbacks answer it) is counted as OTHER: a label per invented method would
 * keep a metric child per request for good.
 */
const COUNTED_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** The codes whose envelope carries the tenant's numbers beside the message. */
const LIMIT_FIELDS: Record<string, ReadonlyArray<'quotaBytes' | 'retainedBytes' | 'stagedBytes' | 'maxObjectBytes'>> = {
  tenant_storage_quota_exceeded: ['quotaBytes', 'retainedBytes', 'stagedBytes'],
  tenant_object_limit_exceeded: ['maxObjectBytes'],
};

/** `{ error, message }`; a tenant's limit refusal adds its numbers (`quotaBytes`, `retainedBytes`, `stagedBytes` when open uploads reserve some, `maxObjectBytes`). */
function envelope(err: SvcError): Record<string, unknown> {
  const body: Record<string, unknown> = { error: err.code, message: err.message };
  for (const field of LIMIT_FIELDS[err.code] ?? []) {
    const value = err.details[field];
    if (value !== undefined && Number.isSafeInteger(value)) body[field] = value;
  }
  return body;
}
