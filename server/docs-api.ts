// The document platform over HTTP (`/v1`, and `POST /dev/token`): JSON bodies of bounded size,
// and the byte upload streamed into the CAS. A thin layer over engine/documents. The router's
// guard verifies the bearer token of every `/v1` route and checks the capability each names (the
// engine checks those that depend on the request: `meta.write:<ns>`, `meta.patch:<ns>`,
// `workflow.run:<urn>`, and a document's permission rules); its meter charges the budgets.

import { mayMintFor } from '../engine/auth/index.js';
import { parseDevTokenRequest } from './commands/dev-token.js';
import type { BytesUpload } from '../engine/documents/index.js';
import type { Created, Finalized } from '../engine/documents/index.js';
import { checkApplicable, viewOfQuery } from '../engine/views/index.js';
import { MetadataRejection } from '../engine/documents/index.js';
import { parseBulkMigration, parseCreateDocument, parseFinalize, parseMigrateDocument, parseSearchRequest } from './commands/documents.js';
import { parseMetadataWrite, parsePatch } from './commands/metadata.js';
import { parseLifecycleMove, parseMigrationRegistration, parseSchemaRegistration } from './commands/schemas.js';
import { parseWorkflowRun, workflowRunUrns } from './commands/workflows.js';
import { bodyUrns } from './commands/urns.js';
import type { Stats } from '../engine/ops/index.js';
import { badRequest } from '../engine/documents/index.js';
import { parseLimit } from '../engine/cas/index.js';
import { SvcError } from '../engine/base/errors.js';
import type { ServerContext } from './server-context.js';
import { notServedHere } from './documents-gate.js';
import { type JsonBody, jsonBody } from './body-readers.js';
import { type Answer, type Keep, answerOnce, jsonAnswer, keyedRequest, scopeOf } from './idempotent.js';
import { type BodySource, HeldBody } from './body-sources.js';
import { feedIngest } from './body-feed.js';
import { readConditions, serveBlob } from './blob-serving.js';
import { type Exchange, header } from './exchange.js';
import { METADATA_V11, metadataReading } from './metadata-reading.js';
import type { DeprecatedSchema } from '../engine/documents/schema-lifecycle.js';
import type { RequestInfo } from '../engine/documents/model.js';
import { parseContentType } from './request-parsing.js';
import { ANY_TOKEN, type Call, type Router, caller } from './router.js';
import { DEV_TOKEN_BODY_BYTES, JOB_WAIT_MAX_S } from '../engine/base/limits.js';
import { checkUrn } from '../engine/base/urn.js';
import { routeHint } from './route-hint.js';

type JsonCall = Call<JsonBody>;

/** A path parameter, percent-decoded (as sent when it is not valid percent-encoding). */
const param = (call: Call<unknown>, i: number) => decodeSegment(call.params[i]!);
/** A path parameter that names a URN: 400 unless it is one (RFC 8141, at most 256 characters). */
const urnParam = (call: Call<unknown>, i: number, field: string) => checkUrn(param(call, i), field);
/** The JSON body's value (server/commands/ parses it into the engine's typed command). */
const bodyOf = async (call: JsonCall) => (await call.body).value;

/** What every group of /v1 routes uses (mountDocsApi builds it once). */
interface DocsKit {
  ctx: ServerContext;
  docs: ServerContext['engine']['documents'];
  metadata: ServerContext['engine']['documentMetadata'];
  documentJobs: ServerContext['engine']['documentJobs'];
  bulkMigrations: ServerContext['engine']['bulkMigrations'];
  views: ServerContext['engine']['views'];
  workflows: ServerContext['engine']['workflows'];
  tokens: ServerContext['engine']['tokens'];
  stats: ServerContext['engine']['stats'];
  viewWaitMs: number;
  json: ReturnType<typeof jsonBody>;
  rejectedForm: typeof asRejection;
  once: (call: JsonCall, create: (keep: Keep) => Promise<Answer>) => Promise<void>;
}

export function mountDocsApi(router: Router, ctx: ServerContext): void {
  const { engine, config } = ctx;
  // On s3 every node mounts /v1; the router's `before` (documents-gate.ts) refuses each request while another node serves it.
  if (engine.backend.documents) mountDocumentsElsewhere(router, engine);
  const { documents: docs, documentMetadata: metadata, documentJobs, bulkMigrations, views, workflows, tokens, stats } = engine;
  /** SVC_VIEW_WAIT: how long a view request waits for its materialization before 202. */
  const viewWaitMs = config.views.waitMs;
  const json = jsonBody(config.docMaxJsonBytes);
  /** Metadata writes answer every error in the rejected form. */
  const rejectedForm = asRejection;
  /** A creating request, answered once per Idempotency-Key (server/idempotent.ts); read before the handler's first await. */
  const once = (call: JsonCall, create: (keep: Keep) => Promise<Answer>) => {
    const principal = caller(call);
    const keyed = keyedRequest(call.req, call.ex.method);
    return answerOnce(call.ex, engine.idempotency, scopeOf(principal.tenant, principal), keyed, async () => (await call.body).digest, create);
  };

  const kit: DocsKit = { ctx, docs, metadata, documentJobs, bulkMigrations, views, workflows, tokens, stats, viewWaitMs, json, rejectedForm, once };
  mountDocumentRoutes(router, kit);
  mountDocumentReads(router, kit);
  mountMigrationRoutes(router, kit);
  mountMetadataWrites(router, kit);
}

/** The dev token; creating documents, their bytes and finalize; the lists and search. */
function mountDocumentRoutes(router: Router, kit: DocsKit): void {
  const { docs, metadata, documentJobs, tokens, stats, json, once } = kit;
  // Only for a direct request from this host (no proxy's header): any other is told the route does not exist.
  router.on('POST', '/dev/token', async ({ ex, req, body }) => {
    const direct = mayMintFor(Buffer.from(ex.res.getRemoteAddressAsText()).toString(), (name) => header(req, name));
    if (!tokens.devTokensEnabled || !direct) throw new SvcError('not_found', 'not_found', 'No route POST /dev/token');
    const { value } = await body;
    ex.json(200, await tokens.mint(parseDevTokenRequest(value)), { 'Cache-Control': 'no-store' });
  }, { body: jsonBody(DEV_TOKEN_BODY_BYTES) });

  router.on('POST', '/v1/documents', (call: JsonCall) => once(call, async (keep) => {
    const principal = caller(call);
    const command = parseCreateDocument(await bodyOf(call));
    const answerOf = (r: Created) => jsonAnswer(r.created ? 201 : 200, { documentId: r.documentId, uploadId: r.uploadId }, { Location: `/v1/documents/${r.documentId}`, ...deprecation(r.deprecated) });
    return answerOf(await docs.create(principal, command, requestOf(call.ex), keep(answerOf)));
  }), { capability: 'doc.create', body: json });

  // The document's bytes: an operation of its tenant (one of its slots), its declared length
  // against the caller's byte budget, the tenant's object limit and quota (engine/documents).
  router.on('PUT', '/v1/uploads/:uploadId/bytes', async (call) => {
    const { ex, req } = call;
    const declared = header(req, 'content-length');
    const length = declared === undefined ? undefined : /^[0-9]{1,16}$/.test(declared) ? Number(declared) : NaN;
    if (Number.isNaN(length)) throw badRequest('Content-Length must be a decimal byte count');
    const contentType = parseContentType(header(req, 'content-type'));
    // Held from its first byte while the engine applies the tenant gate (429, 413, 507 before the body) and reads the upload's records.
    const body = new HeldBody(ex.body);
    const upload = await docs.beginBytes(caller(call), param(call, 0), { contentType, declaredLength: length });
    streamInto(ex, body, upload, stats);
  }, { capability: 'doc.create', operation: true });

  router.on('POST', '/v1/uploads/:uploadId/finalize', (call: JsonCall) => once(call, async (keep) => {
    const principal = caller(call);
    const uploadId = param(call, 0);
    const body = await bodyOf(call);
    const answerOf = (r: Finalized) => jsonAnswer(r.created ? 201 : 200, { documentId: r.documentId, versionId: r.versionId, contentRef: r.contentRef });
    return answerOf(await docs.finalize(principal, uploadId, () => parseFinalize(body), keep(answerOf)));
  }), { capability: 'doc.create', body: json });

  router.on('GET', '/v1/documents', async (call) => {
    const { ex, query } = call;
    const principal = caller(call);
    only(query, ['limit', 'cursor', 'label', 'externalRef', 'createdAfter', 'createdBefore']);
    const filter = {
      label: query.get('label') ?? undefined,
      externalRef: externalRefParam(query.get('externalRef')),
      createdAfter: timeParam(query, 'createdAfter'),
      createdBefore: timeParam(query, 'createdBefore'),
    };
    ex.json(200, await docs.list(principal, filter, parseLimit(query.get('limit') ?? undefined), query.get('cursor') ?? undefined));
  }, { capability: 'doc.read' });
  // meta.read as well: the engine checks it.
  router.on('POST', '/v1/documents/search', async (call: JsonCall) => {
    const { ex } = call;
    const principal = caller(call);
    const body = bodyUrns(await bodyOf(call), ['namespaceUrn']);
    ex.json(200, await metadata.search(principal, () => parseSearchRequest(body)));
  }, { capability: 'doc.read', body: json });
  router.on('GET', '/v1/schemas', async (call) => {
    const { ex, query } = call;
    only(query, ['limit', 'cursor', 'namespaceUrn']);
    const namespaceUrn = query.get('namespaceUrn');
    const page = await metadata.schemas.list(caller(call), namespaceUrn === null ? undefined : checkUrn(namespaceUrn, 'namespaceUrn'), parseLimit(query.get('limit') ?? undefined), query.get('cursor') ?? undefined);
    ex.json(200, page.nextCursor ? { schemas: page.schemas.map(schemaJson), nextCursor: page.nextCursor } : { schemas: page.schemas.map(schemaJson) });
  }, { capability: ANY_TOKEN });
  router.on('GET', '/v1/jobs', async (call) => {
    const { ex, query } = call;
    const principal = caller(call);
    only(query, ['limit', 'cursor', 'documentId', 'state']);
    const state = query.get('state') ?? undefined;
    if (state !== undefined && !JOB_STATES.includes(state)) throw badRequest(`state must be one of ${JOB_STATES.join(', ')}`);
    const documentId = query.get('documentId') ?? undefined;
    if (documentId !== undefined && !UUID_ANY.test(documentId)) throw badRequest('documentId must be a UUID');
    ex.json(200, await documentJobs.listJobs(principal, { documentId, state }, parseLimit(query.get('limit') ?? undefined), query.get('cursor') ?? undefined));
  }, { capability: 'job.read' });
}

/** A document, its versions, its content (and views), workflow runs, its metadata. */
function mountDocumentReads(router: Router, kit: DocsKit): void {
  const { docs, metadata, views, workflows, viewWaitMs, json, once, ctx } = kit;
  router.on('GET', '/v1/documents/:documentId', async (call) => {
    const { ex } = call;
    const principal = caller(call);
    ex.json(200, await docs.get(principal, param(call, 0)));
  }, { capability: 'doc.read' });
  router.on('GET', '/v1/documents/:documentId/versions', async (call) => {
    const { ex } = call;
    const principal = caller(call);
    ex.json(200, await docs.listVersions(principal, param(call, 0)));
  }, { capability: 'doc.read' });

  // A download: an operation of its tenant, the bytes it serves against the caller's budget.
  router.on(['GET', 'HEAD'], '/v1/documents/:documentId/content', async (call) => {
    const { ex, req, query, chargeBytes } = call;
    const conditions = readConditions(req);
    const principal = caller(call);
    const ops = viewOfQuery({ view: query.get('view'), stripSignatures: query.get('stripSignatures'), redactionProfile: query.get('redactionProfile') });
    const content = await docs.content(principal, param(call, 0));
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
  router.on('POST', '/v1/documents/:documentId/workflows/:workflowUrn/run', (call: JsonCall) => once(call, async (keep) => {
    const principal = caller(call);
    const workflowUrn = urnParam(call, 1, 'the workflow URN');
    const documentId = param(call, 0);
    const body = await bodyOf(call);
    workflowRunUrns(body);
    const answerOf = (r: { jobId: string }) => jsonAnswer(202, { jobId: r.jobId }, { Location: `/v1/jobs/${r.jobId}` });
    return answerOf(await workflows.run(principal, documentId, workflowUrn, () => parseWorkflowRun(workflowUrn, body), requestOf(call.ex), keep(answerOf)));
  }), { capability: ANY_TOKEN, body: json });

  router.on('GET', '/v1/documents/:documentId/metadata', async (call) => {
    const { ex, req, query } = call;
    const principal = caller(call);
    only(query, READING_PARAMS);
    const reading = metadataReading(header(req, 'accept'), query);
    ex.json(200, await metadata.metadata(principal, param(call, 0), reading), readingHeaders(reading.envelope));
  }, { capability: 'meta.read' });
}

/** Migrations, bulk applies, a job, one namespace's metadata and its patches. */
function mountMigrationRoutes(router: Router, kit: DocsKit): void {
  const { metadata, documentJobs, bulkMigrations, json, once } = kit;
  // meta.write:<namespaceUrn> of the body: the engine checks it.
  router.on('POST', '/v1/documents/:documentId/migrate', (call: JsonCall) => once(call, async (keep) => {
    const principal = caller(call);
    const documentId = param(call, 0);
    const body = bodyUrns(await bodyOf(call), ['namespaceUrn', 'toSchemaUrn']);
    return jobAnswer(await documentJobs.migrate(principal, documentId, () => parseMigrateDocument(body), requestOf(call.ex), keep(jobAnswer)));
  }), { capability: ANY_TOKEN, body: json });

  // Registered under its schemas' URNs (a repeat finds it): the key's answer is kept just after.
  router.on('POST', '/v1/migrations', (call: JsonCall) => once(call, async () => {
    const command = parseMigrationRegistration(await bodyOf(call));
    const { record, created } = await metadata.migrations.register(caller(call), command);
    return jsonAnswer(created ? 201 : 200, {
      fromSchemaUrn: record.fromSchemaUrn, toSchemaUrn: record.toSchemaUrn, namespaceUrn: record.namespaceUrn,
      forward: record.forward, inverse: record.inverse, probedInstances: record.probedInstances, createdAt: new Date(record.createdAt).toISOString(),
    });
  }), { capability: 'migration.write', body: json });

  // migration.write here; meta.write:<namespace of fromSchemaUrn> in the engine.
  router.on('POST', '/v1/migrations/apply', (call: JsonCall) => once(call, async (keep) => {
    const principal = caller(call);
    const command = parseBulkMigration(await bodyOf(call));
    return jobAnswer(await bulkMigrations.request(principal, command, requestOf(call.ex), keep(jobAnswer)));
  }), { capability: 'migration.write', body: json });

  router.on('GET', '/v1/jobs/:jobId', async (call) => {
    const { ex, query } = call;
    const principal = caller(call);
    only(query, ['wait']);
    const wait = query.get('wait');
    if (wait !== null && !(/^(0|[1-9][0-9]?)$/.test(wait) && Number(wait) <= JOB_WAIT_MAX_S)) throw badRequest(`wait must be whole seconds from 0 to ${JOB_WAIT_MAX_S}`);
    ex.json(200, await documentJobs.job(principal, param(call, 0), Number(wait ?? 0) * 1000));
  }, { capability: 'job.read' });
  router.on('GET', '/v1/documents/:documentId/metadata/:namespaceUrn', async (call) => {
    const { ex, req, query } = call;
    const principal = caller(call);
    only(query, READING_PARAMS);
    const reading = metadataReading(header(req, 'accept'), query);
    ex.json(200, await metadata.namespace(principal, param(call, 0), urnParam(call, 1, 'namespaceUrn'), reading), readingHeaders(reading.envelope));
  }, { capability: 'meta.read' });
  router.on('GET', '/v1/documents/:documentId/metadata/:namespaceUrn/patches', async (call) => {
    const { ex } = call;
    const principal = caller(call);
    ex.json(200, await metadata.patchHistory(principal, param(call, 0), urnParam(call, 1, 'namespaceUrn')));
  }, { capability: 'meta.read' });
}

/** Metadata writes and patches; schemas registered, moved and read. */
function mountMetadataWrites(router: Router, kit: DocsKit): void {
  const { metadata, json, rejectedForm, once } = kit;
  // meta.write:<ns> of each namespace of the bundle: the engine checks it.
  router.on('POST', '/v1/documents/:documentId/metadata', async (call: JsonCall) => {
    const { ex } = call;
    const principal = caller(call);
    const write = parseMetadataWrite(await bodyOf(call));
    if (write.mode === 'canonical') {
      const r = await metadata.writeCanonical(principal, param(call, 0), write.parse, requestOf(ex));
      ex.json(201, { status: 'accepted', versionId: r.versionId, metadataIds: r.metadataIds }, deprecation(r.deprecated));
      return;
    }
    const r = await metadata.writeDerived(principal, param(call, 0), write.parse, requestOf(ex));
    ex.json(202, { status: 'accepted', jobId: r.jobId }, { Location: `/v1/jobs/${r.jobId}`, ...deprecation(r.deprecated) });
  }, { capability: ANY_TOKEN, body: json, errorForm: rejectedForm });

  // meta.patch:<namespaceUrn>: the engine checks it.
  router.on('POST', '/v1/documents/:documentId/metadata/:namespaceUrn/patch', async (call: JsonCall) => {
    const { ex } = call;
    const principal = caller(call);
    const namespaceUrn = urnParam(call, 1, 'namespaceUrn');
    const { value: body, bytes } = await call.body;
    const r = await metadata.patch(principal, param(call, 0), namespaceUrn, () => parsePatch(body, bytes), requestOf(ex));
    ex.json(200, { status: 'accepted', versionId: r.versionId, newMetadataId: r.newMetadataId }, deprecation(r.deprecated));
  }, { capability: ANY_TOKEN, body: json, errorForm: rejectedForm });

  // Registered under its URN (a repeat finds it): the key's answer is kept just after.
  router.on('POST', '/v1/schemas', (call: JsonCall) => once(call, async () => {
    const command = parseSchemaRegistration(await bodyOf(call));
    const { record, created } = await metadata.registerSchema(caller(call).tenant, command);
    return jsonAnswer(created ? 201 : 200, schemaJson(record), { Location: `/v1/schemas/${encodeURIComponent(record.schemaUrn)}` });
  }), { capability: 'schema.write', body: json });

  router.on('PATCH', '/v1/schemas/:schemaUrn', async (call: JsonCall) => {
    const { ex } = call;
    const schemaUrn = urnParam(call, 0, 'schemaUrn');
    const command = parseLifecycleMove(await bodyOf(call));
    ex.json(200, schemaJson(await metadata.schemas.moveLifecycle(caller(call), schemaUrn, command)));
  }, { capability: 'schema.write', body: json });

  router.on('GET', '/v1/schemas/:schemaUrn', async (call) => {
    const { ex } = call;
    const schemaUrn = urnParam(call, 0, 'schemaUrn');
    const record = await metadata.schemas.get(schemaUrn);
    if (!record) throw new SvcError('not_found', 'schema_not_found', `No schema ${schemaUrn}`);
    ex.json(200, schemaJson(record));
  }, { capability: ANY_TOKEN });

  router.fallback('/v1/*', ({ ex, req }) => {
    throw new SvcError('not_found', 'not_found', `No route ${ex.method.toUpperCase()} ${req.getUrl()}${routeHint(router.routes, ex.method, req.getUrl())}`);
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
  // A quota refusal carries its numbers beside `error`, as the other 507s carry them.
  const { quotaBytes, retainedBytes } = err.details;
  const numbers = err.code === 'tenant_storage_quota_exceeded' && quotaBytes !== undefined ? { quotaBytes, retainedBytes } : {};
  return new MetadataRejection(err.kind, err.code, err.message, numbers, undefined, err.details);
}

/** Streams the body into the document's ingest (and BLAKE3; the ingest charges each chunk when the gate gave it a meter); 204 once the bytes are durable. */
function streamInto(ex: Exchange, body: BodySource, upload: BytesUpload, stats: Stats): void {
  const { ingest, hash } = upload;
  feedIngest(ex, body, ingest, stats, {
    // A body without a declared length is charged by its ingest as it streams (the tenant gate's meter).
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

/** A request answered by a job: 202 and where to follow it. */
const jobAnswer = (r: { jobId: string; deprecated: DeprecatedSchema[] }) => jsonAnswer(202, { jobId: r.jobId }, { Location: `/v1/jobs/${r.jobId}`, ...deprecation(r.deprecated) });

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




/**
 * A /v1 path no route takes, on s3: 503 documents_single_node like every /v1 route while another
 * node serves the document platform, else listener 1's 404.
 */
function mountDocumentsElsewhere(router: Router, engine: ServerContext['engine']): void {
  router.fallback('/v1/*', ({ ex, req }) => {
    const claim = engine.backend.documents!;
    if (!claim.serving()) throw notServedHere(claim);
    ex.json(404, { error: 'not_found', message: `No route for ${ex.method} ${req.getUrl()}${routeHint(router.routes, ex.method, req.getUrl())}` });
  });
}
