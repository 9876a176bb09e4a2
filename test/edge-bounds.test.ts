// Nothing a request names stays in memory past the request (issue 36, hole 1; decisions §5
// "Tenants cannot harm each other"): URNs are checked at the edge (RFC 8141 syntax, at most 256
// characters) before they meet a capability check or a cache, and a principal's capability
// answers are bounded. Security on, a development token, the server's own RSS from /proc.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { isUrn } from '../dist/engine/base/urn.js';
import { startServer, type TestServer } from './helpers/server.js';

const SECRET = randomBytes(32).toString('base64url');
const MiB = 1024 * 1024;

let server: TestServer;
let auth: Record<string, string>;
let documentId: string;

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: any; text: string }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

beforeAll(async () => {
  server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' });
  const minted = await fetch(`${server.url}/dev/token`, { method: 'POST', body: JSON.stringify({ org_id: 'acme', sub: 'mallory' }) });
  expect(minted.status).toBe(200);
  auth = { Authorization: `Bearer ${((await minted.json()) as { access_token: string }).access_token}` };
  const created = await call('POST', '/v1/documents', {});
  expect(created.status, created.text).toBe(201);
  documentId = created.json.documentId;
});

afterAll(async () => {
  await server?.stop();
});

/** `count` refused migrate requests naming a namespace of `bytes` characters, `parallel` at a time. */
async function refusedMigrations(count: number, bytes: number, parallel = 4): Promise<number[]> {
  const statuses: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const namespaceUrn = `urn:svc:${String(i).padStart(8, '0')}${'x'.repeat(bytes - 16)}`;
      const res = await call('POST', `/v1/documents/${documentId}/migrate`, { namespaceUrn, toSchemaUrn: 'urn:svc:schema:none@1.0.0', reason: 'probe' });
      statuses.push(res.status);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return statuses;
}

describe('names a request carries are bounded at the edge', () => {
  test('200 refused migrations naming a 1 MB namespace leave the server\'s RSS where it was', async () => {
    // Warm up: the heap reaches the size that 1 MB bodies need anyway.
    await refusedMigrations(40, 1_000_000);
    const before = server.rss();
    const statuses = await refusedMigrations(200, 1_000_000);
    const after = server.rss();
    // Every one refused (before the edge check: 404 metadata_not_found, after the capability check).
    expect(statuses.every((s) => s >= 400 && s < 500)).toBe(true);
    // The capability cache kept each name before (~210 MiB for 200): a few bodies in flight now.
    expect(after - before, `RSS ${Math.round(before / MiB)} → ${Math.round(after / MiB)} MiB`).toBeLessThan(64 * MiB);
    expect(new Set(statuses)).toEqual(new Set([400]));
  });

  test('a name that is not a URN of at most 256 characters is 400 invalid_request wherever /v1 takes one, without echoing it', async () => {
    const long = `urn:svc:${'a'.repeat(300)}`;
    const id = documentId;
    const e = encodeURIComponent;
    const cases: Array<[string, string, unknown?]> = [
      ['POST', `/v1/documents/${id}/migrate`, { namespaceUrn: long, toSchemaUrn: 'urn:svc:schema:a@1.0.0', reason: 'r' }],
      ['POST', `/v1/documents/${id}/migrate`, { namespaceUrn: 'urn:svc:case', toSchemaUrn: 'not a urn', reason: 'r' }],
      ['GET', `/v1/documents/${id}/metadata/${e(long)}`],
      ['GET', `/v1/documents/${id}/metadata/case`],
      ['GET', `/v1/documents/${id}/metadata/${e(long)}/patches`],
      ['POST', `/v1/documents/${id}/metadata/${e(long)}/patch`, { mode: 'canonical', baseMetadataId: 'x', patch: [], reason: 'r' }],
      ['POST', `/v1/documents/${id}/metadata`, { mode: 'canonical', bundle: { namespaces: { [long]: { schema: 'urn:svc:schema:a@1.0.0', data: {} } } } }],
      ['POST', '/v1/documents', { initialMetadata: { namespaces: { [long]: { schema: 'urn:svc:schema:a@1.0.0', data: {} } } } }],
      ['POST', '/v1/documents/search', { namespaceUrn: long, where: { '/a': 1 } }],
      ['GET', `/v1/schemas?namespaceUrn=${e(long)}`],
      ['GET', `/v1/schemas/${e(long)}`],
      ['GET', '/v1/schemas/garbage'],
      ['PATCH', `/v1/schemas/${e(long)}`, { lifecycle: 'retired' }],
      ['POST', '/v1/schemas', { schemaUrn: long, namespaceUrn: 'urn:svc:case', lifecycle: 'published', jsonSchema: { type: 'object' } }],
      ['POST', '/v1/schemas', { schemaUrn: 'urn:svc:schema:case@1.0.0', namespaceUrn: long, lifecycle: 'published', jsonSchema: { type: 'object' } }],
      ['POST', '/v1/migrations', { fromSchemaUrn: long, toSchemaUrn: 'urn:svc:schema:a@2.0.0', forward: { ops: [] }, inverse: { ops: [] } }],
      ['POST', '/v1/migrations/apply', { fromSchemaUrn: 'urn:svc:schema:a@1.0.0', toSchemaUrn: long, reason: 'r' }],
      ['POST', `/v1/documents/${id}/workflows/${e(long)}/run`, {}],
      ['POST', `/v1/documents/${id}/workflows/${e('urn:svc:workflow:ocr@1')}/run`, { inputs: { targetNamespace: long } }],
    ];
    for (const [method, path, body] of cases) {
      const res = await call(method, path, body);
      expect([method, path.slice(0, 80), res.status], res.text.slice(0, 300)).toEqual([method, path.slice(0, 80), 400]);
      // The /v1 envelope, or a metadata write's rejected form.
      const code = res.json.error?.code ?? res.json.error;
      const message = res.json.error?.message ?? res.json.message;
      expect(code).toBe('invalid_request');
      expect(message).toMatch(/must be a URN \(RFC 8141: urn:<NID>:<NSS>\) of at most 256 characters/);
      expect(res.text).not.toContain('a'.repeat(300));
    }
  });

  test('a method the client invents is counted as OTHER: metric labels do not grow with requests', async () => {
    const raw = (method: string) => new Promise<string>((resolve, reject) => {
      const socket = net.connect(server.port, '127.0.0.1');
      let out = '';
      socket.on('data', (d) => (out += d));
      socket.on('close', () => resolve(out.split('\r\n')[0]!));
      socket.on('error', reject);
      socket.write(`${method} /v1/nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    });
    for (let i = 0; i < 20; i++) expect(await raw(`INVENTED${i}`)).toBe('HTTP/1.1 404 Not Found');
    const minted = await fetch(`${server.url}/dev/token`, { method: 'POST', body: JSON.stringify({ scope: 'observability.read' }) });
    const metrics = await fetch(`${server.url}/metrics`, { headers: { Authorization: `Bearer ${((await minted.json()) as { access_token: string }).access_token}` } });
    const text = await metrics.text();
    expect(text).not.toContain('INVENTED');
    expect(text).toMatch(/svc_http_requests_total\{route="OTHER \/v1\/\*",status="404"\} 20/);
  });

  test('URN syntax is RFC 8141\'s', () => {
    for (const good of [
      'urn:svc:case', 'URN:svc:case', 'urn:svc:schema:case@1.0.0', 'urn:isbn:0451450523', 'urn:ietf:rfc:8141', 'urn:example:a/b/c',
      'urn:example:a%2Fb', 'urn:example:foo?+res?=q#frag', 'urn:example:foo?=a?+b', 'urn:example:foo#', 'urn:ab:x', `urn:svc:${'a'.repeat(248)}`,
    ]) expect([good, isUrn(good)]).toEqual([good, true]);
    for (const bad of [
      'case', 'urn:', 'urn:svc', 'urn:svc:', 'urn:a:x', 'urn:-svc:x', 'urn:svc-:x', `urn:${'n'.repeat(33)}:x`, 'urn:svc:/x', 'urn:svc:a b',
      'urn:svc:a%2', 'urn:svc:a%zz', 'urn:svc:a?b', 'urn:svc:a?+', 'urn:svc:a?=', 'urn:svc:a#b c', 'urn:svc:ä', `urn:svc:${'a'.repeat(249)}`, 7, null,
    ]) expect([bad, isUrn(bad)]).toEqual([bad, false]);
  });
});
