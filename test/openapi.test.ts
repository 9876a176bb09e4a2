// The API descriptions (server/openapi/svc-api.json for listener 1, model-runtime.json for the
// model listener) against the code: each is a valid OpenAPI 3.1 document whose references all
// resolve; each documents exactly the operations its listener's routers register (a route the
// document lacks fails, and so does a documented operation no route serves), with the capability
// each route names (the routers from dist/, as serve() mounts them); and a started server serves both at /openapi.json and Swagger UI at /docs.
// The answers of the HTTP suites are checked against the same documents by test/helpers/openapi.ts.

import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANY_TOKEN, type Router } from '../dist/server/router.js';
import { mountListeners } from '../dist/server/listeners.js';
import { MODEL_API, SERVICE_API } from '../dist/server/api-docs.js';
import { VERSION } from '../dist/engine/base/version.js';
import { type ApiConformance, expectConforms, modelApi, modelFetch, serviceApi } from './helpers/openapi.js';
import { type TestServer, startServer } from './helpers/server.js';

type Json = Record<string, any>;

const OPERATIONS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options', 'trace'];

/** A router pattern as an OpenAPI path template: `:name` → `{name}`, a trailing `*` → `{path}` (the rest of the path). */
export function templateOf(pattern: string): string {
  return pattern.replace(/:(\w+)/g, '{$1}').replace(/\/\*$/, '/{path}');
}

/** What a route's capability is in the documents' `x-svc-capability`. */
const capabilityOf = (c: string | typeof ANY_TOKEN | undefined) => (c === ANY_TOKEN ? '(any valid token)' : c);

function documented(doc: Json): Map<string, Json> {
  const ops = new Map<string, Json>();
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) if (OPERATIONS.includes(method)) ops.set(`${method.toUpperCase()} ${path}`, op as Json);
  }
  return ops;
}

/**
 * The routers of both listeners as serve() mounts them (server/listeners.ts), on apps that only
 * record and an engine whose parts are stand-ins: mounting reads nothing from them.
 */
function mountedRouters(options: { documentsClaim?: boolean } = {}) {
  const app = new Proxy({}, { get: () => () => app }) as never;
  const stub: any = new Proxy(function stub() {}, { get: (_t, key) => (key === 'then' ? undefined : stub), apply: () => stub });
  const config = { securityEnabled: false, corsAllowedOrigins: [], views: { waitMs: 0 }, docMaxJsonBytes: 1024, httpLingerBytes: 0, opsRefreshMs: 1000 };
  const parts: Json = { config, metrics: { registry: new Registry() }, backend: { documents: options.documentsClaim ? { serving: () => false, elsewhere: () => ({ kind: 'held', nodeId: 'other-node' }) } : undefined }, nodeId: 'this-node' };
  const engine = new Proxy({}, { get: (_t, key) => (typeof key === 'string' && key in parts ? parts[key] : stub) }) as never;
  return mountListeners(app, app, engine, config as never, stub);
}

function registered(routers: Router[]): Map<string, { capability?: string; guarded: 'optional' | 'token' | 'public' }> {
  const out = new Map<string, { capability?: string; guarded: 'optional' | 'token' | 'public' }>();
  routers.forEach((router) => {
    for (const route of router.routes) {
      const capability = capabilityOf(route.capability);
      // Security is off here: only the document platform's router (documents, legacy) has a guard.
      const guarded = capability === undefined ? 'public' : router.guarded ? 'token' : 'optional';
      out.set(`${route.method} ${templateOf(route.pattern)}`, { capability, guarded });
    }
  });
  return out;
}

const refsIn = (node: unknown): string[] => {
  if (Array.isArray(node)) return node.flatMap(refsIn);
  if (typeof node !== 'object' || node === null) return [];
  return Object.entries(node).flatMap(([k, v]) => (k === '$ref' && typeof v === 'string' ? [v] : refsIn(v)));
};

/** @seriousme/openapi-schema-validator's verdict on a document: its own reading of the OpenAPI 3.1 schema, its own $ref and $id resolution. */
async function secondValidator(doc: Json): Promise<{ valid: boolean; errors?: unknown }> {
  const { Validator } = await import('@seriousme/openapi-schema-validator');
  const { valid, errors } = await new Validator().validate(structuredClone(doc));
  return valid ? { valid } : { valid, errors };
}

/**
 * The answers (`METHOD path status`) the document leaves without a schema for their body. Every
 * response needs `content` whose every media type has a schema, except those whose status or
 * method carries no body at all: 1xx, 204 and 304 (RFC 9110 15.2, 15.3.5, 15.4.5) and HEAD
 * operations (RFC 9110 9.3.2). A response the protocol defines as empty (tus's 201 creation and
 * its HEAD by X-HTTP-Method-Override, the model runtime's health checks) instead states so: a
 * required Content-Length whose schema admits only "0", which test/helpers/openapi.ts holds
 * every answer to.
 */
function answersWithoutSchema(doc: Json, api: ApiConformance): string[] {
  const gaps: string[] = [];
  for (const [key, op] of documented(doc)) {
    if (key.startsWith('HEAD ')) continue;
    for (const [status, given] of Object.entries(op.responses as Json)) {
      if (/^1/.test(status) || status === '204' || status === '304') continue;
      const response = given.$ref ? api.resolve(given.$ref) : given;
      const media = Object.values((response.content ?? {}) as Json);
      if (media.length > 0 && media.every((m) => typeof m.schema === 'object')) continue;
      const length = response.headers?.['Content-Length'];
      const declared = length?.$ref ? api.resolve(length.$ref) : length;
      if (media.length === 0 && declared?.required === true && declared.schema?.const === '0') continue;
      gaps.push(`${key} ${status}`);
    }
  }
  return gaps;
}

const listeners = [
  { name: 'listener 1 (svc-api.json)', description: SERVICE_API, routers: () => mountedRouters().service, api: serviceApi },
  { name: 'the model listener (model-runtime.json)', description: MODEL_API, routers: () => mountedRouters().model, api: modelApi },
];

describe.each(listeners)('the API description of $name', ({ description, routers, api }) => {
  const doc = description.document('1.2.3');

  it('is a valid OpenAPI 3.1 document (@apidevtools/swagger-parser, against the 3.1 schema)', async () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.2.3');
    const SwaggerParser = (await import('@apidevtools/swagger-parser')).default;
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined();
  });

  it('is a valid OpenAPI 3.1 document for a second, independent validator (@seriousme/openapi-schema-validator)', async () => {
    expect(await secondValidator(doc)).toEqual({ valid: true });
  });

  it('gives every answer that may carry a body its schema, errors included', () => {
    expect(answersWithoutSchema(doc, api())).toEqual([]);
  });

  it('has no dangling references, and unique operation ids', () => {
    const refs = refsIn(doc);
    expect(refs.length).toBeGreaterThan(20);
    for (const ref of refs) expect(api().resolve(ref), ref).toBeDefined();
    const ids = [...documented(doc).values()].map((op) => op.operationId);
    expect(ids.every((id) => typeof id === 'string')).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('documents every route the routers register, and no operation they do not', () => {
    const routes = [...registered(routers()).keys()].sort();
    const ops = [...documented(doc).keys()].sort();
    expect({ undocumented: routes.filter((r) => !ops.includes(r)), unrouted: ops.filter((o) => !routes.includes(o)) }).toEqual({ undocumented: [], unrouted: [] });
  });

  it('puts X-Request-Id on every answer of every operation', () => {
    for (const [key, op] of documented(doc)) {
      for (const [status, response] of Object.entries(op.responses as Json)) {
        const resolved = response.$ref ? api().resolve(response.$ref) : response;
        expect([key, status, resolved.headers?.['X-Request-Id']]).toEqual([key, status, { $ref: '#/components/headers/X-Request-Id' }]);
      }
    }
    expect(doc.components.headers['X-Request-Id'].required).toBe(true);
  });

  it("states each route's capability and when it needs a bearer token", () => {
    const ops = documented(doc);
    for (const [key, route] of registered(routers())) {
      const op = ops.get(key)!;
      expect([key, op['x-svc-capability']]).toEqual([key, route.capability]);
      const security = route.guarded === 'public' ? [] : route.guarded === 'token' ? [{ bearer: [] }] : [{}, { bearer: [] }];
      expect([key, op.security]).toEqual([key, security]);
    }
  });
});

describe('listener 1\'s description', () => {
  const doc = SERVICE_API.document(VERSION);

  it('describes the error envelope and the rejected form of metadata writes', () => {
    expect(doc.components.schemas.Error).toMatchObject({ required: ['error', 'message'], additionalProperties: false });
    for (const path of ['/v1/documents/{documentId}/metadata', '/v1/documents/{documentId}/metadata/{namespaceUrn}/patch']) {
      const responses = doc.paths[path].post.responses as Json;
      for (const [status, r] of Object.entries(responses)) if (Number(status) >= 400) expect([path, status, r.$ref]).toEqual([path, status, '#/components/responses/Rejected']);
    }
  });

  it('an s3 node mounts every route, /v1 included, whichever node holds the documents claim (503 documents_single_node is decided per request)', () => {
    const claimed = [...registered(mountedRouters({ documentsClaim: true }).service).keys()].sort();
    expect(claimed).toEqual([...registered(mountedRouters().service).keys()].sort());
    expect(claimed.filter((r) => !documented(doc).has(r))).toEqual([]);
  });
});

describe('GET /openapi.json and /docs on a started server', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it.each([
    ['listener 1', () => server.url, serviceApi, 'svc'],
    ['the model listener', () => server.modelUrl, modelApi, 'svc model runtime'],
  ] as const)('%s serves its document, with the service version, and Swagger UI over it', async (_name, base, api, title) => {
    const res = await fetch(`${base()}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const text = await res.text();
    expectConforms({ status: res.status, headers: res.headers, text }, 'GET', '/openapi.json', api());
    const served = JSON.parse(text);
    expect(served.openapi).toBe('3.1.0');
    // The document as served, through both validators.
    const SwaggerParser = (await import('@apidevtools/swagger-parser')).default;
    await expect(SwaggerParser.validate(structuredClone(served))).resolves.toBeDefined();
    expect(await secondValidator(served)).toEqual({ valid: true });
    expect(served.info).toMatchObject({ title, version: VERSION });
    expect(served.paths).toEqual(api().doc.paths);

    const page = await fetch(`${base()}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    expect(html).toContain('<div id="swagger-ui"></div>');
    expectConforms({ status: page.status, headers: page.headers, text: html }, 'GET', '/docs', api());
    const init = await fetch(`${base()}/docs/swagger-initializer.js`);
    expect(await init.text()).toContain("new URL('../openapi.json', document.currentScript.src)");
    for (const file of ['swagger-ui.css', 'swagger-ui-bundle.js', 'swagger-ui-standalone-preset.js']) {
      const asset = await fetch(`${base()}/docs/${file}`);
      expect([file, asset.status]).toEqual([file, 200]);
      expectConforms({ status: asset.status, headers: asset.headers }, 'GET', `/docs/${file}`, api());
      await asset.arrayBuffer();
    }
    const missing = await fetch(`${base()}/docs/package.json`);
    expect(missing.status).toBe(404);
    expectConforms({ status: missing.status, headers: missing.headers, text: await missing.text() }, 'GET', '/docs/package.json', api());
  });

  it('keeps the model listener\'s reference names of its document under /docs', async () => {
    for (const name of ['swagger.yaml', 'swagger.json']) {
      const res = await modelFetch(`${server.modelUrl}/docs/${name}`);
      expect([name, res.status]).toEqual([name, 200]);
      await res.text();
    }
  });
});

describe('the answers\' check (test/helpers/openapi.ts)', () => {
  const api = serviceApi();
  const headers = (h: Record<string, string>) => new Headers({ 'X-Request-Id': 'r-1', ...h });
  const json = { 'Content-Type': 'application/json; charset=utf-8' };
  const blob = { id: `sha-256:${'a'.repeat(64)}:3`, size: 3, mediaType: 'text/plain', chunker: 'fastcdc', blockCount: 1, createdAt: '2026-11-27T10:00:00.000Z' };

  it('passes an answer as documented', () => {
    expect(api.problems({ status: 200, headers: headers(json), text: JSON.stringify({ blobs: [blob] }) }, 'GET', '/api/v1/blobs?limit=1')).toEqual([]);
    expect(api.problems({ status: 404, headers: headers(json), text: '{"error":"not_found","message":"No route"}' }, 'GET', '/nowhere')).toEqual([]);
  });

  it('names the request, the schema and ajv\'s error when a body does not match', () => {
    const { createdAt: _, ...partial } = blob;
    const [problem, ...rest] = api.problems({ status: 200, headers: headers(json), text: JSON.stringify({ blobs: [partial] }) }, 'GET', '/api/v1/blobs');
    expect(rest).toEqual([]);
    expect(problem).toContain('GET /api/v1/blobs → 200');
    expect(problem).toContain('#/paths/~1api~1v1~1blobs/get/responses/200/content/application~1json/schema');
    expect(problem).toContain("must have required property 'createdAt'");
  });

  it("holds the model listener's answers to its document: the {error, message, code} envelope, ModelInfo, an unload without bundleMeta", () => {
    const model = modelApi();
    const registration = { modelName: 'x', uri: 'file:///m/x.zip' };
    const answer = (status: number, body: unknown, h: Record<string, string> = json) => ({ status, headers: headers(h), text: JSON.stringify(body) });
    expect(model.problems(answer(404, { error: 'ModelNotFound', message: 'x not found in [a]', code: 404 }), 'GET', '/models/x')).toEqual([]);
    expect(model.problems(answer(413, { error: 'PayloadTooLarge', message: 'request body is larger than 1024 bytes (MODEL_MAX_FRAME_BYTES)', code: 413 }), 'POST', '/models/x/rank?id=i&rank=p')).toEqual([]);
    expect(model.problems(answer(400, { error: 'invalid_request', message: 'Malformed' }), 'POST', '/models/x/transform')[0]).toContain("must have required property 'code'");
    expect(model.problems(answer(400, { error: 'QueryException', message: 'bad', code: 400, details: 1 }), 'POST', '/models/x/transform')[0]).toContain('must NOT have additional properties');
    expect(model.problems(answer(200, { model: registration }), 'DELETE', '/models/x')).toEqual([]);
    expect(model.problems(answer(200, { model: registration }), 'GET', '/models/x')[0]).toContain("must have required property 'bundleMeta'");
    expect(model.problems(answer(401, { error: 'Unauthenticated', message: 'no token', code: 401 }), 'GET', '/models')[0]).toContain('WWW-Authenticate is required');
    expect(model.problems({ status: 200, headers: new Headers(), text: '' }, 'GET', '/health')[0]).toContain('X-Request-Id is required');
  });

  it("checks a metadata entry's schema reference `{\"$id\": <URN>}`, whose `$id` the document names under patternProperties", () => {
    const url = '/v1/documents/d-1/metadata/urn:x:ns';
    const entry = { id: `meta_${'0'.repeat(26)}`, mode: 'canonical', status: 'valid', data: {}, receipt: { receivedAt: null, recordedAt: '2026-11-27T10:00:00.000Z', principal: null, requestId: null } };
    const v11 = { 'Content-Type': 'application/vnd.svc.metadata+json; version=1.1' };
    const answer = (schema: unknown) => ({ status: 200, headers: headers(v11), text: JSON.stringify({ envelope: '1.1', namespaceUrn: 'urn:x:ns', entry: { ...entry, schema } }) });
    expect(api.problems(answer({ $id: 'urn:x:schema' }), 'GET', url)).toEqual([]);
    expect(api.problems(answer({}), 'GET', url)[0]).toContain("must have required property '$id'");
    expect(api.problems(answer({ $id: 7 }), 'GET', url)[0]).toContain('must be string');
    expect(api.problems(answer({ $id: 'urn:x:schema', id: 'urn:x:schema' }), 'GET', url)[0]).toContain('must NOT have additional properties');
  });

  it('fails a status, a media type or a header the document does not have', () => {
    expect(api.problems({ status: 201, headers: headers(json), text: '{}' }, 'GET', '/api/v1/blobs')[0]).toContain('status 201 is not documented');
    expect(api.problems({ status: 200, headers: headers({ 'Content-Type': 'text/html' }), text: '<p>' }, 'GET', '/api/v1/blobs')[0]).toContain('Content-Type text/html is not one of');
    expect(api.problems({ status: 200, headers: new Headers(json), text: JSON.stringify({ blobs: [] }) }, 'GET', '/api/v1/blobs')[0]).toContain('X-Request-Id is required');
    expect(api.problems({ status: 200, headers: headers(json), text: '{}' }, 'GET', '/nowhere')[0]).toContain('no path of the document matches');
    expect(api.problems({ status: 405, headers: headers(json), text: '{"error":"method_not_allowed"}' }, 'PUT', '/api/v1/blobs')[0]).toContain("must have required property 'message'");
  });
});
