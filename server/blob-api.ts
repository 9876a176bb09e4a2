import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { parseContentIdSegment } from '../engine/cas/content-id.js';
import { parseLimit } from '../engine/cas/cursors.js';
import type { DirectIngest } from '../engine/cas/ingest.js';
import type { Manifest } from '../engine/store/index.js';
import type { Engine } from '../engine/engine.js';
import { SvcError, invalidBlob } from '../engine/errors.js';
import { evaluate } from './conditional.js';
import { SocketBody, feedIngest } from './body-feed.js';
import { Exchange, JSON_UTF8, type ServerContext, header, query } from './http.js';

const ALLOWED_REQUEST_HEADERS = [
  'authorization', 'content-type', 'if-match', 'if-modified-since', 'if-none-match', 'if-range', 'if-unmodified-since',
  'range', 'upload-length', 'upload-offset', 'upload-part-id', 'x-svc-tenant-id', 'x-svc-upload-session-id',
].join(', ');
const EXPOSED_HEADERS = 'Accept-Ranges, Content-Length, Content-Range, ETag, Last-Modified, Location, Upload-Length, Upload-Offset, Upload-Expires, X-Svc-Upload-Session-Id';
/** Security is off in this build: CORS is permissive. */
export const CORS: ReadonlyArray<[string, string]> = [
  ['Access-Control-Allow-Origin', '*'],
  ['Access-Control-Expose-Headers', EXPOSED_HEADERS],
];
const IMMUTABLE = 'public, max-age=31536000, immutable';
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ONE_TIB = 2 ** 40;

export function mountBlobApi(app: TemplatedApp, ctx: ServerContext): void {
  const engine = ctx.engine;
  const on = (pattern: string) => (res: HttpResponse, req: HttpRequest) => new Exchange(res, req, pattern, ctx, CORS);
  const onBlob = on('/api/v1/blobs/:id');
  const routes: Array<[string, string[]]> = [
    ['/api/v1/blobs', ['GET', 'POST']],
    ['/api/v1/blobs/:id', ['DELETE', 'GET', 'HEAD']],
    ['/api/v1/blobs/:id/metadata', ['GET']],
    ['/api/v1/blobs/:id/verify', ['POST']],
  ];

  app.post('/api/v1/blobs', (res, req) => upload(engine, on('/api/v1/blobs')(res, req), req));

  app.get('/api/v1/blobs', (res, req) => {
    const ex = on('/api/v1/blobs')(res, req);
    try {
      const q = query(req);
      const page = engine.list(parseLimit(q.get('limit') ?? undefined), q.get('cursor') ?? undefined);
      ex.json(200, page);
    } catch (err) {
      ex.error(err, 'inventory_failure');
    }
  });

  app.get('/api/v1/blobs/:id', (res, req) => download(engine, onBlob(res, req), req, false));
  app.head('/api/v1/blobs/:id', (res, req) => download(engine, onBlob(res, req), req, true));

  app.del('/api/v1/blobs/:id', (res, req) => {
    const ex = onBlob(res, req);
    try {
      const id = parseContentIdSegment(req.getParameter(0) ?? '');
      engine.delete(id).then(
        () => ex.send(204, {}),
        (err) => ex.error(err),
      );
    } catch (err) {
      ex.error(err);
    }
  });

  app.get('/api/v1/blobs/:id/metadata', (res, req) => {
    const ex = on('/api/v1/blobs/:id/metadata')(res, req);
    try {
      const id = parseContentIdSegment(req.getParameter(0) ?? '');
      const q = query(req);
      ex.json(200, engine.metadata(id, parseLimit(q.get('limit') ?? undefined), q.get('cursor') ?? undefined));
    } catch (err) {
      ex.error(err);
    }
  });

  app.post('/api/v1/blobs/:id/verify', (res, req) => {
    const ex = on('/api/v1/blobs/:id/verify')(res, req);
    try {
      const id = parseContentIdSegment(req.getParameter(0) ?? '');
      engine.verify(id).then(
        (result) => ex.json(200, result),
        (err) => ex.error(err, 'verification_failure'),
      );
    } catch (err) {
      ex.error(err, 'verification_failure');
    }
  });

  allowMethods(app, ctx, routes);
}

/** OPTIONS (CORS preflight) and 405 for the other methods of each route. */
export function allowMethods(app: TemplatedApp, ctx: ServerContext, routes: Array<[string, string[]]>): void {
  for (const [pattern, methods] of routes) {
    app.options(pattern, (res, req) => {
      const origin = header(req, 'origin');
      const ex = new Exchange(res, req, pattern, ctx);
      ex.send(204, {
        'Access-Control-Allow-Origin': origin ?? '*',
        'Access-Control-Allow-Methods': methods.join(', '),
        'Access-Control-Allow-Headers': ALLOWED_REQUEST_HEADERS,
        'Access-Control-Max-Age': '600',
        Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
        Allow: [...methods, 'OPTIONS'].join(', '),
      });
    });
    app.any(pattern, (res, req) => {
      const ex = new Exchange(res, req, pattern, ctx, CORS);
      ex.error(new SvcError(405, 'method_not_allowed', `${req.getCaseSensitiveMethod()} is not allowed here`, { Allow: [...methods, 'OPTIONS'].join(', ') }));
    });
  }
}

/** Content-Length: ASCII digits only (leading zeros allowed), at most 1 TiB. */
function parseContentLength(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^[0-9]{1,16}$/.test(raw)) throw invalidBlob('Invalid Content-Length: expected a decimal byte count');
  const n = Number(raw);
  if (n > ONE_TIB) throw invalidBlob(`Invalid Content-Length: ${n} exceeds 1 TiB`);
  return n;
}

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}(\\s*;\\s*(${TOKEN}=(${TOKEN}|"[^"\\\\]*"))?)*\\s*$`);

/**
 * The media type an upload declares. When sent, it must be a media type (RFC 9110 8.3): `type/subtype`
 * and parameters. curl's default for `--data-binary`, `application/x-www-form-urlencoded`, counts as
 * none (the type is sniffed); a multipart form (`curl -F`) is refused, since its envelope is not the file.
 */
export function parseContentType(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const type = raw.trim();
  if (!MEDIA_TYPE.test(type)) throw invalidBlob(`Invalid Content-Type: "${raw.slice(0, 100)}" is not a media type`);
  const essence = type.split(';', 1)[0]!.trim().toLowerCase();
  if (essence === 'application/x-www-form-urlencoded') return undefined;
  if (essence === 'multipart/form-data') {
    throw new SvcError(415, 'unsupported_media_type', "A multipart form is not unpacked: send the file's bytes as the body (curl --data-binary @FILE -H 'Content-Type: TYPE', not -F)");
  }
  return type;
}

function checkLocalityHeaders(req: HttpRequest): void {
  const tenant = header(req, 'x-svc-tenant-id');
  const session = header(req, 'x-svc-upload-session-id');
  if (tenant === undefined && session === undefined) return;
  if (tenant === undefined || session === undefined) {
    throw invalidBlob('Both X-Svc-Tenant-Id and X-Svc-Upload-Session-Id are required for a session-localized upload');
  }
  if (!UUID.test(tenant) || !UUID.test(session)) {
    throw invalidBlob('X-Svc-Tenant-Id and X-Svc-Upload-Session-Id must be canonical lowercase UUIDs');
  }
  throw new SvcError(503, 'locality_unavailable', 'Session-localized upload needs the locality runtime, which this server does not run');
}

function upload(engine: Engine, ex: Exchange, req: HttpRequest): void {
  let ingest: DirectIngest;
  try {
    checkLocalityHeaders(req);
    ingest = engine.startIngest({ contentType: parseContentType(header(req, 'content-type')), declaredLength: parseContentLength(header(req, 'content-length')) });
  } catch (err) {
    ex.error(err, 'ingest_failed');
    return;
  }
  feedIngest(ex, new SocketBody(ex), ingest, {
    last: () =>
      ingest.end().then(
        (result) => ex.json(201, result, { Location: `/api/v1/blobs/${result.blob.id}`, ETag: `"${result.blob.id}"` }),
        (err) => ex.error(err, 'ingest_failed'),
      ),
    fail: (err) => ex.error(err, 'ingest_failed'),
    abort: () => ingest.abort(),
  });
}

function download(engine: Engine, ex: Exchange, req: HttpRequest, headOnly: boolean): void {
  let manifest: Manifest;
  try {
    manifest = engine.manifest(parseContentIdSegment(req.getParameter(0) ?? ''));
  } catch (err) {
    ex.error(err);
    return;
  }
  serveBlob(engine, ex, readConditions(req), manifest, headOnly);
}

/** How bytes served by another resource differ from the blob's own answer (document content). */
export interface ServedAs {
  etag?: string;
  mediaType?: string;
  lastModifiedMs?: number;
  cacheControl?: string;
}

/** The precondition and range headers (read in the handler: uWS requests do not outlive it). */
export function readConditions(req: HttpRequest) {
  return {
    ifMatch: header(req, 'if-match'),
    ifNoneMatch: header(req, 'if-none-match'),
    ifModifiedSince: header(req, 'if-modified-since'),
    ifUnmodifiedSince: header(req, 'if-unmodified-since'),
    ifRange: header(req, 'if-range'),
    range: header(req, 'range'),
  };
}

/**
 * A blob's bytes with the full read contract: preconditions, one range, validators, the read
 * path that fetches and checks only the blocks needed. `etag` defaults to the blob id.
 */
export function serveBlob(engine: Engine, ex: Exchange, conditions: ReturnType<typeof readConditions>, manifest: Manifest, headOnly: boolean, view: ServedAs = {}): void {
  const size = manifest.record.size;
  const etag = view.etag ?? `"${manifest.id}"`;
  const lastModifiedMs = view.lastModifiedMs === undefined ? manifest.lastModifiedMs : Math.floor(view.lastModifiedMs / 1000) * 1000;
  const httpDate = view.lastModifiedMs === undefined ? manifest.lastModified : new Date(lastModifiedMs).toUTCString();
  const validators = { ETag: etag, 'Last-Modified': httpDate, 'Cache-Control': view.cacheControl ?? IMMUTABLE };
  const decision = evaluate({ etag, lastModified: lastModifiedMs, size }, conditions);
  switch (decision.status) {
    case 304:
    case 412:
      ex.send(decision.status, validators);
      return;
    case 416:
      ex.send(416, { 'Content-Type': JSON_UTF8, 'Content-Range': `bytes */${size}` }, JSON.stringify({ error: 'invalid_range', message: 'Range is malformed, unsatisfiable or asks for more than one range' }));
      return;
  }
  const [start, end] = decision.status === 206 ? [decision.start, decision.end + 1] : [0, size];
  const headers: Record<string, string> = { 'Content-Type': view.mediaType ?? manifest.record.mediaType, ...validators, 'Accept-Ranges': 'bytes' };
  if (decision.status === 206) headers['Content-Range'] = `bytes ${start}-${end - 1}/${size}`;
  if (headOnly) {
    ex.sendHead(decision.status, headers, end - start);
    return;
  }
  const cached = engine.reader.cachedRange(manifest, start, end);
  if (cached) {
    // Small and already verified in memory: answer at once, without the streaming machinery.
    ex.send(decision.status, headers, cached);
    engine.stats.reads++;
    engine.stats.bytesServed += cached.length;
    return;
  }
  void stream(engine, ex, manifest, start, end, decision.status, headers);
}

async function stream(engine: Engine, ex: Exchange, manifest: Manifest, start: number, end: number, code: number, headers: Record<string, string>): Promise<void> {
  const pieces = engine.reader.range(manifest, start, end);
  const total = end - start;
  let sent = 0;
  try {
    for await (const piece of pieces) {
      if (!ex.live) break;
      await ex.write(piece, total, sent === 0 ? () => ex.head(code, headers) : undefined);
      sent += piece.length;
    }
    engine.stats.reads++;
    engine.stats.bytesServed += sent;
  } catch (err) {
    // Before the status line the error is a proper 500; after it, only closing tells the client.
    if (sent === 0) ex.error(err);
    else if (ex.live) {
      ex.done = true;
      ex.res.close();
    }
  } finally {
    await pieces.return(undefined);
  }
}
