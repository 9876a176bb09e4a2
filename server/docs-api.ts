// The document platform over HTTP (`/v1`, and `POST /dev/token`): JSON bodies of bounded size,
// and the byte upload streamed into the CAS. A thin layer over engine/documents. The router's
// guard verifies the bearer token of every `/v1` route and checks the capability each names (the
// engine checks those that depend on the request: `meta.write:<ns>`, `meta.patch:<ns>`,
// `workflow.run:<urn>`, and a document's permission rules); its meter charges the budgets.

import type { Principal } from '../engine/auth/index.js';
import { parseDevTokenRequest, type TokenVerifier } from '../engine/auth/index.js';
import type { BulkMigrations, DocumentService } from '../engine/documents/index.js';
import { type ViewService, checkApplicable, viewOfQuery } from '../engine/views/index.js';
import type { WorkflowService } from '../engine/workflows/index.js';
import { MetadataRejection } from '../engine/documents/index.js';
import type { Stats } from '../engine/ops/index.js';
import { badRequest, isPlainObject } from '../engine/documents/index.js';
import { decodeCursor, encodeCursor, parseLimit } from '../engine/cas/index.js';
import { SvcError, payloadTooLarge } from '../engine/errors.js';
import type { ServerContext } from './api-surface.js';
import { readJson } from './body-readers.js';
import { type BodySource, HeldBody } from './body-sources.js';
import { feedIngest } from './body-feed.js';
import { readConditions, serveBlob } from './blob-serving.js';
import { type Exchange, type RequestHead, header } from './exchange.js';
import { METADATA_V11, metadataReading } from './metadata-reading.js';
import type { DeprecatedSchema } from '../engine/documents/schema-lifecycle.js';
import type { RequestInfo } from '../engine/documents/model.js';
import { parseContentType } from './request-parsing.js';
import { ANY_TOKEN, type Method, type Router, caller } from './router.js';
import { DEV_TOKEN_BODY_BYTES, JOB_WAIT_MAX_S } from '../engine/base/limits.js';

interface DocsContext {
  docs: DocumentService;
  bulkMigrations: BulkMigrations;
  views: ViewService;
  workflows: WorkflowService;
  /** SVC_VIEW_WAIT: how long a view request waits for its materialization before 202. */
  viewWaitMs: number;
  tokens: TokenVerifier;
  maxJsonBytes: number;
}

interface Call {
  ex: Exchange;
  /** The request's head (a copy: every /v1 route is guarded). */
  req: RequestHead;
  /** Path parameters, percent-decoded. */
  params: string[];
  query: URLSearchParams;
}

const NO_BODY = Promise.resolve({ value: undefined, bytes: 0 });

export function mountDocsApi(router: Router, ctx: ServerContext, docsCtx: DocsContext): void {
  const { docs, bulkMigrations, views, workflows, viewWaitMs, tokens, maxJsonBytes } = docsCtx;
  const stats = ctx.engine.stats;

  /** A JSON route: the caller's capability checked (the guard), the body read (bounded), then `work`. */
  const json = (
    method: Method,
    pattern: string,
    capability: string | typeof ANY_TOKEN,
    work: (call: Call, principal: Principal, body: unknown, bodyBytes: number) => Promise<void> | void,
    /** Metadata writes answer every error in the rejected form. */
    rejectedForm = false,
  ) => {
    router.on(method, pattern, async (call) => {
      const { ex, req, params, query } = call;
      const { value, bytes } = await (method === 'GET' ? NO_BODY : readJson(ex, maxJsonBytes, payloadTooLarge));
      await work({ ex, req, params: params.map(decodeSegment), query }, caller(call), value, bytes);
    }, { capability, errorForm: rejectedForm ? asRejection : undefined });
  };

  router.on('POST', '/dev/token', async ({ ex, req }) => {
    const loopback = isLoopback(Buffer.from(ex.res.getRemoteAddressAsText()).toString());
    const body = readJson(ex, DEV_TOKEN_BODY_BYTES, payloadTooLarge);
    body.catch(() => {});
    if (!tokens.devTokensEnabled || !loopback) throw new SvcError('not_found', 'not_found', 'No route POST /dev/token');
    const { value } = await body;
    ex.json(200, await tokens.mint(parseDevTokenRequest(value)), { 'Cache-Control': 'no-store' });
  });

  json('POST', '/v1/documents', 'doc.create', async ({ ex }, principal, body) => {
    const r = await docs.create(principal, body, requestOf(ex));
    ex.json(r.created ? 201 : 200, { documentId: r.documentId, uploadId: r.uploadId }, { Location: `/v1/documents/${r.documentId}`, ...deprecation(r.deprecated) });
  });

  // The document's bytes: an operation of its tenant (one of its slots), its declared length
  // against the caller's byte budget, the tenant's object limit and quota (engine/documents).
  router.on('PUT', '/v1/uploads/:uploadId/bytes', async (call) => {
    const { ex, req, params } = call;
    const declared = header(req, 'content-length');
    const length = declared === undefined ? undefined : /^[0-9]{1,16}$/.test(declared) ? Number(declared) : NaN;
    if (Number.isNaN(length)) throw badRequest('Content-Length must be a decimal byte count');
    if (length !== undefined) call.chargeBytes(length);
    const contentType = parseContentType(header(req, 'content-type'));
    // Held from its first byte while the upload's records are read.
    const body = new HeldBody(ex.body);
    const upload = await docs.beginBytes(caller(call), decodeSegment(params[0]!), { contentType, declaredLength: length });
    streamInto(ex, body, upload, stats);
  }, { capability: 'doc.create', operation: true });

  json('POST', '/v1/uploads/:uploadId/finalize', 'doc.create', async ({ ex, params }, principal, body) => {
    const r = await docs.finalize(principal, params[0]!, body);
    ex.json(r.created ? 201 : 200, { documentId: r.documentId, versionId: r.versionId, contentRef: r.contentRef });
  });

  json('GET', '/v1/documents', 'doc.read', async ({ ex, query }, principal) => {
    only(query, ['limit', 'cursor', 'label', 'externalRef', 'createdAfter', 'createdBefore']);
    const filter = {
      label: query.get('label') ?? undefined,
      externalRef: externalRefParam(query.get('externalRef')),
      createdAfter: timeParam(query, 'createdAfter'),
      createdBefore: timeParam(query, 'createdBefore'),
    };
    ex.json(200, await docs.list(principal, filter, parseLimit(query.get('limit') ?? undefined), query.get('cursor') ?? undefined));
  });
  // meta.read as well: the engine checks it.
  json('POST', '/v1/documents/search', 'doc.read', async ({ ex }, principal, body) => ex.json(200, await docs.search(principal, body)));
  json('GET', '/v1/schemas', ANY_TOKEN, async ({ ex, query }) => {
    only(query, ['limit', 'cursor', 'namespaceUrn']);
    const cursor = query.get('cursor');
    const page = await docs.schemas.list(query.get('namespaceUrn') ?? undefined, parseLimit(query.get('limit') ?? undefined), cursor === null ? undefined : decodeCursor('sch1', cursor));
    ex.json(200, page.next ? { schemas: page.schemas.map(schemaJson), nextCursor: encodeCursor('sch1', page.next) } : { schemas: page.schemas.map(schemaJson) });
  });
  json('GET', '/v1/jobs', 'job.read', async ({ ex, query }, principal) => {
    only(query, ['limit', 'cursor', 'documentId', 'state']);
    const state = query.get('state') ?? undefined;
    if (state !== undefined && !JOB_STATES.includes(state)) throw badRequest(`state must be one of ${JOB_STATES.join(', ')}`);
    const documentId = query.get('documentId') ?? undefined;
    if (documentId !== undefined && !UUID_ANY.test(documentId)) throw badRequest('documentId must be a UUID');
    ex.json(200, await docs.listJobs(principal, { documentId, state }, parseLimit(query.get('limit') ?? undefined), query.get('cursor') ?? undefined));
  });

  json('GET', '/v1/documents/:documentId', 'doc.read', async ({ ex, params }, principal) => ex.json(200, await docs.get(principal, params[0]!)));
  json('GET', '/v1/documents/:documentId/versions', 'doc.read', async ({ ex, params }, principal) => ex.json(200, await docs.listVersions(principal, params[0]!)));

  // A download: an operation of its tenant, the bytes it serves against the caller's budget.
  router.on(['GET', 'HEAD'], '/v1/documents/:documentId/content', async (call) => {
    const { ex, req, params, query, chargeBytes } = call;
    const conditions = readConditions(req);
    const principal = caller(call);
    const ops = viewOfQuery({ view: query.get('view'), stripSignatures: query.get('stripSignatures'), redactionProfile: query.get('redactionProfile') });
    const content = await docs.content(principal, decodeSegment(params[0]!));
    const headOnly = ex.method === 'HEAD';
    if (!ops) {
      // The current version of a permission-checked resource: caches must ask again each time.
      serveBlob(ctx.engine, ex, conditions, content.manifest, headOnly, {
        etag: `"${content.key}"`, mediaType: content.mediaType, lastModifiedMs: content.createdAt, cacheControl: 'private, no-cache',
      }, chargeBytes);
      return;
    }
    checkApplicable(ops, content.mediaType);
    const base = { key: content.key, mediaType: content.mediaType, size: content.manifest.record.size };
    const { key, jobId } = await views.request(principal.tenant, content.documentId, base, ops);
    if (jobId !== undefined) {
      const job = await views.settled(jobId, viewWaitMs);
      if (!job) return ex.json(202, { jobId }, { 'Retry-After': '5', Location: `/v1/jobs/${jobId}`, 'Cache-Control': 'no-store' });
      if (job.state !== 'completed') {
        if (job.error?.code === 'view_unsupported') throw new SvcError('unprocessable', 'view_unsupported', job.error.message);
        throw new SvcError('internal', 'view_failed', `The view could not be made (job ${jobId}: ${job.error?.code ?? job.state})`);
      }
    }
    const view = await views.cached(principal.tenant, key);
    if (!view) throw new SvcError('internal', 'view_failed', 'The view was made but its record is missing');
    const servedAs = { etag: `"${key}"`, mediaType: view.record.mediaType, lastModifiedMs: view.record.createdAt, cacheControl: 'private, no-cache' };
    if (view.manifest) return serveBlob(ctx.engine, ex, conditions, view.manifest, headOnly, servedAs, chargeBytes);
    // A view without bytes (content without text) is not in the CAS, which keeps no empty blobs.
    ex.send(200, { 'Content-Type': servedAs.mediaType, ETag: servedAs.etag, 'Cache-Control': servedAs.cacheControl }, '');
  }, { capability: 'doc.read', operation: true });

  // workflow.run:<workflowUrn>: the engine checks it.
  json('POST', '/v1/documents/:documentId/workflows/:workflowUrn/run', ANY_TOKEN, async ({ ex, params }, principal, body) => {
    const r = await workflows.run(principal, params[0]!, params[1]!, body, requestOf(ex));
    ex.json(202, { jobId: r.jobId }, { Location: `/v1/jobs/${r.jobId}` });
  });

  json('GET', '/v1/documents/:documentId/metadata', 'meta.read', async ({ ex, req, params, query }, principal) => {
    only(query, READING_PARAMS);
    const reading = metadataReading(header(req, 'accept'), query);
    ex.json(200, await docs.metadata(principal, params[0]!, reading), readingHeaders(reading.envelope));
  });

  // meta.write:<namespaceUrn> of the body: the engine checks it.
  json('POST', '/v1/documents/:documentId/migrate', ANY_TOKEN, async ({ ex, params }, principal, body) => {
    const r = await docs.migrate(principal, params[0]!, body, requestOf(ex));
    ex.json(202, { jobId: r.jobId }, { Location: `/v1/jobs/${r.jobId}`, ...deprecation(r.deprecated) });
  });

  json('POST', '/v1/migrations', 'migration.write', async ({ ex }, principal, body) => {
    const { record, created } = await docs.migrations.register(body);
    ex.json(created ? 201 : 200, {
      fromSchemaUrn: record.fromSchemaUrn, toSchemaUrn: record.toSchemaUrn, namespaceUrn: record.namespaceUrn,
      forward: record.forward, inverse: record.inverse, probedInstances: record.probedInstances, createdAt: new Date(record.createdAt).toISOString(),
    });
  });

  // migration.write here; meta.write:<namespace of fromSchemaUrn> in the engine.
  json('POST', '/v1/migrations/apply', 'migration.write', async ({ ex }, principal, body) => {
    const r = await bulkMigrations.request(principal, body, requestOf(ex));
    ex.json(202, { jobId: r.jobId }, { Location: `/v1/jobs/${r.jobId}`, ...deprecation(r.deprecated) });
  });

  json('GET', '/v1/jobs/:jobId', 'job.read', async ({ ex, params, query }, principal) => {
    only(query, ['wait']);
    const wait = query.get('wait');
    if (wait !== null && !(/^(0|[1-9][0-9]?)$/.test(wait) && Number(wait) <= JOB_WAIT_MAX_S)) throw badRequest(`wait must be whole seconds from 0 to ${JOB_WAIT_MAX_S}`);
    ex.json(200, await docs.job(principal, params[0]!, Number(wait ?? 0) * 1000));
  });
  json('GET', '/v1/documents/:documentId/metadata/:namespaceUrn', 'meta.read', async ({ ex, req, params, query }, principal) => {
    only(query, READING_PARAMS);
    const reading = metadataReading(header(req, 'accept'), query);
    ex.json(200, await docs.namespace(principal, params[0]!, params[1]!, reading), readingHeaders(reading.envelope));
  });
  json('GET', '/v1/documents/:documentId/metadata/:namespaceUrn/patches', 'meta.read', async ({ ex, params }, principal) => ex.json(200, await docs.patchHistory(principal, params[0]!, params[1]!)));

  // meta.write:<ns> of each namespace of the bundle: the engine checks it.
  json('POST', '/v1/documents/:documentId/metadata', ANY_TOKEN, async ({ ex, params }, principal, body) => {
    if (!isPlainObject(body)) throw new MetadataRejection('invalid', 'invalid_request', 'The body must be { mode, bundle, provenance?, reason? }');
    for (const key of Object.keys(body)) if (!['mode', 'bundle', 'provenance', 'reason'].includes(key)) throw new MetadataRejection('invalid', 'invalid_request', `unknown field "${key}"`);
    if (body.mode === 'canonical') {
      const r = await docs.writeCanonical(principal, params[0]!, body, requestOf(ex));
      ex.json(201, { status: 'accepted', versionId: r.versionId, metadataIds: r.metadataIds }, deprecation(r.deprecated));
      return;
    }
    if (body.mode === 'derived') {
      const r = await docs.writeDerived(principal, params[0]!, body, requestOf(ex));
      ex.json(202, { status: 'accepted', jobId: r.jobId }, { Location: `/v1/jobs/${r.jobId}`, ...deprecation(r.deprecated) });
      return;
    }
    throw new MetadataRejection('invalid', 'invalid_request', 'mode must be "canonical" or "derived"');
  }, true);

  // meta.patch:<namespaceUrn>: the engine checks it.
  json('POST', '/v1/documents/:documentId/metadata/:namespaceUrn/patch', ANY_TOKEN, async ({ ex, params }, principal, body, bytes) => {
    const r = await docs.patch(principal, params[0]!, params[1]!, body, bytes, requestOf(ex));
    ex.json(200, { status: 'accepted', versionId: r.versionId, newMetadataId: r.newMetadataId }, deprecation(r.deprecated));
  }, true);

  json('POST', '/v1/schemas', 'schema.write', async ({ ex }, principal, body) => {
    const { record, created } = await docs.registerSchema(body);
    ex.json(created ? 201 : 200, schemaJson(record), { Location: `/v1/schemas/${encodeURIComponent(record.schemaUrn)}` });
  });

  json('PATCH', '/v1/schemas/:schemaUrn', 'schema.write', async ({ ex, params }, principal, body) => {
    ex.json(200, schemaJson(await docs.schemas.moveLifecycle(params[0]!, body)));
  });

  json('GET', '/v1/schemas/:schemaUrn', ANY_TOKEN, async ({ ex, params }) => {
    const record = await docs.schemas.get(params[0]!);
    if (!record) throw new SvcError('not_found', 'schema_not_found', `No schema ${params[0]}`);
    ex.json(200, schemaJson(record));
  });

  router.fallback('/v1/*', ({ ex, req }) => {
    throw new SvcError('not_found', 'not_found', `No route ${ex.method.toUpperCase()} ${req.getUrl()}`);
  });
}

function decodeSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** Any failure of a metadata write in its rejected form (internal errors keep their generic text). */
function asRejection(err: unknown): unknown {
  if (err instanceof MetadataRejection || !(err instanceof SvcError)) return err;
  return new MetadataRejection(err.kind, err.code, err.message, {}, undefined, err.details);
}

/** Streams the body into the document's ingest (and BLAKE3); 204 once the bytes are durable. */
function streamInto(ex: Exchange, body: BodySource, upload: Awaited<ReturnType<DocumentService['beginBytes']>>, stats: Stats): void {
  const { ingest, hash } = upload;
  feedIngest(ex, body, ingest, stats, {
    chunk: (chunk) => hash.update(chunk),
    last: () => upload.finish().then(() => ex.send(204, {}), (err) => ex.error(err)),
    fail: (err) => {
      ingest.abort();
      ex.error(err);
    },
    abort: () => ingest.abort(),
  });
}

const JOB_STATES = ['pending', 'running', 'completed', 'failed', 'dead'];
const UUID_ANY = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A list's query: any parameter it does not know is 400. */
function only(query: URLSearchParams, known: string[]): void {
  for (const name of query.keys()) if (!known.includes(name)) throw badRequest(`Unknown parameter ${name} (this list takes ${known.join(', ')})`);
}

/** `externalRef=<system>:<value>`. */
function externalRefParam(raw: string | null) {
  if (raw === null) return undefined;
  const colon = raw.indexOf(':');
  if (colon <= 0 || colon === raw.length - 1) throw badRequest('externalRef must be <system>:<value>');
  return { system: raw.slice(0, colon), value: raw.slice(colon + 1) };
}

/** An ISO 8601 date-time with its zone, as milliseconds. */
function timeParam(query: URLSearchParams, name: string): number | undefined {
  const raw = query.get(name);
  if (raw === null) return undefined;
  const ms = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)$/.test(raw) ? Date.parse(raw) : NaN;
  if (Number.isNaN(ms)) throw badRequest(`${name} must be an ISO 8601 date-time with a zone (2026-11-24T10:00:00Z)`);
  return ms;
}

function schemaJson(r: { schemaUrn: string; namespaceUrn: string; lifecycle: string; jsonSchema: unknown; hash: string; createdAt: number; deprecatedAt?: number }) {
  return {
    schemaUrn: r.schemaUrn, namespaceUrn: r.namespaceUrn, lifecycle: r.lifecycle, jsonSchema: r.jsonSchema, hash: `sha-256:${r.hash}`, createdAt: new Date(r.createdAt).toISOString(),
    ...(r.deprecatedAt === undefined ? {} : { deprecatedAt: new Date(r.deprecatedAt).toISOString() }),
  };
}

const READING_PARAMS = ['envelope', 'status', 'includeQuarantined'];

/** The form's Content-Type; the answer depends on Accept. */
function readingHeaders(envelope: '1' | '1.1') {
  return envelope === '1.1' ? { 'Content-Type': METADATA_V11, Vary: 'Accept' } : { Vary: 'Accept' };
}

/** The request a write arrived in, for the entries' receipts. */
const requestOf = (ex: Exchange): RequestInfo => ({ requestId: ex.requestId, receivedAt: ex.receivedAt });

/**
 * A write bound to deprecated schemas: `Deprecation` (RFC 9745: since when, the earliest) and a
 * `Link` with rel="deprecation" naming each schema.
 */
function deprecation(deprecated: DeprecatedSchema[]): Record<string, string> {
  if (deprecated.length === 0) return {};
  const since = Math.min(...deprecated.map((d) => d.deprecatedAt));
  return {
    Deprecation: `@${Math.floor(since / 1000)}`,
    Link: deprecated.map((d) => `</v1/schemas/${encodeURIComponent(d.schemaUrn)}>; rel="deprecation"; title="${d.schemaUrn}"`).join(', '),
  };
}

function isLoopback(address: string): boolean {
  return address === '127.0.0.1' || address === '::1' || address === '::ffff:127.0.0.1' || address === '0000:0000:0000:0000:0000:0000:0000:0001';
}



/**
 * A node that does not serve the document platform (s3: it lives in `owner`'s LMDB): every /v1
 * route answers 503 documents_single_node, so a cluster never splits documents between nodes.
 */
export function mountDocumentsElsewhere(router: Router, owner: string): void {
  router.fallback('/v1/*', () => {
    throw new SvcError('unavailable', 'documents_single_node', `On the s3 backend the document platform is served by one node, ${owner}; send /v1 requests to it (docs/backends.md, "s3")`);
  });
}
