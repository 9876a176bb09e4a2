// Error answers that say what to do next, in their documented envelopes: a 404 for a near-miss
// path names the route meant (server/route-hint.ts), on listener 1 (blob API, operator routes,
// /v1) and on the model listener; a 400 invalid_json names where the body breaks
// (server/json-syntax.ts) and quotes at most one character of it.

import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { invalidJsonMessage, syntaxErrorOffset } from '../dist/server/json-syntax.js';
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

async function call(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string) {
  const res = await fetch(base + path, { method, headers, body });
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

describe('400 invalid_json names where the body breaks', () => {
  const PREFIX = 'The body is not valid JSON';
  test('/v1 and /dev/token: line and column, V8\'s reason or the one character found there', async () => {
    const auth = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
    const cases: Array<[string, string]> = [
      ['{\n  "labels": ["a"]\n  "reason": "x"\n}', `${PREFIX}: Expected ',' or '}' after property value at line 3, column 3`],
      ['{"labels": [1,}', `${PREFIX}: unexpected character "}" at line 1, column 15`],
      ['{"password": "hunter2", "x": nope}', `${PREFIX}: unexpected character "n" at line 1, column 30`],
      ['{"labels": ', `${PREFIX}: it ends early, at line 1, column 12`],
    ];
    for (const [body, message] of cases) {
      const r = await call(server.url, 'POST', '/v1/documents', auth, body);
      expect([body, r.status, r.json]).toEqual([body, 400, { error: 'invalid_json', message }]);
      // Nothing of the body but the one character found is echoed.
      expect((r.json as { message: string }).message).not.toContain('hunter2');
    }
    const dev = await call(server.url, 'POST', '/dev/token', {}, '{"org_id": acme}');
    expect(dev).toMatchObject({ status: 400, json: { error: 'invalid_json', message: `${PREFIX}: unexpected character "a" at line 1, column 12` } });
  });

  test('the message for each kind of break', () => {
    const message = (text: string) => {
      try {
        JSON.parse(text);
      } catch (err) {
        return invalidJsonMessage(text, err);
      }
      throw new Error(`${text} parsed`);
    };
    expect(message('')).toBe(`${PREFIX}: it ends early, at line 1, column 1`);
    expect(message('[1,2] x')).toBe(`${PREFIX}: Unexpected non-whitespace character after JSON at line 1, column 7`);
    expect(message('{"a": "x\u0001"}')).toBe(`${PREFIX}: Bad control character in string literal at line 1, column 9`);
    expect(message('{"a": 😀}')).toBe(`${PREFIX}: unexpected character "😀" at line 1, column 7`);
    expect(message(`{"a": "${'secret '.repeat(50)}" oops}`)).toBe(`${PREFIX}: Expected ',' or '}' after property value at line 1, column 360`);
    // A reason of another shape than V8's fixed phrases is not repeated: the scan places it.
    expect(invalidJsonMessage('{"a": x}', new Error('x is "not" here in JSON at position 6 (line 1 column 7)'))).toBe(`${PREFIX}: unexpected character "x" at line 1, column 7`);
  });

  test('the scan agrees with JSON.parse on what is JSON, at any depth', () => {
    for (const ok of ['{}', '[]', ' 1 ', '"x"', '{"a":[1,-2.5e-3,{"b":null,"c":true}],"d":"\\u00e9\\n"}', `${'['.repeat(10_000)}${']'.repeat(10_000)}`]) {
      expect([ok.slice(0, 20), syntaxErrorOffset(ok)]).toEqual([ok.slice(0, 20), undefined]);
    }
    const bad: Array<[string, number]> = [['{"a":1,}', 7], ['[1 2]', 3], ['{"a"}', 4], ['nul', 0], ['[01]', 2], ['{"a":1}}', 7], ['['.repeat(10_000), 10_000]];
    for (const [text, at] of bad) expect([text.slice(0, 20), syntaxErrorOffset(text)]).toEqual([text.slice(0, 20), at]);
  });
});
