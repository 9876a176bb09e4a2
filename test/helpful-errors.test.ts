// Error answers that say what to do next, in their documented envelopes: a 404 for a near-miss
// path names the route meant (server/route-hint.ts), on listener 1 (blob API, operator routes,
// /v1) and on the model listener.

import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { boundedDistance, closestRoute, routeHint } from '../dist/server/route-hint.js';
import { devToken } from './helpers/docs-client.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startServer({ SVC_DURABILITY: 'relaxed' });
  token = await devToken(server.url, { org_id: 'acme' });
});

afterAll(async () => {
  await server?.stop();
});

async function call(base: string, method: string, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(base + path, { method, headers });
  return { status: res.status, type: res.headers.get('content-type'), json: (await res.json()) as unknown };
}

describe('404 names the closest route', () => {
  test('blob listener: a near miss names the route meant; a path near nothing is the plain 404', async () => {
    const cases: Array<[string, string, string]> = [
      ['POST', '/api/v1/blob', 'No route for POST /api/v1/blob; did you mean POST /api/v1/blobs?'],
      ['GET', '/api/v1/blob/abc', 'No route for GET /api/v1/blob/abc; did you mean GET /api/v1/blobs/{id}?'],
      ['GET', '/api/healt/ready', 'No route for GET /api/healt/ready; did you mean GET /api/health/ready?'],
      ['GET', '/api/ops/v1/snapshots', 'No route for GET /api/ops/v1/snapshots; did you mean GET /api/ops/v1/snapshot?'],
      ['GET', '/doc', 'No route for GET /doc; did you mean GET /docs?'],
      ['GET', '/api/v1/inventory', 'No route for GET /api/v1/inventory'],
      ['GET', '/nothing/here', 'No route for GET /nothing/here'],
    ];
    for (const [method, path, message] of cases) {
      const r = await call(server.url, method, path);
      expect([method, path, r.status, r.json]).toEqual([method, path, 404, { error: 'not_found', message }]);
      expect(r.type).toBe('application/json; charset=utf-8');
    }
  });

  test('a path longer than the bound gets no hint (bounded work per request)', async () => {
    const path = `/api/v1/blob${'s'.repeat(200)}`;
    const r = await call(server.url, 'POST', path);
    expect(r).toMatchObject({ status: 404, json: { error: 'not_found', message: `No route for POST ${path}` } });
  });

  test('/v1: the document platform\'s 404 names its route', async () => {
    const auth = { Authorization: `Bearer ${token}` };
    const r = await call(server.url, 'POST', '/v1/document', auth);
    expect(r).toMatchObject({ status: 404, json: { error: 'not_found', message: 'No route POST /v1/document; did you mean POST /v1/documents?' } });
    const v = await call(server.url, 'GET', '/v1/documents/d1/version', auth);
    expect(v.json).toEqual({ error: 'not_found', message: 'No route GET /v1/documents/d1/version; did you mean GET /v1/documents/{documentId}/versions?' });
  });

  test('model listener: its envelope, with the route meant (another method costs one edit)', async () => {
    const cases: Array<[string, string, string]> = [
      ['GET', '/model', 'No route for GET /model; did you mean GET /models?'],
      ['POST', '/models/m/transfrom', 'No route for POST /models/m/transfrom; did you mean POST /models/{model}/transform?'],
      ['GET', '/models/m/transform', 'No route for GET /models/m/transform; did you mean POST /models/{model}/transform?'],
      ['GET', '/healthz', 'No route for GET /healthz; did you mean GET /health?'],
      ['GET', '/x', 'No route for GET /x'],
    ];
    for (const [method, path, message] of cases) {
      const r = await call(server.modelUrl, method, path);
      expect([method, path, r.status, r.json]).toEqual([method, path, 404, { error: 'NotFound', message, code: 404 }]);
    }
  });
});

describe('route-hint', () => {
  test('boundedDistance is Levenshtein\'s, cut at the bound', () => {
    expect(boundedDistance('kitten', 'sitting', 5)).toBe(3);
    expect(boundedDistance('kitten', 'sitting', 2)).toBe(3);
    expect(boundedDistance('', 'abc', 3)).toBe(3);
    expect(boundedDistance('abc', 'abc', 0)).toBe(0);
    expect(boundedDistance('a', 'abcdef', 2)).toBe(3);
  });

  test('ties prefer the request\'s method, then the first route', () => {
    const routes = [{ method: 'GET', pattern: '/api/v1/blobs' }, { method: 'POST', pattern: '/api/v1/blobs' }, { method: 'GET', pattern: '/api/v1/blobs/:id/metadata' }];
    expect(closestRoute(routes, 'POST', '/api/v1/blob')).toEqual(routes[1]);
    expect(closestRoute(routes, 'GET', '/api/v1/blob')).toEqual(routes[0]);
    expect(routeHint(routes, 'get', '/api/v1/blobs/x/metadat')).toBe('; did you mean GET /api/v1/blobs/{id}/metadata?');
    expect(routeHint(routes, 'GET', '/elsewhere')).toBe('');
  });
});
