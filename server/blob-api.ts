// The blob API (`/api/v1/blobs`): upload, list, download, metadata, verify, delete. Routes only
// parse and answer; the engine does the work and blob-serving.ts writes the bytes.

import { parseContentIdSegment } from '../engine/cas/index.js';
import { parseLimit } from '../engine/cas/index.js';
import type { Engine } from '../engine/engine.js';
import { SvcError, invalidBlob } from '../engine/base/errors.js';
import type { ServerContext } from './server-context.js';
import { type BodySource, HeldBody, SocketBody } from './body-sources.js';
import { FORWARDED_BY, SERVED_BY, forwardUpload } from './locality.js';
import { feedIngest } from './body-feed.js';
import { readConditions, serveBlob } from './blob-serving.js';
import { type Exchange, header, type RequestHead } from './exchange.js';
import { UUID, parseContentType } from './request-parsing.js';
import { type Router, forbidden } from './router.js';
import type { Principal } from '../engine/auth/index.js';
import type { Manifest } from '../engine/store/index.js';
import type { DirectIngest } from '../engine/cas/index.js';
import type { BlobBody } from '../engine/ingests/index.js';

const ONE_TIB = 2 ** 40;
const READ = { capability: 'blob.read' };

export function mountBlobApi(router: Router, { engine }: ServerContext): void {
  // With security on the caller's tenant is the token's org_id; with it off, every blob is the default tenant's.
  router.on('POST', '/api/v1/blobs', ({ ex, req, principal }) => upload(engine, ex, req, principal), { fallbackCode: 'ingest_failed', capability: 'blob.write', operation: true });

  router.on('GET', '/api/v1/blobs', async ({ ex, query, principal }) => {
    ex.json(200, await engine.blobs.list(parseLimit(query.get('limit') ?? undefined), query.get('cursor') ?? undefined, principal));
  }, { fallbackCode: 'inventory_failure', capability: 'blob.read' });

  router.on(['GET', 'HEAD'], '/api/v1/blobs/:id', ({ ex, req, params, principal, chargeBytes }) => {
    // The request's head is read before any wait (uWS reuses it after the callback).
    const conditions = readConditions(req);
    const serve = (manifest: Manifest) => serveBlob(engine, ex, conditions, manifest, ex.method === 'HEAD', {}, chargeBytes);
    // An embedded catalog answers at once: the 4 KiB GET path has no promise to wait for.
    const manifest = engine.blobs.manifest(parseContentIdSegment(params[0]!), principal?.tenant);
    return manifest instanceof Promise ? manifest.then(serve) : serve(manifest);
  }, { capability: 'blob.read', operation: true });

  router.on('DELETE', '/api/v1/blobs/:id', async ({ ex, params, principal }) => {
    await engine.blobs.delete(parseContentIdSegment(params[0]!), principal?.tenant);
    ex.send(204, {});
  }, { capability: 'blob.delete' });

  router.on('GET', '/api/v1/blobs/:id/metadata', async ({ ex, params, query, principal }) => {
    ex.json(200, await engine.blobs.metadata(parseContentIdSegment(params[0]!), parseLimit(query.get('limit') ?? undefined), query.get('cursor') ?? undefined, principal));
  }, READ);

  router.on('POST', '/api/v1/blobs/:id/verify', async ({ ex, params, principal }) => {
    ex.json(200, await engine.blobs.verify(parseContentIdSegment(params[0]!), principal?.tenant));
  }, { fallbackCode: 'verification_failure', capability: 'blob.read' });
}

/** Content-Length: ASCII digits only (leading zeros allowed), at most 1 TiB. */
function parseContentLength(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^[0-9]{1,16}$/.test(raw)) throw invalidBlob('Invalid Content-Length: expected a decimal byte count');
  const n = Number(raw);
  if (n > ONE_TIB) throw invalidBlob(`Invalid Content-Length: ${n} exceeds 1 TiB`);
  return n;
}

/** The session-localized upload's tenant and session, when both headers are sent (validated); undefined when neither is. */
function localityHeaders(req: RequestHead, principal: Principal | undefined): { tenant: string; session: string } | undefined {
  const tenant = header(req, 'x-svc-tenant-id');
  if (principal && tenant !== undefined && tenant !== principal.tenant) throw forbidden('X-Svc-Tenant-Id is not the token\'s org_id');
  const session = header(req, 'x-svc-upload-session-id');
  if (tenant === undefined && session === undefined) return undefined;
  if (tenant === undefined || session === undefined) {
    throw invalidBlob('Both X-Svc-Tenant-Id and X-Svc-Upload-Session-Id are required for a session-localized upload');
  }
  if (!UUID.test(tenant) || !UUID.test(session)) {
    throw invalidBlob('X-Svc-Tenant-Id and X-Svc-Upload-Session-Id must be canonical lowercase UUIDs');
  }
  return { tenant, session };
}

/** Request headers a forwarded upload carries to its owner. */
const FORWARDED = ['authorization', 'content-type', 'content-length', 'x-svc-tenant-id', 'x-svc-upload-session-id'];

function upload(engine: Engine, ex: Exchange, req: RequestHead, principal: Principal | undefined): void | Promise<void> {
  const locality = localityHeaders(req, principal);
  if (locality === undefined) {
    // Through the tenant gate (engine/ingests): the ingest at once, or (a tenant with a quota) once
    // the room it leaves is read, the body held meanwhile from its first byte.
    const started = engine.ingests.blob(principal, blobBody(req));
    if (!(started instanceof Promise)) return feed(engine, ex, new SocketBody(ex), started);
    const body = new HeldBody(ex.body);
    return started.then((ingest) => feed(engine, ex, body, ingest));
  }
  if (!engine.config.locality) throw new SvcError('unavailable', 'locality_unavailable', 'Session-localized upload needs the locality runtime, which this server does not run');
  // Placement reads the nodes from the catalog: the head is read and the body held first.
  const forwarded = header(req, FORWARDED_BY) !== undefined;
  const headers: Record<string, string> = {};
  for (const name of FORWARDED) {
    const value = header(req, name);
    if (value !== undefined) headers[name] = value;
  }
  const command = blobBody(req);
  const body = new HeldBody(ex.body);
  return (async () => {
    const owner = forwarded ? undefined : await engine.liveNodes.localityOwner(locality.tenant, locality.session).catch((err: unknown) => {
      throw new SvcError('unavailable', 'locality_failed', `No owner could be placed: ${String((err as Error)?.message ?? err)}`);
    });
    if (owner && !owner.self) return forwardUpload(ex, body, owner, headers, engine.nodeId, engine.config.localityTimeoutMs);
    feed(engine, ex, body, await engine.ingests.blob(principal, command), { [SERVED_BY]: engine.nodeId });
  })();
}

/** The request's Content-Length and Content-Type, parsed: what an ingest of its body is told. */
function blobBody(req: RequestHead): BlobBody {
  return { declaredLength: parseContentLength(header(req, 'content-length')), contentType: parseContentType(header(req, 'content-type')) };
}

/** Streams the body into its ingest (which the gate set up: limits, and a meter for a body without a declared length) and answers. */
function feed(engine: Engine, ex: Exchange, body: BodySource, ingest: DirectIngest, extraHeaders: Record<string, string> = {}): void {
  feedIngest(ex, body, ingest, engine.stats, {
    last: () =>
      ingest.end().then(
        (result) => ex.json(201, result, { Location: `/api/v1/blobs/${result.blob.id}`, ETag: `"${result.blob.id}"`, ...extraHeaders }),
        (err) => ex.error(err, 'ingest_failed'),
      ),
    fail: (err) => {
      ingest.abort();
      ex.error(err, 'ingest_failed');
    },
    abort: () => ingest.abort(),
  });
}
