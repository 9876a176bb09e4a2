// The blob API and the operator endpoints with SVC_SECURITY_ENABLED=true (issue 18), over real
// HTTP, with RS256/ES256 keys of a local JWKS file (SVC_OIDC_JWKS_FILE) and an explicit
// development secret for the HS256 cases. Tokens are signed here with jose.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SignJWT, exportJWK, generateKeyPair, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from './helpers/server.js';

const ISSUER = 'https://issuer.test';
const AUDIENCE = 'svc-blobs';
const ORIGIN = 'https://app.example';
const ALL = 'blob.read blob.write blob.delete observability.read gc.run';

let server: TestServer;
let rsa: CryptoKey;
let ec: CryptoKey;
let stranger: CryptoKey;

async function token(claims: Record<string, unknown> = {}, opts: { key?: CryptoKey; alg?: string; kid?: string; exp?: number; iss?: string; aud?: string } = {}): Promise<string> {
  const alg = opts.alg ?? 'RS256';
  return new SignJWT({ org_id: 'acme', scope: ALL, ...claims })
    .setProtectedHeader({ alg, kid: opts.kid ?? (alg === 'ES256' ? 'ec-1' : 'rsa-1') })
    .setSubject('alice')
    .setIssuer(opts.iss ?? ISSUER)
    .setAudience(opts.aud ?? AUDIENCE)
    .setExpirationTime(opts.exp ?? Math.floor(Date.now() / 1000) + 600)
    .sign(opts.key ?? (alg === 'ES256' ? ec : rsa));
}

const bearer = (t: string) => ({ Authorization: `Bearer ${t}` });

beforeAll(async () => {
  const r = await generateKeyPair('RS256', { extractable: true });
  const e = await generateKeyPair('ES256', { extractable: true });
  stranger = (await generateKeyPair('RS256')).privateKey;
  rsa = r.privateKey;
  ec = e.privateKey;
  const keys: JWK[] = [
    { ...(await exportJWK(r.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
    { ...(await exportJWK(e.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' },
  ];
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-jwks-'));
  const file = path.join(dir, 'jwks.json');
  fs.writeFileSync(file, JSON.stringify({ keys }));
  server = await startServer({
    SVC_SECURITY_ENABLED: 'true',
    SVC_OIDC_ISSUER: ISSUER,
    SVC_OIDC_AUDIENCE: AUDIENCE,
    SVC_OIDC_JWKS_FILE: file,
    SVC_SECURITY_CORS_ALLOWED_ORIGINS: `${ORIGIN}, https://other.example`,
  });
});

afterAll(async () => {
  await server?.stop();
});

describe('security on: tokens', () => {
  it('health stays public; everything else needs a token (401 with WWW-Authenticate: Bearer)', async () => {
    expect((await fetch(`${server.url}/api/health/live`)).status).toBe(200);
    expect((await fetch(`${server.url}/api/health/ready`)).status).toBe(200);
    for (const [method, p] of [
      ['GET', '/api/v1/blobs'],
      ['POST', '/api/v1/blobs'],
      ['GET', `/api/v1/blobs/sha-256:${'0'.repeat(64)}:1`],
      ['POST', '/api/v1/uploads'],
      ['GET', '/api/stats'],
      ['GET', '/metrics'],
      ['GET', '/api/ops/v1/snapshot'],
      ['GET', '/api/ops/v1/events'],
      ['GET', '/api/ops/v1/gc'],
      ['POST', '/api/ops/v1/gc'],
      ['GET', '/api/ops/v1/nodes'],
      ['DELETE', '/api/ops/v1/nodes/some-node'],
    ]) {
      const res = await fetch(`${server.url}${p}`, { method, body: method === 'POST' ? 'x' : undefined });
      expect([method, p, res.status]).toEqual([method, p, 401]);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(await res.json()).toEqual({ error: 'unauthenticated', message: expect.any(String) });
    }
  });

  it('refuses expired, wrong-issuer, wrong-audience, unknown-key, alg none and HS256 tokens, without a library\'s text', async () => {
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify({ org_id: 'acme', sub: 'x', scope: ALL, exp: 9999999999, iss: ISSUER, aud: AUDIENCE })).toString('base64url')}.`;
    const hs = await new SignJWT({ org_id: 'acme', scope: ALL }).setProtectedHeader({ alg: 'HS256' }).setSubject('x').setExpirationTime('10m').sign(randomBytes(32));
    const cases: Record<string, string> = {
      expired: await token({}, { exp: Math.floor(Date.now() / 1000) - 60 }),
      'wrong issuer': await token({}, { iss: 'https://evil.test' }),
      'wrong audience': await token({}, { aud: 'someone-else' }),
      'unknown key': await token({}, { key: stranger, kid: 'rsa-9' }),
      'signed by another key under a known kid': await token({}, { key: stranger }),
      'alg none': none,
      'HS256 without a configured secret': hs,
      garbage: 'a.b.c',
    };
    for (const [name, t] of Object.entries(cases)) {
      const res = await fetch(`${server.url}/api/v1/blobs`, { headers: bearer(t) });
      expect([name, res.status]).toEqual([name, 401]);
      const body = (await res.json()) as { error: string; message: string };
      expect(body.error).toBe('unauthenticated');
      expect(body.message).not.toMatch(/ERR_|JWS|JWT[A-Z]|at .*\.js/);
    }
    expect((await fetch(`${server.url}/api/v1/blobs`, { headers: { Authorization: 'Basic abc' } })).status).toBe(401);
  });

  it('accepts RS256 and ES256 tokens of the JWKS, for uploads (body held while the token is checked) and reads', async () => {
    const body = randomBytes(300_000);
    const id = `sha-256:${createHash('sha256').update(body).digest('hex')}:${body.length}`;
    // A token never seen before: its check waits for the keys while the body arrives.
    const put = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: bearer(await token({}, { alg: 'ES256' })), body });
    expect(put.status).toBe(201);
    expect(((await put.json()) as { blob: { id: string } }).blob.id).toBe(id);
    const get = await fetch(`${server.url}/api/v1/blobs/${id}`, { headers: bearer(await token()) });
    expect(get.status).toBe(200);
    expect(Buffer.from(await get.arrayBuffer()).equals(body)).toBe(true);
  });

  it('checks the capability of every route: 403 forbidden without it', async () => {
    const none = bearer(await token({ scope: 'doc.read' }));
    const cases: Array<[string, string, string]> = [
      ['GET', '/api/v1/blobs', 'blob.read'],
      ['POST', '/api/v1/blobs', 'blob.write'],
      ['DELETE', `/api/v1/blobs/sha-256:${'0'.repeat(64)}:1`, 'blob.delete'],
      ['GET', `/api/v1/blobs/sha-256:${'0'.repeat(64)}:1/metadata`, 'blob.read'],
      ['POST', `/api/v1/blobs/sha-256:${'0'.repeat(64)}:1/verify`, 'blob.read'],
      ['POST', '/api/v1/uploads', 'blob.write'],
      ['GET', `/api/v1/uploads/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`, 'blob.read'],
      ['GET', '/api/stats', 'observability.read'],
      ['GET', '/metrics', 'observability.read'],
      ['GET', '/api/ops/v1/snapshot', 'observability.read'],
      ['GET', '/api/ops/v1/history', 'observability.read'],
      ['GET', '/api/ops/v1/gc', 'observability.read'],
      ['POST', '/api/ops/v1/gc', 'gc.run'],
      ['GET', '/api/ops/v1/nodes', 'observability.read'],
      ['DELETE', '/api/ops/v1/nodes/some-node', 'gc.run'],
    ];
    for (const [method, p, capability] of cases) {
      const res = await fetch(`${server.url}${p}`, { method, headers: none, body: method === 'POST' ? 'x' : undefined });
      expect([method, p, res.status]).toEqual([method, p, 403]);
      expect(await res.json()).toEqual({ error: 'forbidden', message: `The token does not grant ${capability}` });
      // With exactly that capability the route is reached (whatever it then answers).
      const granted = await fetch(`${server.url}${p}`, { method, headers: bearer(await token({ scope: capability })), body: method === 'POST' ? 'x' : undefined });
      expect([method, p, granted.status === 401 || granted.status === 403]).toEqual([method, p, false]);
    }
    // A wildcard scope grants what it prefixes.
    expect((await fetch(`${server.url}/api/v1/blobs`, { headers: bearer(await token({ scope: 'blob.*' })) })).status).toBe(200);
  });
});

describe('security on: the document platform and legacy repositories', () => {
  const doc = '0193b3a0-0000-7000-8000-0000000000d1';
  const ns = encodeURIComponent('urn:svc:case');
  /** Every /v1 and /legacy route whose capability the router checks, and that capability. */
  const routes: Array<[string, string, string]> = [
    ['POST', '/v1/documents', 'doc.create'],
    ['GET', '/v1/documents', 'doc.read'],
    ['GET', `/v1/documents/${doc}`, 'doc.read'],
    ['GET', `/v1/documents/${doc}/versions`, 'doc.read'],
    ['GET', `/v1/documents/${doc}/content`, 'doc.read'],
    ['HEAD', `/v1/documents/${doc}/content`, 'doc.read'],
    ['PUT', `/v1/uploads/${doc}/bytes`, 'doc.create'],
    ['POST', `/v1/uploads/${doc}/finalize`, 'doc.create'],
    ['GET', `/v1/documents/${doc}/metadata`, 'meta.read'],
    ['GET', `/v1/documents/${doc}/metadata/${ns}`, 'meta.read'],
    ['GET', `/v1/documents/${doc}/metadata/${ns}/patches`, 'meta.read'],
    ['GET', '/v1/jobs', 'job.read'],
    ['GET', `/v1/jobs/${doc}`, 'job.read'],
    ['POST', '/v1/schemas', 'schema.write'],
    ['POST', '/v1/migrations', 'migration.write'],
    ['POST', '/v1/legacy/import', 'legacy.import'],
    ['GET', '/legacy/archive', 'legacy.read'],
    ['GET', '/legacy/archive/memo-1', 'legacy.read'],
    ['HEAD', '/legacy/archive/memo-1', 'legacy.read'],
  ];
  /**
   * Routes any valid token reaches: the engine checks what they name (meta.write:<ns>,
   * meta.patch:<ns>, workflow.run:<urn>), and what a token of blob.* capabilities gets there.
   */
  const anyToken: Array<[string, string, number, Record<string, unknown>]> = [
    ['POST', `/v1/documents/${doc}/metadata`, 400, { status: 'rejected', error: { code: 'invalid_request', message: 'mode must be "canonical" or "derived"' } }],
    ['POST', `/v1/documents/${doc}/metadata/${ns}/patch`, 404, { status: 'rejected', error: { code: 'document_not_found', message: `No document ${doc}` } }],
    ['POST', `/v1/documents/${doc}/migrate`, 404, { error: 'document_not_found', message: `No document ${doc}` }],
    ['POST', `/v1/documents/${doc}/workflows/${encodeURIComponent('urn:svc:workflow:ocr@1')}/run`, 403, { error: 'forbidden', message: 'The token does not grant workflow.run:urn:svc:workflow:ocr@1' }],
    ['GET', '/v1/schemas', 200, { schemas: expect.any(Array) }],
    ['GET', `/v1/schemas/${encodeURIComponent('urn:svc:schema:case@1.0.0')}`, 404, { error: 'schema_not_found', message: 'No schema urn:svc:schema:case@1.0.0' }],
  ];
  const call = (method: string, p: string, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${p}`, { method, headers, body: method === 'POST' || method === 'PUT' ? '{}' : undefined });
  /** The metadata writes answer in their rejected form. */
  const rejectedForm = (method: string, p: string) => method === 'POST' && /\/metadata(\/[^/]+\/patch)?$/.test(p);

  it('every route needs a token: 401 with WWW-Authenticate: Bearer, in the route\'s envelope', async () => {
    for (const [method, p] of [...routes, ...anyToken]) {
      const res = await call(method, p);
      expect([method, p, res.status, res.headers.get('www-authenticate')]).toEqual([method, p, 401, 'Bearer']);
      const text = await res.text();
      if (method === 'HEAD') expect(text).toBe('');
      else if (rejectedForm(method, p)) expect(JSON.parse(text)).toEqual({ status: 'rejected', error: { code: 'unauthenticated', message: 'An Authorization: Bearer <JWT> header is required' } });
      else expect(JSON.parse(text)).toEqual({ error: 'unauthenticated', message: 'An Authorization: Bearer <JWT> header is required' });
    }
  });

  it('each route checks its capability: 403 forbidden without it; with exactly it the route is reached', async () => {
    const none = bearer(await token({ scope: ALL }));
    for (const [method, p, capability] of routes) {
      const res = await call(method, p, none);
      expect([method, p, res.status]).toEqual([method, p, 403]);
      const text = await res.text();
      if (method === 'HEAD') expect(text).toBe('');
      else expect(JSON.parse(text)).toEqual({ error: 'forbidden', message: `The token does not grant ${capability}` });
      const granted = await call(method, p, bearer(await token({ scope: capability })));
      expect([method, p, granted.status === 401 || granted.status === 403]).toEqual([method, p, false]);
    }
    for (const [method, p, status, body] of anyToken) {
      const res = await call(method, p, none);
      expect([method, p, res.status, await res.json()]).toEqual([method, p, status, body]);
    }
  });
});

describe('security on: CORS', () => {
  const preflight = (origin: string | undefined, method: string, headers?: string) =>
    fetch(`${server.url}/api/v1/blobs`, {
      method: 'OPTIONS',
      headers: { ...(origin ? { Origin: origin } : {}), 'Access-Control-Request-Method': method, ...(headers ? { 'Access-Control-Request-Headers': headers } : {}) },
    });

  it('answers a preflight without a token for a listed origin, a method of the route and allowed headers', async () => {
    const res = await preflight(ORIGIN, 'POST', 'authorization, content-type');
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(res.headers.get('access-control-allow-methods')).toBe('GET, POST');
  });

  it('refuses a preflight from another origin, for another method or with another header: 403', async () => {
    for (const [origin, method, headers] of [
      ['https://evil.example', 'GET', undefined],
      [`${ORIGIN}.evil`, 'GET', undefined],
      [ORIGIN, 'PUT', undefined],
      [ORIGIN, 'GET', 'authorization, x-secret'],
    ] as const) {
      const res = await preflight(origin, method, headers);
      expect([origin, method, headers, res.status]).toEqual([origin, method, headers, 403]);
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
      expect(((await res.json()) as { error: string }).error).toBe('forbidden');
    }
  });

  it('answers OPTIONS without an Origin (not a CORS preflight) with what the resource allows, and no grant', async () => {
    const res = await preflight(undefined, 'GET', undefined);
    expect([res.status, res.headers.get('allow'), res.headers.get('access-control-allow-origin')]).toEqual([204, 'GET, POST, OPTIONS', null]);
  });

  it('grants an actual request to a listed origin only, and never to another', async () => {
    const t = bearer(await token());
    const listed = await fetch(`${server.url}/api/v1/blobs`, { headers: { ...t, Origin: ORIGIN } });
    expect(listed.status).toBe(200);
    expect(listed.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(listed.headers.get('vary')).toContain('Origin');
    const other = await fetch(`${server.url}/api/v1/blobs`, { headers: { ...t, Origin: 'https://evil.example' } });
    expect(other.status).toBe(200);
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    const refused = await fetch(`${server.url}/api/v1/blobs`, { headers: { Origin: ORIGIN } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe(ORIGIN);
  });
});

describe('security on: the CLI', () => {
  it('sends --token or SVC_TOKEN with every request, and says 401 without', async () => {
    const { execFile } = await import('node:child_process');
    const { promisify } = await import('node:util');
    const run = promisify(execFile);
    const bin = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'bin', 'svc.js');
    const file = path.join(fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-cli-')), 'a.bin');
    fs.writeFileSync(file, randomBytes(5000));
    const t = await token();
    const put = await run(process.execPath, [bin, 'put', file, '--server', server.url, '--token', t]);
    const id = put.stdout.trim();
    expect(id).toMatch(/^sha-256:[0-9a-f]{64}:5000$/);
    const ls = await run(process.execPath, [bin, 'ls', '--server', server.url], { env: { ...process.env, SVC_TOKEN: t } });
    expect(ls.stdout).toContain(id);
    const refused = await run(process.execPath, [bin, 'ls', '--server', server.url], { env: { ...process.env, SVC_TOKEN: '' } }).catch((err: { code: number; stderr: string }) => err);
    expect((refused as { code: number }).code).toBe(1);
    expect((refused as { stderr: string }).stderr).toContain('401');
  });
});

describe('security on: tenants', () => {
  const upload = async (t: string, body: Buffer, type?: string) => {
    const res = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { ...bearer(t), ...(type ? { 'Content-Type': type } : {}) }, body: new Uint8Array(body) });
    expect(res.status).toBe(201);
    return (await res.json()) as { blob: { id: string; mediaType: string; createdAt: string; blockCount: number }; freshBlocks: number; duplicateBlocks: number };
  };

  it('a tenant sees, lists, verifies and deletes only its own blobs; another tenant\'s is 404 as if absent', async () => {
    const acme = await token({ org_id: 'acme-iso' });
    const globex = await token({ org_id: 'globex-iso' });
    const body = randomBytes(3 * 1024 * 1024 + 17);
    const a = await upload(acme, body, 'application/x-acme');
    const id = a.blob.id;
    const absent = `sha-256:${'0'.repeat(64)}:1`;
    for (const [method, p] of [
      ['GET', `/api/v1/blobs/${id}`],
      ['HEAD', `/api/v1/blobs/${id}`],
      ['GET', `/api/v1/blobs/${id}/metadata`],
      ['POST', `/api/v1/blobs/${id}/verify`],
      ['DELETE', `/api/v1/blobs/${id}`],
    ]) {
      const theirs = await fetch(`${server.url}${p}`, { method, headers: bearer(globex) });
      const none = await fetch(`${server.url}${p.replace(id, absent)}`, { method, headers: bearer(globex) });
      expect([method, p, theirs.status]).toEqual([method, p, 404]);
      expect([method, p, await theirs.text()]).toEqual([method, p, (await none.text()).replaceAll(absent, id)]);
    }
    const list = (await (await fetch(`${server.url}/api/v1/blobs?limit=1000`, { headers: bearer(globex) })).json()) as { blobs: Array<{ id: string }> };
    expect(list.blobs.map((b) => b.id)).not.toContain(id);
    const mine = (await (await fetch(`${server.url}/api/v1/blobs?limit=1000`, { headers: bearer(acme) })).json()) as { blobs: Array<{ id: string }> };
    expect(mine.blobs.map((b) => b.id)).toContain(id);

    // The same bytes from the other tenant: all its blocks are fresh to it, its own media type and time.
    const g = await upload(globex, body, 'application/x-globex');
    expect(g.blob.id).toBe(id);
    expect(g.freshBlocks).toBe(g.blob.blockCount);
    expect(g.duplicateBlocks).toBe(0);
    expect(g.blob.mediaType).toBe('application/x-globex');
    // Its repeat is a duplicate of its own.
    const again = await upload(globex, body);
    expect(again.freshBlocks).toBe(0);
    expect(again.blob.mediaType).toBe('application/x-globex');
    // Deleting one tenant's copy leaves the other's whole.
    expect((await fetch(`${server.url}/api/v1/blobs/${id}`, { method: 'DELETE', headers: bearer(globex) })).status).toBe(204);
    const still = await fetch(`${server.url}/api/v1/blobs/${id}`, { headers: bearer(acme) });
    expect(still.status).toBe(200);
    expect(still.headers.get('content-type')).toBe('application/x-acme');
    expect(Buffer.from(await still.arrayBuffer()).equals(body)).toBe(true);
    expect((await fetch(`${server.url}/api/v1/blobs/${id}`, { headers: bearer(globex) })).status).toBe(404);
    expect((await fetch(`${server.url}/api/v1/blobs/${id}`, { method: 'DELETE', headers: bearer(acme) })).status).toBe(204);
    expect((await fetch(`${server.url}/api/v1/blobs/${id}`, { headers: bearer(acme) })).status).toBe(404);
  });

  it('resumable sessions are the token\'s tenant\'s; X-Svc-Tenant-Id of another tenant is 403', async () => {
    const acme = await token({ org_id: 'acme-up' });
    const globex = await token({ org_id: 'globex-up' });
    const session = '0193b3a0-0000-7000-8000-000000000001';
    const create = await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { ...bearer(acme), 'X-Svc-Upload-Session-Id': session, 'Upload-Length': '10' } });
    expect(create.status).toBe(201);
    expect((await fetch(`${server.url}/api/v1/uploads/${session}`, { headers: bearer(globex) })).status).toBe(404);
    expect((await fetch(`${server.url}/api/v1/uploads/${session}`, { headers: bearer(acme) })).status).toBe(200);
    const mismatch = await fetch(`${server.url}/api/v1/uploads/${session}`, { headers: { ...bearer(acme), 'X-Svc-Tenant-Id': '0193b3a0-0000-7000-8000-0000000000ff' } });
    expect(mismatch.status).toBe(403);
    expect(((await mismatch.json()) as { error: string }).error).toBe('forbidden');
    const direct = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { ...bearer(acme), 'X-Svc-Tenant-Id': 'globex-up', 'X-Svc-Upload-Session-Id': session }, body: 'x' });
    expect(direct.status).toBe(403);
  });
});
