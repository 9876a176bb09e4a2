// The document platform over HTTP (`/v1`): bearer tokens (HS256 development secret, RS256 and
// ES256 against a JWKS file), capabilities, documents with their upload, finalize and versions,
// content reads, schemas, canonical metadata writes, RFC 6902 patches with their audit record,
// permission rules and tenant isolation. Real servers as child processes; statuses, headers
// and bodies are checked exactly. Derived writes, migrations, jobs, workflows, views and
// legacy repositories are not built yet and are not tested here (except: a derived write
// without provenance must be rejected).

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { blake3 } from 'hash-wasm';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Api, ISO_UTC, JSON_TYPE, META_ID, UUID_V7, decodePayload, errorCode, expectError, expectNoLeak, expectRejected, hsToken, noneToken, reply, type Claims,
} from './helpers/docs-client.js';
import { checkedFetch as fetch, seededBytes } from './helpers/http.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const SECRET = `docs-test-secret-${randomUUID()}`;
const ISSUER = 'https://issuer.docs-test.example';
const AUDIENCE = 'svc-docs-test';
const ALL = 'doc.create doc.read doc.write meta.read meta.write:* meta.patch:* schema.write migration.write workflow.run:* job.read legacy.read legacy.import';
const MAX_JSON = 128 * KiB;

const CASE = 'urn:svc:case';
const CASE_SCHEMA = 'urn:svc:schema:case@1.0.0';
const CORE = 'urn:svc:core';
const CORE_SCHEMA = 'urn:svc:schema:core@1.0.0';
const ENTITIES = 'urn:svc:entities';
const ENTITIES_SCHEMA = 'urn:svc:schema:entities-review@1.0.0';

const caseJsonSchema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  required: ['caseNumber', 'courtLocation'],
  properties: {
    caseNumber: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{4}$' },
    courtLocation: { type: 'string', minLength: 1 },
    tags: { type: 'array', items: { type: 'string' } },
    note: { type: 'string' },
  },
  additionalProperties: false,
};
const coreJsonSchema = {
  type: 'object',
  required: ['mimeType', 'sizeBytes'],
  properties: {
    mimeType: { type: 'string' },
    sizeBytes: { type: 'integer', minimum: 0 },
    ingest: { type: 'object', properties: { source: { type: 'string' }, receivedAt: { type: 'string', format: 'date-time' } } },
  },
};
const entitiesJsonSchema = {
  type: 'object',
  properties: { people: { type: 'array', items: { type: 'string' } }, orgs: { type: 'array', items: { type: 'string' } } },
};

const caseData = (n = 1) => ({ caseNumber: `AB-${String(1000 + n)}`, courtLocation: 'Oslo', tags: ['civil'] });
const coreData = { mimeType: 'application/pdf', sizeBytes: 1234, ingest: { source: 'scanner', receivedAt: '2026-01-02T03:04:05.000Z' } };

let server: TestServer;
let offServer: TestServer;
const keysDir = tempRoot('svc-docs-jwks-');
let rsaKey: CryptoKey;
let ecKey: CryptoKey;
let strangerKey: CryptoKey;

/** An HS256 token of the test secret, every capability unless `scope` says otherwise. */
const tok = (claims: Claims = {}, options: Parameters<typeof hsToken>[2] = {}) => hsToken(SECRET, { scope: ALL, ...claims }, options);
let api: Api;
const as = async (claims: Claims = {}) => api.as(await tok(claims));

async function oidcToken(alg: 'RS256' | 'ES256', key: CryptoKey, kid: string, claims: Record<string, unknown>, set: { iss?: string | null; aud?: string | null; exp?: number } = {}) {
  const jwt = new SignJWT({ org_id: 'acme', scope: ALL, ...claims }).setProtectedHeader({ alg, kid, typ: 'JWT' }).setSubject('oidc-user').setIssuedAt();
  if (set.iss !== null) jwt.setIssuer(set.iss ?? ISSUER);
  if (set.aud !== null) jwt.setAudience(set.aud ?? AUDIENCE);
  jwt.setExpirationTime(set.exp ?? Math.floor(Date.now() / 1000) + 300);
  return jwt.sign(key);
}

beforeAll(async () => {
  const rsa = await generateKeyPair('RS256', { extractable: true });
  const ec = await generateKeyPair('ES256', { extractable: true });
  const stranger = await generateKeyPair('RS256', { extractable: true });
  rsaKey = rsa.privateKey;
  ecKey = ec.privateKey;
  strangerKey = stranger.privateKey;
  const jwks = {
    keys: [
      { ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
      { ...(await exportJWK(ec.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' },
    ],
  };
  const jwksFile = path.join(keysDir, 'jwks.json');
  fs.writeFileSync(jwksFile, JSON.stringify(jwks));
  [server, offServer] = await Promise.all([
    startServer({
      SVC_DURABILITY: 'relaxed',
      SVC_DEV_SHARED_SECRET: SECRET,
      SVC_OIDC_JWKS_FILE: jwksFile,
      SVC_OIDC_ISSUER: ISSUER,
      SVC_OIDC_AUDIENCE: AUDIENCE,
      SVC_DOC_MAX_JSON_BYTES: `${MAX_JSON / KiB}KiB`,
    }),
    startServer({ SVC_DURABILITY: 'relaxed', SVC_DEV_SHARED_SECRET: SECRET, SVC_DEV_TOKEN_ENDPOINT: 'off' }),
  ]);
  api = new Api(server.url, await tok());
  for (const [schemaUrn, namespaceUrn, jsonSchema] of [
    [CASE_SCHEMA, CASE, caseJsonSchema],
    [CORE_SCHEMA, CORE, coreJsonSchema],
    [ENTITIES_SCHEMA, ENTITIES, entitiesJsonSchema],
  ] as const) {
    const r = await api.post('/v1/schemas', { schemaUrn, namespaceUrn, lifecycle: 'published', jsonSchema });
    expect(r.status, r.text).toBe(201);
  }
});

afterAll(async () => {
  await Promise.all([server?.stop(), offServer?.stop()]);
  fs.rmSync(keysDir, { recursive: true, force: true });
});

/** A finalized document of `api` with a few bytes, and optionally canonical metadata. */
async function finalizedDoc(client: Api = api, options: { create?: Record<string, unknown>; bytes?: Uint8Array; contentType?: string; finalize?: Record<string, unknown> } = {}) {
  return client.newDocument(options.bytes ?? Buffer.from(`document ${randomUUID()}`), options);
}

async function docWithCase(client: Api = api) {
  const doc = await finalizedDoc(client);
  const w = await client.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData() } });
  expect(w.status, w.text).toBe(201);
  return { ...doc, versionId: w.json.versionId as string, caseId: w.json.metadataIds[CASE] as string };
}

describe('POST /dev/token', () => {
  test('defaults: a Bearer HS256 token of every capability for org "dev", user "dev-user", an hour', async () => {
    const r = await reply(await fetch(`${server.url}/dev/token`, { method: 'POST' }));
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe(JSON_TYPE);
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(Object.keys(r.json).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
    expect(r.json.token_type).toBe('Bearer');
    expect(r.json.expires_in).toBe(3600);
    const claims = decodePayload(r.json.access_token);
    expect(JSON.parse(Buffer.from(r.json.access_token.split('.')[0], 'base64url').toString()).alg).toBe('HS256');
    expect(claims).toMatchObject({ org_id: 'dev', sub: 'dev-user', roles: [] });
    expect((claims.scope as string).split(' ').sort()).toEqual(ALL.split(' ').sort());
    expect((claims.exp as number) - (claims.iat as number)).toBe(3600);
    // It works: a document of org "dev".
    const created = await api.as(r.json.access_token).post('/v1/documents', {});
    expect(created.status).toBe(201);
  });

  test('claims from the body; the token carries them and the server honours them', async () => {
    const body = { org_id: 'org-dev-2', sub: 'zoe', scope: 'doc.read', roles: ['clerk', 'judge'], ttl_seconds: 120 };
    const r = await reply(await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }));
    expect(r.status).toBe(200);
    expect(r.json.expires_in).toBe(120);
    const claims = decodePayload(r.json.access_token);
    expect(claims).toMatchObject({ org_id: 'org-dev-2', sub: 'zoe', scope: 'doc.read', roles: ['clerk', 'judge'] });
    expect((claims.exp as number) - (claims.iat as number)).toBe(120);
    // scope doc.read only: creating is forbidden.
    expectError(await api.as(r.json.access_token).post('/v1/documents', {}), 403, 'forbidden');
  });

  test('a bad body is 400', async () => {
    for (const body of [{ tenant: 'x' }, { ttl_seconds: 0 }, { ttl_seconds: 1.5 }, { ttl_seconds: 8 * 24 * 3600 }, { roles: 'clerk' }, { roles: [''] }, { org_id: '' }, { sub: 7 }, [1]]) {
      const r = await reply(await fetch(`${server.url}/dev/token`, { method: 'POST', body: JSON.stringify(body) }));
      expectError(r, 400, 'invalid_request');
    }
    expectError(await reply(await fetch(`${server.url}/dev/token`, { method: 'POST', body: '{"org_id":' })), 400, 'invalid_json');
  });

  test('SVC_DEV_TOKEN_ENDPOINT=off: 404, while tokens of the shared secret are still verified', async () => {
    const r = await reply(await fetch(`${offServer.url}/dev/token`, { method: 'POST', body: '{}' }));
    expectError(r, 404, 'not_found');
    const client = new Api(offServer.url, await tok());
    const created = await client.post('/v1/documents', {});
    expect(created.status).toBe(201);
    expectError(await client.as(await hsToken('another secret', { scope: ALL })).get(`/v1/documents/${created.json.documentId}`), 401, 'unauthenticated');
  });
});

describe('authentication: 401 unauthenticated with WWW-Authenticate: Bearer', () => {
  /** 401 with WWW-Authenticate; metadata writes and patches answer in their rejected form, the rest `{ error, message }`. */
  const expect401 = (r: Awaited<ReturnType<Api['get']>>, what: string, metadataWrite = false) => {
    expect(r.status, `${what}: ${r.text}`).toBe(401);
    expect(r.headers.get('www-authenticate'), what).toBe('Bearer');
    if (metadataWrite) expectRejected(r, 401, 'unauthenticated');
    else expectError(r, 401, 'unauthenticated');
  };

  test('missing, malformed, forged, expired and incomplete tokens on every route', async () => {
    const doc = await docWithCase();
    const now = Math.floor(Date.now() / 1000);
    const header = async () => ({
      'no header': undefined,
      'Basic scheme': 'Basic YWxpY2U6c2VjcmV0',
      'Bearer without token': 'Bearer',
      'Bearer garbage': 'Bearer garbage',
      'three garbage segments': 'Bearer aaa.bbb.ccc',
      'bad signature': `Bearer ${await hsToken('not the secret', { scope: ALL })}`,
      'tampered payload': `Bearer ${(await tok()).replace(/\.[^.]+\./, `.${Buffer.from(JSON.stringify({ org_id: 'acme', sub: 'root', scope: ALL, exp: now + 600 })).toString('base64url')}.`)}`,
      expired: `Bearer ${await tok({}, { exp: now - 120 })}`,
      'no exp': `Bearer ${await tok({}, { exp: null })}`,
      'not yet valid (nbf)': `Bearer ${await tok({ nbf: now + 3600 })}`,
      'no org_id': `Bearer ${await tok({ org_id: undefined })}`,
      'empty org_id': `Bearer ${await tok({ org_id: '' })}`,
      'numeric org_id': `Bearer ${await tok({ org_id: 42 as unknown as string })}`,
      'no sub': `Bearer ${await tok({ sub: undefined })}`,
      'roles not an array': `Bearer ${await tok({ roles: 'clerk' as unknown as string[] })}`,
      'scope not a string': `Bearer ${await tok({ scope: ['doc.read'] as unknown as string })}`,
      'alg none': `Bearer ${noneToken({ scope: ALL })}`,
      'alg HS512': `Bearer ${await new SignJWT({ org_id: 'acme', scope: ALL }).setProtectedHeader({ alg: 'HS512' }).setSubject('alice').setExpirationTime('5m').sign(new TextEncoder().encode(SECRET))}`,
    });
    const cases = await header();
    const ns = encodeURIComponent(CASE);
    const routes: Array<[string, string, unknown?]> = [
      ['POST', '/v1/documents', {}],
      ['GET', `/v1/documents/${doc.documentId}`],
      ['GET', `/v1/documents/${doc.documentId}/versions`],
      ['GET', `/v1/documents/${doc.documentId}/content`],
      ['GET', `/v1/documents/${doc.documentId}/metadata`],
      ['GET', `/v1/documents/${doc.documentId}/metadata/${ns}`],
      ['GET', `/v1/documents/${doc.documentId}/metadata/${ns}/patches`],
      ['POST', `/v1/documents/${doc.documentId}/metadata`, { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: CASE_SCHEMA, data: caseData(2) } } } }],
      ['POST', `/v1/documents/${doc.documentId}/metadata/${ns}/patch`, { mode: 'canonical', baseMetadataId: doc.caseId, patch: [{ op: 'add', path: '/data/note', value: 'x' }], reason: 'r' }],
      ['POST', `/v1/uploads/${doc.uploadId}/finalize`, {}],
      ['POST', '/v1/schemas', { schemaUrn: 'urn:svc:schema:auth-test@1.0.0', namespaceUrn: 'urn:svc:auth-test', lifecycle: 'published', jsonSchema: { type: 'object' } }],
      ['GET', `/v1/schemas/${encodeURIComponent(CASE_SCHEMA)}`],
    ];
    for (const [what, value] of Object.entries(cases)) {
      for (const [method, p, body] of routes) {
        const r = await reply(await fetch(server.url + p, { method, headers: value === undefined ? {} : { Authorization: value }, body: body === undefined ? undefined : JSON.stringify(body) }));
        expect401(r, `${what} ${method} ${p}`, method === 'POST' && /\/metadata(\/[^/]+\/patch)?$/.test(p));
      }
      const put = await reply(await fetch(`${server.url}/v1/uploads/${doc.uploadId}/bytes`, { method: 'PUT', headers: value === undefined ? {} : { Authorization: value }, body: Buffer.from('x') }));
      expect401(put, `${what} PUT bytes`);
    }
    // Nothing changed through any of them.
    const versions = await api.get(`/v1/documents/${doc.documentId}/versions`);
    expect(versions.json.versions).toHaveLength(2);
  });

  test('authentication comes before the body: malformed JSON without a token is 401', async () => {
    const r = await reply(await fetch(`${server.url}/v1/documents`, { method: 'POST', body: '{nope' }));
    expect401(r, 'malformed body, no token');
  });

  test('the "Bearer" scheme is case-insensitive', async () => {
    const r = await reply(await fetch(`${server.url}/v1/documents`, { method: 'POST', headers: { Authorization: `bearer ${await tok()}` }, body: '{}' }));
    expect(r.status).toBe(201);
  });

  test('RS256 and ES256 tokens verified against the JWKS file; wrong issuer, audience or key is 401', async () => {
    const rs = api.as(await oidcToken('RS256', rsaKey, 'rsa-1', {}));
    const es = api.as(await oidcToken('ES256', ecKey, 'ec-1', {}));
    const created = await rs.post('/v1/documents', { externalRefs: [{ system: 'cms', value: 'rs-1' }] });
    expect(created.status, created.text).toBe(201);
    // Same tenant (org_id acme) whatever the issuer: readable with ES256 and with HS256.
    const viaEs = await es.get(`/v1/documents/${created.json.documentId}`);
    expect(viaEs.status, viaEs.text).toBe(200);
    expect(viaEs.json.externalRefs).toEqual([{ system: 'cms', value: 'rs-1' }]);
    expect((await api.get(`/v1/documents/${created.json.documentId}`)).status).toBe(200);

    const bad = {
      'wrong issuer': await oidcToken('RS256', rsaKey, 'rsa-1', {}, { iss: 'https://evil.example' }),
      'no issuer': await oidcToken('RS256', rsaKey, 'rsa-1', {}, { iss: null }),
      'wrong audience': await oidcToken('ES256', ecKey, 'ec-1', {}, { aud: 'another-api' }),
      'no audience': await oidcToken('ES256', ecKey, 'ec-1', {}, { aud: null }),
      expired: await oidcToken('RS256', rsaKey, 'rsa-1', {}, { exp: Math.floor(Date.now() / 1000) - 300 }),
      'key not in the JWKS': await oidcToken('RS256', strangerKey, 'rsa-1', {}),
      'unknown kid': await oidcToken('RS256', strangerKey, 'rsa-9', {}),
      'RS key presented as ES256 kid': await oidcToken('ES256', ecKey, 'rsa-1', {}),
      'no org_id': await oidcToken('RS256', rsaKey, 'rsa-1', { org_id: undefined }),
    };
    for (const [what, jwt] of Object.entries(bad)) {
      expect401(await api.as(jwt).get(`/v1/documents/${created.json.documentId}`), what);
    }
  });

  test('a server without a JWKS refuses RS256 tokens', async () => {
    const jwt = await oidcToken('RS256', rsaKey, 'rsa-1', {});
    expect401(await new Api(offServer.url, jwt).post('/v1/documents', {}), 'RS256 without JWKS');
  });
});

describe('capabilities: 403 forbidden', () => {
  test('doc.create, doc.read and meta.read are required by their routes', async () => {
    const doc = await docWithCase();
    expectError(await (await as({ scope: 'doc.read meta.read' })).post('/v1/documents', {}), 403, 'forbidden');
    const createOnly = await as({ scope: 'doc.create' });
    for (const p of ['', '/versions', '/content']) expectError(await createOnly.get(`/v1/documents/${doc.documentId}${p}`), 403, 'forbidden');
    const readOnly = await as({ scope: 'doc.read' });
    expect((await readOnly.get(`/v1/documents/${doc.documentId}`)).status).toBe(200);
    expectError(await readOnly.get(`/v1/documents/${doc.documentId}/metadata`), 403, 'forbidden');
    expectError(await readOnly.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`), 403, 'forbidden');
    expectError(await readOnly.get(`/v1/documents/${doc.documentId}/metadata/${CASE}/patches`), 403, 'forbidden');
    const metaRead = await as({ scope: 'meta.read' });
    expect((await metaRead.get(`/v1/documents/${doc.documentId}/metadata`)).status).toBe(200);
    // Bytes and finalize of an upload need doc.create.
    const created = await api.post('/v1/documents', {});
    expectError(await readOnly.putBytes(created.json.uploadId, Buffer.from('abc')), 403, 'forbidden');
    expect((await api.putBytes(created.json.uploadId, Buffer.from('abc'))).status).toBe(204);
    expectError(await readOnly.post(`/v1/uploads/${created.json.uploadId}/finalize`, {}), 403, 'forbidden');
  });

  test('meta.write:<ns>: exact and * wildcards grant; another namespace or a bare prefix does not', async () => {
    const doc = await finalizedDoc();
    const write = (client: Api) => client.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData() } });
    for (const scope of ['meta.write:*', `meta.write:${CASE}`, 'meta.write:urn:svc:*', '*']) {
      const r = await write(await as({ scope }));
      expect(r.status, `${scope}: ${r.text}`).toBe(201);
    }
    for (const scope of ['meta.write:urn:svc:other', 'meta.write:urn:svc:cas', 'meta.write', 'meta.patch:*', 'meta.read doc.read doc.write']) {
      const r = await write(await as({ scope }));
      expect(r.status, `${scope}: ${r.text}`).toBe(403);
      expect(errorCode(r)).toBe('forbidden');
      expectNoLeak(r.text);
    }
    // One namespace of the bundle without the capability refuses the whole write.
    const partial = await (await as({ scope: `meta.write:${CASE}` })).writeCanonical(doc.documentId, {
      [CASE]: { schema: CASE_SCHEMA, data: caseData() },
      [CORE]: { schema: CORE_SCHEMA, data: coreData },
    });
    expect(partial.status).toBe(403);
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces[CORE]).toBeUndefined();
  });

  test('meta.write is also needed for initialMetadata at creation', async () => {
    const r = await (await as({ scope: 'doc.create meta.write:urn:svc:other' })).post('/v1/documents', {
      initialMetadata: { namespaces: { [CASE]: { schema: CASE_SCHEMA, data: caseData() } } },
    });
    expect(r.status, r.text).toBe(403);
    expect(errorCode(r)).toBe('forbidden');
  });

  test('schema.write is needed to register a schema; reading one needs only a token', async () => {
    const body = { schemaUrn: 'urn:svc:schema:cap-test@1.0.0', namespaceUrn: 'urn:svc:cap-test', lifecycle: 'published', jsonSchema: { type: 'object' } };
    const noWrite = await as({ scope: 'doc.read doc.create meta.write:*' });
    expectError(await noWrite.post('/v1/schemas', body), 403, 'forbidden');
    expectError(await noWrite.get(`/v1/schemas/${encodeURIComponent(body.schemaUrn)}`), 404, 'schema_not_found');
    expect((await (await as({ scope: 'schema.write' })).post('/v1/schemas', body)).status).toBe(201);
    expect((await (await as({ scope: 'job.read' })).get(`/v1/schemas/${encodeURIComponent(body.schemaUrn)}`)).status).toBe(200);
  });
});

describe('documents', () => {
  test('create: 201 { documentId, uploadId }, UUIDv7 ids, Location; the document has no version yet', async () => {
    const r = await api.post('/v1/documents', { placementHint: 'archival', externalRefs: [{ system: 'court', value: 'C-17', meta: { repository: 'longterm' } }] });
    expect(r.status).toBe(201);
    expect(r.headers.get('content-type')).toBe(JSON_TYPE);
    expect(Object.keys(r.json).sort()).toEqual(['documentId', 'uploadId']);
    expect(r.json.documentId).toMatch(UUID_V7);
    expect(r.json.uploadId).toMatch(UUID_V7);
    expect(r.json.uploadId).not.toBe(r.json.documentId);
    expect(r.headers.get('location')).toBe(`/v1/documents/${r.json.documentId}`);
    const got = await api.get(`/v1/documents/${r.json.documentId}`);
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe(JSON_TYPE);
    expect(got.json).toEqual({
      documentId: r.json.documentId,
      currentVersionId: null,
      externalRefs: [{ system: 'court', value: 'C-17', meta: { repository: 'longterm' } }],
      placementHint: 'archival',
      createdAt: expect.stringMatching(ISO_UTC),
      updatedAt: expect.stringMatching(ISO_UTC),
    });
    expect(got.json.createdAt).toBe(got.json.updatedAt);
    expect(Math.abs(Date.parse(got.json.createdAt) - Date.now())).toBeLessThan(60_000);
    expect((await api.get(`/v1/documents/${r.json.documentId}/versions`)).json).toEqual({ versions: [] });
    expectError(await api.get(`/v1/documents/${r.json.documentId}/content`), 404, 'content_not_found');
    expect((await api.get(`/v1/documents/${r.json.documentId}/metadata`)).json).toEqual({ namespaces: {} });
  });

  test('every placement hint is accepted; the default is transient', async () => {
    for (const hint of ['transient', 'archival', 'legal_hold']) {
      const r = await api.post('/v1/documents', { placementHint: hint });
      expect(r.status).toBe(201);
      expect((await api.get(`/v1/documents/${r.json.documentId}`)).json.placementHint).toBe(hint);
    }
    const r = await api.post('/v1/documents', {});
    expect((await api.get(`/v1/documents/${r.json.documentId}`)).json).toMatchObject({ placementHint: 'transient', externalRefs: [] });
  });

  test('a client documentId: 201, then 200 with the same uploadId (create-or-resume); another tenant gets its own document', async () => {
    const documentId = randomUUID();
    const first = await api.post('/v1/documents', { documentId, externalRefs: [{ system: 'cms', value: 'a' }] });
    expect(first.status).toBe(201);
    expect(first.json).toEqual({ documentId, uploadId: expect.stringMatching(UUID_V7) });
    const again = await api.post('/v1/documents', { documentId, externalRefs: [{ system: 'cms', value: 'a' }] });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(first.json);
    expect(again.headers.get('location')).toBe(`/v1/documents/${documentId}`);
    // Resume: the bytes go to the same upload; after finalize the repeat still answers 200 with it.
    expect((await api.putBytes(again.json.uploadId, Buffer.from('resumed'))).status).toBe(204);
    expect((await api.post(`/v1/uploads/${again.json.uploadId}/finalize`, {})).status).toBe(201);
    const third = await api.post('/v1/documents', { documentId });
    expect(third.status).toBe(200);
    expect(third.json).toEqual(first.json);
    // Another org using the same id: a separate document, invisible across tenants.
    const other = await as({ org_id: 'globex' });
    const theirs = await other.post('/v1/documents', { documentId, externalRefs: [{ system: 'cms', value: 'globex' }] });
    expect(theirs.status).toBe(201);
    expect(theirs.json.uploadId).not.toBe(first.json.uploadId);
    expect((await other.get(`/v1/documents/${documentId}`)).json).toMatchObject({ currentVersionId: null, externalRefs: [{ system: 'cms', value: 'globex' }] });
    expect((await api.get(`/v1/documents/${documentId}`)).json.externalRefs).toEqual([{ system: 'cms', value: 'a' }]);
    expectError(await other.putBytes(first.json.uploadId, Buffer.from('x')), 404, 'upload_not_found');
  });

  test('bad create bodies are 400 invalid_request; nothing is created', async () => {
    const bodies: unknown[] = [
      { documentId: 'not-a-uuid' },
      { documentId: 42 },
      { documentId: '' },
      { placementHint: 'hot' },
      { placementHint: 1 },
      { externalRefs: 'court:1' },
      { externalRefs: [{ system: 'court' }] },
      { externalRefs: [{ value: '1' }] },
      { externalRefs: [{ system: '', value: '1' }] },
      { externalRefs: [{ system: 'court', value: 1 }] },
      { externalRefs: [{ system: 'court', value: '1', meta: { n: 1 } }] },
      { externalRefs: [{ system: 'court', value: '1', meta: ['x'] }] },
      { externalRefs: [{ system: 'court', value: '1', other: 'x' }] },
      { externalRefs: ['court'] },
      { initialPermissions: [] },
      { initialPermissions: { rules: 'all' } },
      { initialPermissions: { rules: [{ effect: 'maybe', actions: ['doc.read'], principals: ['role:clerk'] }] } },
      { initialPermissions: { rules: [{ effect: 'allow', actions: [], principals: ['role:clerk'] }] } },
      { initialPermissions: { rules: [{ effect: 'allow', actions: ['doc.read'], principals: [] }] } },
      { initialPermissions: { rules: [{ effect: 'allow', actions: ['doc.read'], principals: ['group:admins'] }] } },
      { initialPermissions: { rules: [{ effect: 'allow', actions: ['doc.read'], principals: ['role:'] }] } },
      { initialPermissions: { rules: [{ effect: 'allow', actions: ['doc.read'], principals: ['org:acme'] }] } },
      { initialPermissions: { rules: [{ effect: 'allow', actions: ['doc.read'], principals: ['role:x'], extra: 1 }] } },
      { initialPermissions: { rules: [], other: 1 } },
      { unknownField: true },
      [],
      'document',
      42,
      null,
    ];
    for (const body of bodies) expectError(await api.post('/v1/documents', JSON.stringify(body)), 400, 'invalid_request');
    const documentId = randomUUID();
    expectError(await api.post('/v1/documents', { documentId, placementHint: 'hot' }), 400, 'invalid_request');
    expectError(await api.get(`/v1/documents/${documentId}`), 404, 'document_not_found');
  });

  test('malformed JSON is 400 invalid_json; a body over SVC_DOC_MAX_JSON_BYTES is 413 payload_too_large', async () => {
    for (const body of ['{', '{"documentId": }', 'nope', '{"a":1}}']) expectError(await api.post('/v1/documents', body), 400, 'invalid_json');
    const big = { externalRefs: [{ system: 'cms', value: 'x'.repeat(MAX_JSON + 10) }] };
    expectError(await api.post('/v1/documents', big), 413, 'payload_too_large');
    // Just under the bound is accepted.
    const fits = { externalRefs: [{ system: 'cms', value: '' }] };
    fits.externalRefs[0]!.value = 'y'.repeat(MAX_JSON - Buffer.byteLength(JSON.stringify(fits)));
    expect(Buffer.byteLength(JSON.stringify(fits))).toBe(MAX_JSON);
    expect((await api.post('/v1/documents', fits)).status).toBe(201);
    // The server still answers on the same origin afterwards.
    expect((await api.post('/v1/documents', {})).status).toBe(201);
  });

  test('bytes streamed (4 MiB), finalize: contentRef b3:<BLAKE3>; finalize again: 200, same answer', async () => {
    const data = seededBytes(4 * MiB + 333, 7);
    const created = await api.post('/v1/documents', { externalRefs: [{ system: 'cms', value: 'big' }] });
    const chunks: Buffer[] = [];
    for (let at = 0; at < data.length; at += 64 * KiB) chunks.push(data.subarray(at, at + 64 * KiB));
    const put = await api.putBytes(created.json.uploadId, chunks, 'application/vnd.svc-test');
    expect(put.status, put.text).toBe(204);
    expect(put.text).toBe('');
    const before = await api.get(`/v1/documents/${created.json.documentId}`);
    expect(before.json.currentVersionId).toBeNull();
    const fin = await api.post(`/v1/uploads/${created.json.uploadId}/finalize`, { labels: ['received'], reason: 'scanned at the front desk' });
    expect(fin.status, fin.text).toBe(201);
    expect(fin.headers.get('content-type')).toBe(JSON_TYPE);
    const key = `b3:${await blake3(data)}`;
    expect(key).toMatch(/^b3:[0-9a-f]{64}$/);
    expect(fin.json).toEqual({ documentId: created.json.documentId, versionId: expect.stringMatching(UUID_V7), contentRef: { kind: 'blob', key } });
    const again = await api.post(`/v1/uploads/${created.json.uploadId}/finalize`, { labels: ['received'], reason: 'scanned at the front desk' });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(fin.json);
    // Finalize again with another body: still the same version, no new one.
    expect((await api.post(`/v1/uploads/${created.json.uploadId}/finalize`, {})).json).toEqual(fin.json);
    const doc = await api.get(`/v1/documents/${created.json.documentId}`);
    expect(doc.json).toEqual({
      documentId: created.json.documentId,
      currentVersionId: fin.json.versionId,
      externalRefs: [{ system: 'cms', value: 'big' }],
      placementHint: 'transient',
      createdAt: before.json.createdAt,
      updatedAt: expect.stringMatching(ISO_UTC),
    });
    expect(Date.parse(doc.json.updatedAt)).toBeGreaterThanOrEqual(Date.parse(doc.json.createdAt));
    const versions = await api.get(`/v1/documents/${created.json.documentId}/versions`);
    expect(versions.json.versions).toHaveLength(1);

    const content = await fetch(`${server.url}/v1/documents/${created.json.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
    expect(content.status).toBe(200);
    expect(content.headers.get('content-type')).toBe('application/vnd.svc-test');
    expect(content.headers.get('content-length')).toBe(String(data.length));
    expect(content.headers.get('etag')).toBe(`"${key}"`);
    expect(content.headers.get('accept-ranges')).toBe('bytes');
    expect(Buffer.from(await content.arrayBuffer()).equals(data)).toBe(true);
  });

  test('finalize before the bytes is 409 upload_incomplete; bytes after finalize are 409; bad finalize bodies are 400', async () => {
    const created = await api.post('/v1/documents', {});
    const uploadId = created.json.uploadId;
    expectError(await api.post(`/v1/uploads/${uploadId}/finalize`, {}), 409, 'upload_incomplete');
    expect((await api.putBytes(uploadId, Buffer.from('first bytes'))).status).toBe(204);
    for (const body of [{ labels: 'CURRENT' }, { labels: [''] }, { labels: ['has space'] }, { labels: [1] }, { labels: ['x'.repeat(65)] }, { reason: 7 }, { other: 1 }, ['x']]) {
      expectError(await api.post(`/v1/uploads/${uploadId}/finalize`, JSON.stringify(body)), 400, 'invalid_request');
    }
    expectError(await api.post(`/v1/uploads/${uploadId}/finalize`, '{"labels":'), 400, 'invalid_json');
    // A second PUT before finalize replaces the bytes (a retried upload).
    expect((await api.putBytes(uploadId, Buffer.from('second bytes'))).status).toBe(204);
    const fin = await api.post(`/v1/uploads/${uploadId}/finalize`);
    expect(fin.status).toBe(201);
    expect(fin.json.contentRef.key).toBe(`b3:${await blake3(Buffer.from('second bytes'))}`);
    const late = await api.putBytes(uploadId, Buffer.from('late bytes'));
    expectError(late, 409, 'upload_finalized');
    const content = await api.get(`/v1/documents/${created.json.documentId}/content`);
    expect(content.text).toBe('second bytes');
  });

  test('unknown and malformed upload ids', async () => {
    const unknown = randomUUID();
    expectError(await api.putBytes(unknown, Buffer.from('x')), 404, 'upload_not_found');
    expectError(await api.post(`/v1/uploads/${unknown}/finalize`, {}), 404, 'upload_not_found');
    expectError(await api.putBytes('not-a-uuid', Buffer.from('x')), 400, 'invalid_request');
    expectError(await api.post('/v1/uploads/not-a-uuid/finalize', {}), 400, 'invalid_request');
  });

  test('content: Content-Type as uploaded, ETag "b3:…", HEAD, Range 206, If-None-Match 304, 416', async () => {
    const data = seededBytes(300 * KiB + 17, 11);
    const doc = await finalizedDoc(api, { bytes: data, contentType: 'text/plain; charset=utf-8' });
    const url = `${server.url}/v1/documents/${doc.documentId}/content`;
    const auth = { Authorization: `Bearer ${api.token}` };
    const etag = `"${doc.contentRef.key}"`;

    const full = await fetch(url, { headers: auth });
    expect(full.status).toBe(200);
    expect(full.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(full.headers.get('etag')).toBe(etag);
    expect(full.headers.get('content-length')).toBe(String(data.length));
    expect(full.headers.get('accept-ranges')).toBe('bytes');
    expect(full.headers.get('last-modified')).toMatch(/GMT$/);
    expect(Buffer.from(await full.arrayBuffer()).equals(data)).toBe(true);

    const head = await fetch(url, { method: 'HEAD', headers: auth });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(data.length));
    expect(head.headers.get('etag')).toBe(etag);
    expect((await head.arrayBuffer()).byteLength).toBe(0);

    const range = await fetch(url, { headers: { ...auth, Range: 'bytes=1000-1999' } });
    expect(range.status).toBe(206);
    expect(range.headers.get('content-range')).toBe(`bytes 1000-1999/${data.length}`);
    expect(range.headers.get('content-length')).toBe('1000');
    expect(range.headers.get('etag')).toBe(etag);
    expect(Buffer.from(await range.arrayBuffer()).equals(data.subarray(1000, 2000))).toBe(true);

    const open = await fetch(url, { headers: { ...auth, Range: `bytes=${data.length - 5}-` } });
    expect(open.status).toBe(206);
    expect(open.headers.get('content-range')).toBe(`bytes ${data.length - 5}-${data.length - 1}/${data.length}`);
    expect(Buffer.from(await open.arrayBuffer()).equals(data.subarray(data.length - 5))).toBe(true);

    const suffix = await fetch(url, { headers: { ...auth, Range: 'bytes=-10' } });
    expect(suffix.status).toBe(206);
    expect(Buffer.from(await suffix.arrayBuffer()).equals(data.subarray(data.length - 10))).toBe(true);

    const unsatisfiable = await reply(await fetch(url, { headers: { ...auth, Range: `bytes=${data.length}-` } }));
    expectError(unsatisfiable, 416, 'invalid_range');
    expect(unsatisfiable.headers.get('content-range')).toBe(`bytes */${data.length}`);

    const notModified = await fetch(url, { headers: { ...auth, 'If-None-Match': etag } });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.get('etag')).toBe(etag);
    expect((await notModified.arrayBuffer()).byteLength).toBe(0);
    const weak = await fetch(url, { headers: { ...auth, 'If-None-Match': `W/${etag}` } });
    expect(weak.status).toBe(304);
    await weak.arrayBuffer();
    const changed = await fetch(url, { headers: { ...auth, 'If-None-Match': '"b3:0000"' } });
    expect(changed.status).toBe(200);
    expect(Buffer.from(await changed.arrayBuffer()).equals(data)).toBe(true);

    // Without a Content-Type the content is application/octet-stream.
    const plain = await finalizedDoc(api, { bytes: Buffer.from(`untyped ${randomUUID()}`) });
    expect((await api.get(`/v1/documents/${plain.documentId}/content`)).headers.get('content-type')).toBe('application/octet-stream');
  });

  test('content: each document keeps its own Content-Type even when its bytes equal another document\'s', async () => {
    const bytes = Buffer.from(`shared bytes ${randomUUID()}\n`);
    const a = await finalizedDoc(api, { bytes, contentType: 'text/plain' });
    const b = await finalizedDoc(api, { bytes, contentType: 'text/csv' });
    expect(b.contentRef).toEqual(a.contentRef);
    expect((await api.get(`/v1/documents/${a.documentId}/content`)).headers.get('content-type')).toBe('text/plain');
    expect((await api.get(`/v1/documents/${b.documentId}/content`)).headers.get('content-type')).toBe('text/csv');
  });

  test('content: the current version of a protected document is not declared public or immutable to caches', async () => {
    const doc = await finalizedDoc();
    const r = await api.get(`/v1/documents/${doc.documentId}/content`);
    expect(r.status).toBe(200);
    const cc = r.headers.get('cache-control') ?? '';
    expect(cc).not.toMatch(/\bpublic\b/);
    expect(cc).not.toMatch(/\bimmutable\b/);
    expect(cc).toMatch(/\bprivate\b|\bno-cache\b|\bno-store\b/);
  });

  test('unknown documents are 404 document_not_found on every route; a malformed id is 400', async () => {
    const id = randomUUID();
    for (const p of ['', '/versions', '/content', '/metadata', `/metadata/${CASE}`, `/metadata/${CASE}/patches`]) {
      expectError(await api.get(`/v1/documents/${id}${p}`), 404, 'document_not_found');
      expectError(await api.get(`/v1/documents/not-a-uuid${p}`), 400, 'invalid_request');
    }
    const w = await api.writeCanonical(id, { [CASE]: { schema: CASE_SCHEMA, data: caseData() } });
    expect(w.status).toBe(404);
    expect(errorCode(w)).toBe('document_not_found');
    const p = await api.patch(id, CASE, { baseMetadataId: 'meta_01J00000000000000000000000', patch: [{ op: 'add', path: '/data/note', value: 'x' }] });
    expect(p.status).toBe(404);
    expect(errorCode(p)).toBe('document_not_found');
    expectError(await api.get('/v1/nothing-here'), 404, 'not_found');
  });

  test('another tenant\'s document is 404 everywhere, its upload 404 upload_not_found, and nothing changes', async () => {
    const doc = await docWithCase();
    const globex = await as({ org_id: 'globex' });
    for (const p of ['', '/versions', '/content', '/metadata', `/metadata/${encodeURIComponent(CASE)}`, `/metadata/${CASE}/patches`]) {
      expectError(await globex.get(`/v1/documents/${doc.documentId}${p}`), 404, 'document_not_found');
    }
    const w = await globex.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData(9) } });
    expect(w.status).toBe(404);
    expect(errorCode(w)).toBe('document_not_found');
    const p = await globex.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: [{ op: 'add', path: '/data/note', value: 'x' }] });
    expect(p.status).toBe(404);
    expect(errorCode(p)).toBe('document_not_found');
    expectError(await globex.putBytes(doc.uploadId, Buffer.from('hijack')), 404, 'upload_not_found');
    expectError(await globex.post(`/v1/uploads/${doc.uploadId}/finalize`, {}), 404, 'upload_not_found');
    const versions = await api.get(`/v1/documents/${doc.documentId}/versions`);
    expect(versions.json.versions).toHaveLength(2);
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`)).json.entry.id).toBe(doc.caseId);
  });
});

describe('versions', () => {
  test('a DAG through parents; CURRENT moves to the newest; finalize labels stay on their version, unique per document', async () => {
    const doc = await finalizedDoc(api, { finalize: { labels: ['received', 'scan:original', 'received'], reason: 'front desk' } });
    const v1 = await api.get(`/v1/documents/${doc.documentId}/versions`);
    expect(v1.status).toBe(200);
    expect(v1.headers.get('content-type')).toBe(JSON_TYPE);
    expect(v1.json).toEqual({
      versions: [{
        versionId: doc.versionId,
        parents: [],
        labels: expect.any(Array),
        contentRef: doc.contentRef,
        actor: 'alice',
        reason: 'front desk',
        createdAt: expect.stringMatching(ISO_UTC),
      }],
    });
    expect([...v1.json.versions[0].labels].sort()).toEqual(['CURRENT', 'received', 'scan:original']);

    const w2 = await api.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData() } }, { reason: 'docketing' });
    const w3 = await api.writeCanonical(doc.documentId, { [CORE]: { schema: CORE_SCHEMA, data: coreData } });
    const list = (await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions;
    expect(list.map((v: any) => v.versionId)).toEqual([doc.versionId, w2.json.versionId, w3.json.versionId]);
    expect(list.map((v: any) => v.parents)).toEqual([[], [doc.versionId], [w2.json.versionId]]);
    expect([...list[0].labels].sort()).toEqual(['received', 'scan:original']);
    expect(list[1].labels).toEqual([]);
    expect(list[2].labels).toEqual(['CURRENT']);
    expect(list[1]).toMatchObject({ actor: 'alice', reason: 'docketing', contentRef: doc.contentRef });
    expect(list[2].reason).toEqual(expect.any(String));
    const allLabels = list.flatMap((v: any) => v.labels);
    expect(new Set(allLabels).size).toBe(allLabels.length);
    const times = list.map((v: any) => Date.parse(v.createdAt));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    expect((await api.get(`/v1/documents/${doc.documentId}`)).json.currentVersionId).toBe(w3.json.versionId);
  });
});

describe('schemas', () => {
  const urn = () => `urn:svc:schema:s-${randomUUID().slice(0, 8)}@1.2.3`;
  const registration = (schemaUrn: string) => ({
    schemaUrn,
    namespaceUrn: 'urn:svc:schema-test',
    lifecycle: 'published',
    jsonSchema: { type: 'object', properties: { a: { type: 'string' }, b: { type: 'integer' } }, required: ['a'] },
  });

  test('register 201; identical again (any key order) 200 with the same record; a different body 409 schema_conflict', async () => {
    const schemaUrn = urn();
    const body = registration(schemaUrn);
    const r = await api.post('/v1/schemas', body);
    expect(r.status).toBe(201);
    expect(r.headers.get('content-type')).toBe(JSON_TYPE);
    expect(r.headers.get('location')).toBe(`/v1/schemas/${encodeURIComponent(schemaUrn)}`);
    expect(r.json).toEqual({ ...body, hash: expect.stringMatching(/^sha-256:[0-9a-f]{64}$/), createdAt: expect.stringMatching(ISO_UTC) });
    const again = await api.post('/v1/schemas', body);
    expect(again.status).toBe(200);
    expect(again.json).toEqual(r.json);
    const reordered = {
      jsonSchema: { required: ['a'], properties: { b: { type: 'integer' }, a: { type: 'string' } }, type: 'object' },
      lifecycle: 'published',
      namespaceUrn: 'urn:svc:schema-test',
      schemaUrn,
    };
    const same = await api.post('/v1/schemas', reordered);
    expect(same.status).toBe(200);
    expect(same.json.hash).toBe(r.json.hash);
    for (const changed of [
      { ...body, jsonSchema: { ...body.jsonSchema, required: ['a', 'b'] } },
      { ...body, lifecycle: 'draft' },
      { ...body, namespaceUrn: 'urn:svc:schema-test-2' },
    ]) {
      expectError(await api.post('/v1/schemas', changed), 409, 'schema_conflict');
    }
    expect((await api.get(`/v1/schemas/${encodeURIComponent(schemaUrn)}`)).json).toEqual(r.json);
  });

  test('GET /v1/schemas/{urn}: percent-encoded and plain; unknown 404 schema_not_found', async () => {
    const schemaUrn = urn();
    const created = await api.post('/v1/schemas', registration(schemaUrn));
    const encoded = await api.get(`/v1/schemas/${encodeURIComponent(schemaUrn)}`);
    expect(encoded.status).toBe(200);
    expect(encoded.headers.get('content-type')).toBe(JSON_TYPE);
    expect(encoded.json).toEqual(created.json);
    const plain = await api.get(`/v1/schemas/${schemaUrn}`);
    expect(plain.status).toBe(200);
    expect(plain.json).toEqual(created.json);
    expectError(await api.get(`/v1/schemas/${encodeURIComponent('urn:svc:schema:never@1.0.0')}`), 404, 'schema_not_found');
    expectError(await api.get('/v1/schemas/urn:svc:schema:never@1.0.0'), 404, 'schema_not_found');
    expectError(await api.get('/v1/schemas/garbage'), 400, 'invalid_request');
  });

  test('bad registrations are 400 invalid_request', async () => {
    const good = registration(urn());
    const bodies: unknown[] = [
      { ...good, schemaUrn: 'urn:svc:schema:nover' },
      { ...good, schemaUrn: 'urn:svc:schema:x@1.0' },
      { ...good, schemaUrn: 'urn:svc:schema:x@v1.0.0' },
      { ...good, schemaUrn: 'urn:other:schema:x@1.0.0' },
      { ...good, schemaUrn: 'urn:svc:x@1.0.0' },
      { ...good, schemaUrn: 7 },
      { ...good, namespaceUrn: 'case' },
      { ...good, namespaceUrn: 'urn:svc:schema:x@1.0.0' },
      { ...good, namespaceUrn: undefined },
      { ...good, lifecycle: 'live' },
      { ...good, lifecycle: undefined },
      { ...good, jsonSchema: 'object' },
      { ...good, jsonSchema: [] },
      { ...good, jsonSchema: null },
      { ...good, jsonSchema: { type: 'array' } },
      { ...good, jsonSchema: { properties: {} } },
      { ...good, jsonSchema: { type: 'object', properties: { a: { type: 'nonsense' } } } },
      { ...good, jsonSchema: { type: 'object', required: 'a' } },
      { ...good, jsonSchema: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } } },
      { ...good, jsonSchema: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' } },
      { ...good, extra: true },
      [],
      'schema',
    ];
    for (const body of bodies) {
      const r = await api.post('/v1/schemas', JSON.stringify(body));
      expect(r.status, `${JSON.stringify(body)}: ${r.text}`).toBe(400);
      expectError(r, 400, 'invalid_request');
    }
    expectError(await api.post('/v1/schemas', '{"schemaUrn":'), 400, 'invalid_json');
    expectError(await api.get(`/v1/schemas/${encodeURIComponent(good.schemaUrn)}`), 404, 'schema_not_found');
  });
});

describe('canonical metadata', () => {
  test('a document without a version cannot take metadata yet (409, nothing stored)', async () => {
    const created = await api.post('/v1/documents', {});
    const r = await api.writeCanonical(created.json.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData() } });
    expectRejected(r, 409, 'no_version');
    expect((await api.get(`/v1/documents/${created.json.documentId}/versions`)).json.versions).toEqual([]);
  });

  test('write: 201 accepted with a new version (parents = previous) and new meta_<ULID> ids; read back whole and per namespace', async () => {
    const doc = await finalizedDoc();
    const r = await api.writeCanonical(doc.documentId, {
      [CASE]: { schema: CASE_SCHEMA, data: caseData() },
      [CORE]: { schema: CORE_SCHEMA, data: coreData },
    });
    expect(r.status, r.text).toBe(201);
    expect(r.headers.get('content-type')).toBe(JSON_TYPE);
    expect(r.json).toEqual({
      status: 'accepted',
      versionId: expect.stringMatching(UUID_V7),
      metadataIds: { [CASE]: expect.stringMatching(META_ID), [CORE]: expect.stringMatching(META_ID) },
    });
    expect(r.json.metadataIds[CASE]).not.toBe(r.json.metadataIds[CORE]);
    expect(r.json.versionId).not.toBe(doc.versionId);
    const versions = (await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions;
    expect(versions.map((v: any) => [v.versionId, v.parents])).toEqual([[doc.versionId, []], [r.json.versionId, [doc.versionId]]]);
    expect((await api.get(`/v1/documents/${doc.documentId}`)).json.currentVersionId).toBe(r.json.versionId);

    const all = await api.get(`/v1/documents/${doc.documentId}/metadata`);
    expect(all.status).toBe(200);
    expect(all.headers.get('content-type')).toBe(JSON_TYPE);
    expect(all.json).toEqual({
      namespaces: {
        [CASE]: { schema: CASE_SCHEMA, id: r.json.metadataIds[CASE], data: caseData(), mode: 'canonical' },
        [CORE]: { schema: CORE_SCHEMA, id: r.json.metadataIds[CORE], data: coreData, mode: 'canonical' },
      },
    });
    for (const p of [encodeURIComponent(CASE), CASE]) {
      const one = await api.get(`/v1/documents/${doc.documentId}/metadata/${p}`);
      expect(one.status).toBe(200);
      expect(one.json).toEqual({ namespaceUrn: CASE, entry: { id: r.json.metadataIds[CASE], schema: CASE_SCHEMA, data: caseData(), mode: 'canonical' } });
    }
    expectError(await api.get(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(ENTITIES)}`), 404, 'metadata_not_found');
  });

  test('replace semantics per namespace: the written namespace is replaced whole, the others are kept; a new id every write', async () => {
    const doc = await finalizedDoc();
    const first = await api.writeCanonical(doc.documentId, {
      [CASE]: { schema: CASE_SCHEMA, data: { ...caseData(), note: 'first' } },
      [CORE]: { schema: CORE_SCHEMA, data: coreData },
    });
    const second = await api.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: { caseNumber: 'CD-2000', courtLocation: 'Bergen' } } });
    expect(second.status).toBe(201);
    expect(Object.keys(second.json.metadataIds)).toEqual([CASE]);
    expect(second.json.metadataIds[CASE]).not.toBe(first.json.metadataIds[CASE]);
    const all = (await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces;
    expect(all[CASE]).toEqual({ schema: CASE_SCHEMA, id: second.json.metadataIds[CASE], data: { caseNumber: 'CD-2000', courtLocation: 'Bergen' }, mode: 'canonical' });
    expect(all[CORE]).toEqual({ schema: CORE_SCHEMA, id: first.json.metadataIds[CORE], data: coreData, mode: 'canonical' });
    // The same data again is a new write: a new id and a new version.
    const third = await api.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: { caseNumber: 'CD-2000', courtLocation: 'Bergen' } } });
    expect(third.status).toBe(201);
    expect(third.json.metadataIds[CASE]).not.toBe(second.json.metadataIds[CASE]);
    expect(third.json.versionId).not.toBe(second.json.versionId);
    const ids = [first.json.metadataIds[CASE], second.json.metadataIds[CASE], third.json.metadataIds[CASE]];
    expect([...ids].sort()).toEqual(ids); // ULIDs: in write order
    // An optional reason is recorded on the version.
    const withReason = await api.writeCanonical(doc.documentId, { [ENTITIES]: { schema: ENTITIES_SCHEMA, data: { people: ['A. Person'], orgs: [] } } }, { reason: 'entity review' });
    expect(withReason.status).toBe(201);
    const versions = (await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions;
    expect(versions.at(-1)).toMatchObject({ versionId: withReason.json.versionId, reason: 'entity review', actor: 'alice' });
  });

  test('invalid data is 422 VALIDATION_FAILED with each issue; nothing is stored', async () => {
    const doc = await docWithCase();
    const check = async (namespaces: Record<string, unknown>, errors: Array<{ path: string; code: string }>) => {
      const r = await api.writeCanonical(doc.documentId, namespaces);
      expectRejected(r, 422, 'VALIDATION_FAILED');
      expect(r.json.error.message.length).toBeGreaterThan(0);
      expect(r.json.error.errors.map((e: any) => ({ path: e.path, code: e.code }))).toEqual(expect.arrayContaining(errors));
      expect(r.json.error.errors).toHaveLength(errors.length);
    };
    await check({ [CASE]: { schema: CASE_SCHEMA, data: { caseNumber: 'bad', courtLocation: 'Oslo' } } }, [{ path: `/namespaces/${CASE}/data/caseNumber`, code: 'pattern' }]);
    await check({ [CASE]: { schema: CASE_SCHEMA, data: { caseNumber: 'AB-1234' } } }, [{ path: `/namespaces/${CASE}/data/courtLocation`, code: 'required' }]);
    await check({ [CASE]: { schema: CASE_SCHEMA, data: { ...caseData(), extra: 1 } } }, [{ path: `/namespaces/${CASE}/data`, code: 'additionalProperties' }]);
    await check({ [CORE]: { schema: CORE_SCHEMA, data: { mimeType: 'x', sizeBytes: -1, ingest: { receivedAt: 'yesterday' } } } }, [
      { path: `/namespaces/${CORE}/data/sizeBytes`, code: 'minimum' },
      { path: `/namespaces/${CORE}/data/ingest/receivedAt`, code: 'format' },
    ]);
    // One invalid namespace refuses the whole bundle.
    await check({
      [CORE]: { schema: CORE_SCHEMA, data: coreData },
      [CASE]: { schema: CASE_SCHEMA, data: { caseNumber: 12, courtLocation: 'Oslo' } },
    }, [{ path: `/namespaces/${CASE}/data/caseNumber`, code: 'type' }]);
    await check({ [CASE]: { schema: 'urn:svc:schema:case@9.9.9', data: caseData() } }, [{ path: `/namespaces/${CASE}/schema`, code: 'schema_not_found' }]);
    await check({ [CASE]: { schema: CORE_SCHEMA, data: coreData } }, [{ path: `/namespaces/${CASE}/schema`, code: 'schema_namespace_mismatch' }]);
    const all = (await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces;
    expect(Object.keys(all)).toEqual([CASE]);
    expect(all[CASE].id).toBe(doc.caseId);
    expect((await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions).toHaveLength(2);
  });

  test('malformed bundles are 400 in the rejected form', async () => {
    const doc = await docWithCase();
    const entry = { schema: CASE_SCHEMA, data: caseData() };
    const bodies: unknown[] = [
      { mode: 'canonical', bundle: { namespaces: { case: entry } } },
      { mode: 'canonical', bundle: { namespaces: { 'urn:other:case': entry } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE_SCHEMA]: entry } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: CASE_SCHEMA, data: 5 } } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: CASE_SCHEMA, data: 'text' } } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: CASE_SCHEMA, data: [caseData()] } } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: CASE_SCHEMA, data: null } } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: CASE_SCHEMA } } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: 'case', data: caseData() } } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: 'urn:svc:schema:case', data: caseData() } } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: { data: caseData() } } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: { ...entry, extra: 1 } } } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: 'entry' } } },
      { mode: 'canonical', bundle: { namespaces: {} } },
      { mode: 'canonical', bundle: { namespaces: [] } },
      { mode: 'canonical', bundle: { [CASE]: entry } },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: entry }, extra: 1 } },
      { mode: 'canonical' },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: entry } }, reason: 5 },
      { mode: 'canonical', bundle: { namespaces: { [CASE]: entry } }, extra: 1 },
      { mode: 'other', bundle: { namespaces: { [CASE]: entry } } },
      { bundle: { namespaces: { [CASE]: entry } } },
      [],
      'canonical',
    ];
    for (const body of bodies) {
      const r = await api.post(`/v1/documents/${doc.documentId}/metadata`, JSON.stringify(body));
      expect(r.status, `${JSON.stringify(body)}: ${r.text}`).toBe(400);
      expectRejected(r, 400, 'invalid_request');
    }
    expect((await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions).toHaveLength(2);
  });

  // Derived writes are otherwise out of scope here (they are being built); only the provenance rule is checked.
  test('a derived write without provenance is rejected (4xx, rejected form), nothing stored', async () => {
    const doc = await docWithCase();
    const r = await api.post(`/v1/documents/${doc.documentId}/metadata`, { mode: 'derived', bundle: { namespaces: { [ENTITIES]: { schema: ENTITIES_SCHEMA, data: { people: ['x'] } } } } });
    expect([400, 422], r.text).toContain(r.status);
    expectRejected(r, r.status, r.json.error.code);
    expect(r.json.error.message).toMatch(/provenance/i);
    expect((await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions).toHaveLength(2);
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces[ENTITIES]).toBeUndefined();
  });

  test('initialMetadata at creation becomes the first version\'s metadata; invalid initialMetadata is refused', async () => {
    const doc = await finalizedDoc(api, { create: { initialMetadata: { namespaces: { [CORE]: { schema: CORE_SCHEMA, data: coreData } } } } });
    const all = (await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces;
    expect(all).toEqual({ [CORE]: { schema: CORE_SCHEMA, id: expect.stringMatching(META_ID), data: coreData, mode: 'canonical' } });
    const bad = await api.post('/v1/documents', { initialMetadata: { namespaces: { [CORE]: { schema: CORE_SCHEMA, data: { mimeType: 1 } } } } });
    expectRejected(bad, 422, 'VALIDATION_FAILED');
    const malformed = await api.post('/v1/documents', { initialMetadata: { namespaces: { core: { schema: CORE_SCHEMA, data: coreData } } } });
    expect(malformed.status).toBe(400);
  });
});

describe('patch', () => {
  const op = (value: string) => [{ op: 'add', path: '/data/note', value }];

  test('200 accepted: a new version and entry id; the patched data reads back; other namespaces keep their ids', async () => {
    const doc = await docWithCase();
    const core = await api.writeCanonical(doc.documentId, { [CORE]: { schema: CORE_SCHEMA, data: coreData } });
    const base = (await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`)).json.entry.id;
    const r = await api.patch(doc.documentId, CASE, {
      baseMetadataId: base,
      patch: [
        { op: 'test', path: '/data/caseNumber', value: 'AB-1001' },
        { op: 'replace', path: '/data/courtLocation', value: 'Trondheim' },
        { op: 'add', path: '/data/tags/-', value: 'appeal' },
        { op: 'add', path: '/data/note', value: 'moved' },
      ],
      reason: 'court moved',
    });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('content-type')).toBe(JSON_TYPE);
    expect(r.json).toEqual({ status: 'accepted', versionId: expect.stringMatching(UUID_V7), newMetadataId: expect.stringMatching(META_ID) });
    expect(r.json.newMetadataId).not.toBe(base);
    const entry = await api.get(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(CASE)}`);
    expect(entry.json).toEqual({
      namespaceUrn: CASE,
      entry: { id: r.json.newMetadataId, schema: CASE_SCHEMA, data: { caseNumber: 'AB-1001', courtLocation: 'Trondheim', tags: ['civil', 'appeal'], note: 'moved' }, mode: 'canonical' },
    });
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CORE}`)).json.entry.id).toBe(core.json.metadataIds[CORE]);
    const versions = (await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions;
    expect(versions.at(-1)).toMatchObject({ versionId: r.json.versionId, parents: [core.json.versionId], labels: ['CURRENT'], reason: 'court moved', actor: 'alice' });
    // The plain (unencoded) namespace in the path works too.
    const plain = await api.post(`/v1/documents/${doc.documentId}/metadata/${CASE}/patch`, { mode: 'canonical', baseMetadataId: r.json.newMetadataId, patch: op('plain'), reason: 'r' });
    expect(plain.status, plain.text).toBe(200);
  });

  test('a stale baseMetadataId is 409 metadata_conflict carrying currentMetadataId', async () => {
    const doc = await docWithCase();
    const first = await api.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: op('one') });
    expect(first.status).toBe(200);
    const stale = await api.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: op('two') });
    expectRejected(stale, 409, 'metadata_conflict', ['currentMetadataId']);
    expect(stale.json.currentMetadataId).toBe(first.json.newMetadataId);
    // A canonical write also moves the entry on.
    const w = await api.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData(5) } });
    const afterWrite = await api.patch(doc.documentId, CASE, { baseMetadataId: first.json.newMetadataId, patch: op('three') });
    expectRejected(afterWrite, 409, 'metadata_conflict', ['currentMetadataId']);
    expect(afterWrite.json.currentMetadataId).toBe(w.json.metadataIds[CASE]);
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`)).json.entry.data).toEqual(caseData(5));
  });

  test('ops on /schema or /id are 400 schema_change_forbidden', async () => {
    const doc = await docWithCase();
    const patches = [
      [{ op: 'replace', path: '/schema', value: 'urn:svc:schema:case@2.0.0' }],
      [{ op: 'remove', path: '/schema' }],
      [{ op: 'add', path: '/schema/x', value: 1 }],
      [{ op: 'replace', path: '/id', value: 'meta_01J00000000000000000000000' }],
      [{ op: 'add', path: '/data/note', value: 'ok' }, { op: 'copy', from: '/schema', path: '/data/note' }],
      [{ op: 'move', from: '/id', path: '/data/note' }],
    ];
    for (const patch of patches) expectRejected(await api.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch }), 400, 'schema_change_forbidden');
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`)).json.entry).toEqual({ id: doc.caseId, schema: CASE_SCHEMA, data: caseData(), mode: 'canonical' });
  });

  test('a result that fails the schema, a failing test op or an op on a missing path is 422; nothing changes', async () => {
    const doc = await docWithCase();
    const invalid = await api.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: [{ op: 'replace', path: '/data/caseNumber', value: 'nope' }, { op: 'remove', path: '/data/courtLocation' }] });
    expectRejected(invalid, 422, 'VALIDATION_FAILED');
    expect(invalid.json.error.errors.map((e: any) => [e.path, e.code]).sort()).toEqual([['/data/caseNumber', 'pattern'], ['/data/courtLocation', 'required']]);
    expectRejected(await api.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: [{ op: 'replace', path: '/data', value: 5 }] }), 422, 'VALIDATION_FAILED');
    const failedTest = await api.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: [{ op: 'test', path: '/data/caseNumber', value: 'ZZ-9999' }, { op: 'add', path: '/data/note', value: 'x' }] });
    expect(failedTest.status).toBe(422);
    expect(failedTest.json.status).toBe('rejected');
    expectRejected(failedTest, 422, failedTest.json.error.code);
    const missing = await api.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: [{ op: 'replace', path: '/data/absent/deeper', value: 'x' }] });
    expect(missing.status).toBe(422);
    expect(missing.json.status).toBe('rejected');
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`)).json.entry).toEqual({ id: doc.caseId, schema: CASE_SCHEMA, data: caseData(), mode: 'canonical' });
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}/patches`)).json.patches).toEqual([]);
  });

  test('bounds: 100 ops pass, 101 are 413 patch_too_large; a body of 64 KiB passes, one byte more is 413', async () => {
    const doc = await docWithCase();
    const hundred = Array.from({ length: 100 }, (_, i) => ({ op: 'add', path: '/data/note', value: `n${i}` }));
    const ok = await api.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: hundred });
    expect(ok.status, ok.text).toBe(200);
    const tooMany = await api.patch(doc.documentId, CASE, { baseMetadataId: ok.json.newMetadataId, patch: [...hundred, { op: 'add', path: '/data/note', value: 'n100' }] });
    expectRejected(tooMany, 413, 'patch_too_large');

    const sized = (base: string, bytes: number) => {
      const body = { mode: 'canonical', baseMetadataId: base, patch: [{ op: 'add', path: '/data/note', value: '' }], reason: 'size' };
      body.patch[0]!.value = 'z'.repeat(bytes - Buffer.byteLength(JSON.stringify(body)));
      const text = JSON.stringify(body);
      expect(Buffer.byteLength(text)).toBe(bytes);
      return text;
    };
    const url = `/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(CASE)}/patch`;
    const atLimit = await api.post(url, sized(ok.json.newMetadataId, 64 * KiB), { 'Content-Type': 'application/json' });
    expect(atLimit.status, atLimit.text).toBe(200);
    expectRejected(await api.post(url, sized(atLimit.json.newMetadataId, 64 * KiB + 1), { 'Content-Type': 'application/json' }), 413, 'patch_too_large');
    expectRejected(await api.post(url, sized(atLimit.json.newMetadataId, 100 * KiB), { 'Content-Type': 'application/json' }), 413, 'patch_too_large');
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`)).json.entry.id).toBe(atLimit.json.newMetadataId);
  });

  test('malformed patch requests are 400 in the rejected form', async () => {
    const doc = await docWithCase();
    const good = { mode: 'canonical', baseMetadataId: doc.caseId, patch: op('x'), reason: 'r' };
    const bodies: unknown[] = [
      { ...good, mode: 'derived' },
      { ...good, mode: undefined },
      { ...good, baseMetadataId: 'x' },
      { ...good, baseMetadataId: undefined },
      { ...good, reason: undefined },
      { ...good, reason: '' },
      { ...good, reason: 3 },
      { ...good, patch: [] },
      { ...good, patch: { op: 'add', path: '/data/note', value: 'x' } },
      { ...good, patch: [{ op: 'jump', path: '/data/note' }] },
      { ...good, patch: [{ op: 'replace', path: 'data/note', value: 'x' }] },
      { ...good, patch: [{ op: 'replace', path: '/data/note' }] },
      { ...good, patch: [{ op: 'replace', path: '/note', value: 'x' }] },
      { ...good, patch: [{ op: 'add', path: '/other', value: 'x' }] },
      { ...good, extra: 1 },
      [],
    ];
    for (const body of bodies) {
      const r = await api.post(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(CASE)}/patch`, JSON.stringify(body));
      expect(r.status, `${JSON.stringify(body)}: ${r.text}`).toBe(400);
      expectRejected(r, 400, 'invalid_request');
    }
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`)).json.entry.id).toBe(doc.caseId);
  });

  test('meta.patch:<ns> is required (exact or wildcard); a namespace absent from the document is 404', async () => {
    const doc = await docWithCase();
    for (const scope of ['meta.write:*', `meta.patch:${CORE}`, 'meta.patch:urn:svc:cas', 'doc.read doc.write meta.read']) {
      const r = await (await as({ scope })).patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: op('x') });
      expect(r.status, `${scope}: ${r.text}`).toBe(403);
      expect(errorCode(r)).toBe('forbidden');
      expectNoLeak(r.text);
    }
    const exact = await (await as({ scope: `meta.patch:${CASE}` })).patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: op('exact') });
    expect(exact.status, exact.text).toBe(200);
    const wild = await (await as({ scope: 'meta.patch:urn:svc:*' })).patch(doc.documentId, CASE, { baseMetadataId: exact.json.newMetadataId, patch: op('wild') });
    expect(wild.status, wild.text).toBe(200);
    expectRejected(await api.patch(doc.documentId, ENTITIES, { baseMetadataId: doc.caseId, patch: [{ op: 'add', path: '/data/people', value: [] }] }), 404, 'metadata_not_found');
  });

  test('the audit record lists every accepted patch in order: ops, base and new ids, version, actor, reason', async () => {
    const doc = await docWithCase();
    const bob = await as({ sub: 'bob' });
    const p1 = await api.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: op('first'), reason: 'first reason' });
    const rejected = await api.patch(doc.documentId, CASE, { baseMetadataId: p1.json.newMetadataId, patch: [{ op: 'replace', path: '/data/caseNumber', value: 'bad' }] });
    expect(rejected.status).toBe(422);
    const p2 = await bob.patch(doc.documentId, CASE, { baseMetadataId: p1.json.newMetadataId, patch: [{ op: 'add', path: '/data/tags/0', value: 'urgent' }, { op: 'remove', path: '/data/note' }], reason: 'second reason' });
    expect(p2.status, p2.text).toBe(200);
    const stale = await api.patch(doc.documentId, CASE, { baseMetadataId: p1.json.newMetadataId, patch: op('stale') });
    expect(stale.status).toBe(409);
    const audit = await api.get(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(CASE)}/patches`);
    expect(audit.status).toBe(200);
    expect(audit.headers.get('content-type')).toBe(JSON_TYPE);
    expect(audit.json).toEqual({
      namespaceUrn: CASE,
      patches: [
        { newMetadataId: p1.json.newMetadataId, baseMetadataId: doc.caseId, namespaceUrn: CASE, versionId: p1.json.versionId, patch: op('first'), actor: 'alice', reason: 'first reason', at: expect.stringMatching(ISO_UTC) },
        {
          newMetadataId: p2.json.newMetadataId, baseMetadataId: p1.json.newMetadataId, namespaceUrn: CASE, versionId: p2.json.versionId,
          patch: [{ op: 'add', path: '/data/tags/0', value: 'urgent' }, { op: 'remove', path: '/data/note' }], actor: 'bob', reason: 'second reason', at: expect.stringMatching(ISO_UTC),
        },
      ],
    });
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`)).json.entry.data).toEqual({ ...caseData(), tags: ['urgent', 'civil'] });
    // A namespace never patched has an empty record.
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${CORE}/patches`)).json).toEqual({ namespaceUrn: CORE, patches: [] });
  });

  test('concurrent patches on the same baseMetadataId: exactly one 200, the rest 409 with the winner\'s id', async () => {
    const doc = await docWithCase();
    const clients = await Promise.all(Array.from({ length: 10 }, (_, i) => as({ sub: `racer-${i}` })));
    const results = await Promise.all(clients.map((c, i) => c.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: op(`racer ${i}`), reason: `race ${i}` })));
    const winners = results.filter((r) => r.status === 200);
    const losers = results.filter((r) => r.status !== 200);
    expect(winners, results.map((r) => `${r.status} ${r.text}`).join('\n')).toHaveLength(1);
    const winnerId = winners[0]!.json.newMetadataId;
    for (const r of losers) {
      expectRejected(r, 409, 'metadata_conflict', ['currentMetadataId']);
      expect(r.json.currentMetadataId).toBe(winnerId);
    }
    const audit = (await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}/patches`)).json.patches;
    expect(audit).toHaveLength(1);
    expect(audit[0].newMetadataId).toBe(winnerId);
    const entry = (await api.get(`/v1/documents/${doc.documentId}/metadata/${CASE}`)).json.entry;
    expect(entry.id).toBe(winnerId);
    expect(entry.data.note).toBe(`racer ${results.indexOf(winners[0]!)}`);
    expect((await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions).toHaveLength(3);
  });
});

describe('permission rules', () => {
  test('allow for role:clerk on doc.read; deny wins over allow; rules apply to every action', async () => {
    const rules = [
      { effect: 'allow', actions: ['doc.write', 'doc.read', 'meta.read', 'meta.write', 'meta.patch'], principals: ['user:alice'] },
      { effect: 'allow', actions: ['doc.read'], principals: ['role:clerk'] },
      { effect: 'deny', actions: ['doc.read'], principals: ['user:mallory'] },
    ];
    const doc = await finalizedDoc(api, { create: { initialPermissions: { rules } } });
    const clerk = await as({ sub: 'bob', roles: ['clerk'] });
    const nobody = await as({ sub: 'carol' });
    const mallory = await as({ sub: 'mallory', roles: ['clerk'] });
    const otherRole = await as({ sub: 'dan', roles: ['judge'] });
    for (const p of ['', '/versions', '/content']) {
      expect((await api.get(`/v1/documents/${doc.documentId}${p}`)).status).toBe(200);
      expect((await clerk.get(`/v1/documents/${doc.documentId}${p}`)).status).toBe(200);
      expectError(await nobody.get(`/v1/documents/${doc.documentId}${p}`), 403, 'forbidden');
      expectError(await mallory.get(`/v1/documents/${doc.documentId}${p}`), 403, 'forbidden');
      expectError(await otherRole.get(`/v1/documents/${doc.documentId}${p}`), 403, 'forbidden');
    }
    // The rule grants doc.read only: metadata is not readable or writable by the clerk.
    expectError(await clerk.get(`/v1/documents/${doc.documentId}/metadata`), 403, 'forbidden');
    const w = await clerk.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData() } });
    expect(w.status).toBe(403);
    expect(errorCode(w)).toBe('forbidden');
    const aw = await api.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData() } });
    expect(aw.status).toBe(201);
    const cp = await clerk.patch(doc.documentId, CASE, { baseMetadataId: aw.json.metadataIds[CASE], patch: [{ op: 'add', path: '/data/note', value: 'x' }] });
    expect(cp.status).toBe(403);
    expect(errorCode(cp)).toBe('forbidden');
    // A rule does not replace the token's capability.
    expectError(await (await as({ sub: 'bob', roles: ['clerk'], scope: 'meta.read' })).get(`/v1/documents/${doc.documentId}`), 403, 'forbidden');
    // Roles do not cross tenants.
    expectError(await (await as({ org_id: 'globex', sub: 'bob', roles: ['clerk'] })).get(`/v1/documents/${doc.documentId}`), 404, 'document_not_found');
    // Create-or-resume of a ruled document needs doc.write on it.
    expectError(await nobody.post('/v1/documents', { documentId: doc.documentId }), 403, 'forbidden');
    const resumed = await api.post('/v1/documents', { documentId: doc.documentId });
    expect(resumed.status).toBe(200);
    expect(resumed.json.uploadId).toBe(doc.uploadId);
  });

  test('deny wins over allow for the same principal; the creator needs an allow too', async () => {
    const rules = [
      { effect: 'allow', actions: ['doc.write', 'doc.read'], principals: ['user:alice'] },
      { effect: 'allow', actions: ['doc.read'], principals: ['role:clerk'] },
      { effect: 'deny', actions: ['doc.read'], principals: ['role:clerk'] },
    ];
    const doc = await finalizedDoc(api, { create: { initialPermissions: { rules } } });
    expectError(await (await as({ sub: 'bob', roles: ['clerk'] })).get(`/v1/documents/${doc.documentId}`), 403, 'forbidden');
    expectError(await (await as({ sub: 'alice', roles: ['clerk'] })).get(`/v1/documents/${doc.documentId}`), 403, 'forbidden');
    expect((await api.get(`/v1/documents/${doc.documentId}`)).status).toBe(200);
    // Rules without an allow of doc.write for the creator: its own upload is refused.
    const locked = await api.post('/v1/documents', { initialPermissions: { rules: [{ effect: 'allow', actions: ['doc.read'], principals: ['org:*'] }] } });
    expect(locked.status).toBe(201);
    expectError(await api.putBytes(locked.json.uploadId, Buffer.from('x')), 403, 'forbidden');
    expectError(await api.post(`/v1/uploads/${locked.json.uploadId}/finalize`, {}), 403, 'forbidden');
  });

  test('user:<sub> and org:* principals', async () => {
    const userDoc = await finalizedDoc(api, { create: { initialPermissions: { rules: [{ effect: 'allow', actions: ['doc.write', 'doc.read'], principals: ['user:alice', 'user:erin'] }] } } });
    expect((await (await as({ sub: 'erin' })).get(`/v1/documents/${userDoc.documentId}`)).status).toBe(200);
    expectError(await (await as({ sub: 'frank' })).get(`/v1/documents/${userDoc.documentId}`), 403, 'forbidden');
    expectError(await (await as({ sub: 'user:erin' })).get(`/v1/documents/${userDoc.documentId}`), 403, 'forbidden');
    expectError(await (await as({ sub: 'frank', roles: ['erin', 'user:erin'] })).get(`/v1/documents/${userDoc.documentId}`), 403, 'forbidden');

    const orgDoc = await finalizedDoc(api, {
      create: {
        initialPermissions: {
          rules: [
            { effect: 'allow', actions: ['doc.write'], principals: ['user:alice'] },
            { effect: 'allow', actions: ['doc.read'], principals: ['org:*'] },
            { effect: 'deny', actions: ['doc.read'], principals: ['role:suspended'] },
          ],
        },
      },
    });
    expect((await (await as({ sub: 'frank' })).get(`/v1/documents/${orgDoc.documentId}`)).status).toBe(200);
    expect((await (await as({ sub: 'gina', roles: ['judge'] })).get(`/v1/documents/${orgDoc.documentId}/content`)).status).toBe(200);
    expectError(await (await as({ sub: 'hal', roles: ['suspended'] })).get(`/v1/documents/${orgDoc.documentId}`), 403, 'forbidden');
    expectError(await (await as({ org_id: 'globex', sub: 'frank' })).get(`/v1/documents/${orgDoc.documentId}`), 404, 'document_not_found');
  });

  test('a document without rules is open to every holder of the capability in its tenant', async () => {
    const doc = await docWithCase();
    const other = await as({ sub: 'ivan' });
    expect((await other.get(`/v1/documents/${doc.documentId}`)).status).toBe(200);
    expect((await other.get(`/v1/documents/${doc.documentId}/metadata`)).status).toBe(200);
    const w = await other.writeCanonical(doc.documentId, { [CORE]: { schema: CORE_SCHEMA, data: coreData } });
    expect(w.status).toBe(201);
    const p = await other.patch(doc.documentId, CASE, { baseMetadataId: doc.caseId, patch: [{ op: 'add', path: '/data/note', value: 'by ivan' }] });
    expect(p.status).toBe(200);
    expect((await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions.at(-1).actor).toBe('ivan');
  });
});

describe('immutability of versions', () => {
  test('later writes never change an earlier version\'s record, contentRef or metadata ids', async () => {
    const doc = await finalizedDoc(api, { finalize: { labels: ['original'], reason: 'ingest' } });
    const snapshot = async () => (await api.get(`/v1/documents/${doc.documentId}/versions`)).json.versions as any[];
    const strip = (v: any) => ({ ...v, labels: undefined });
    const history: any[][] = [await snapshot()];
    const w1 = await api.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData() }, [CORE]: { schema: CORE_SCHEMA, data: coreData } });
    history.push(await snapshot());
    const w2 = await api.writeCanonical(doc.documentId, { [CASE]: { schema: CASE_SCHEMA, data: caseData(2) } });
    history.push(await snapshot());
    const p = await api.patch(doc.documentId, CASE, { baseMetadataId: w2.json.metadataIds[CASE], patch: [{ op: 'add', path: '/data/note', value: 'patched' }] });
    expect(p.status).toBe(200);
    history.push(await snapshot());
    const final = history.at(-1)!;
    expect(final).toHaveLength(4);
    for (const earlier of history) {
      earlier.forEach((v, i) => expect(strip(final[i])).toEqual(strip(v)));
    }
    // Every version points at the one content the upload produced.
    for (const v of final) expect(v.contentRef).toEqual(doc.contentRef);
    expect(final[0].labels).toEqual(['original']);
    expect(final.map((v) => v.versionId)).toEqual([doc.versionId, w1.json.versionId, w2.json.versionId, p.json.versionId]);
    // Metadata ids: each write minted its own; the untouched namespace kept its id; old ids are not patchable.
    const ids = [w1.json.metadataIds[CASE], w2.json.metadataIds[CASE], p.json.newMetadataId];
    expect(new Set(ids).size).toBe(3);
    const now = (await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces;
    expect(now[CASE].id).toBe(p.json.newMetadataId);
    expect(now[CORE].id).toBe(w1.json.metadataIds[CORE]);
    for (const old of ids.slice(0, 2)) {
      const r = await api.patch(doc.documentId, CASE, { baseMetadataId: old, patch: [{ op: 'add', path: '/data/note', value: 'rewrite history' }] });
      expectRejected(r, 409, 'metadata_conflict', ['currentMetadataId']);
    }
    // The content itself still reads back with the finalize key.
    const content = await fetch(`${server.url}/v1/documents/${doc.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
    expect(content.headers.get('etag')).toBe(`"${doc.contentRef.key}"`);
    expect(`b3:${await blake3(Buffer.from(await content.arrayBuffer()))}`).toBe(doc.contentRef.key);
  });
});

describe('content behind other surfaces', () => {
  test('a finalized version\'s content cannot be removed through the blob API', async () => {
    const bytes = Buffer.from(`protected ${randomUUID()}`);
    const doc = await finalizedDoc(api, { bytes });
    const { createHash } = await import('node:crypto');
    const blobId = `sha-256:${createHash('sha256').update(bytes).digest('hex')}:${bytes.length}`;
    await fetch(`${server.url}/api/v1/blobs/${blobId}`, { method: 'DELETE' });
    const r = await api.get(`/v1/documents/${doc.documentId}/content`);
    expect(r.status, r.text).toBe(200);
    expect(r.text).toBe(bytes.toString());
  });
});

describe('error bodies of metadata writes', () => {
  test('every refusal of a metadata write or patch uses { status: "rejected", error: { code, message } }', async () => {
    const doc = await docWithCase();
    const unknown = randomUUID();
    const writeUrl = (id: string) => `/v1/documents/${id}/metadata`;
    const patchUrl = (id: string) => `/v1/documents/${id}/metadata/${encodeURIComponent(CASE)}/patch`;
    const write = { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: CASE_SCHEMA, data: caseData(3) } } } };
    const patch = { mode: 'canonical', baseMetadataId: doc.caseId, patch: [{ op: 'add', path: '/data/note', value: 'x' }], reason: 'r' };
    const noCaps = await as({ scope: 'doc.read meta.read' });
    expectRejected(await noCaps.post(writeUrl(doc.documentId), write), 403, 'forbidden');
    expectRejected(await noCaps.post(patchUrl(doc.documentId), patch), 403, 'forbidden');
    expectRejected(await api.post(writeUrl(unknown), write), 404, 'document_not_found');
    expectRejected(await api.post(patchUrl(unknown), patch), 404, 'document_not_found');
    expectRejected(await api.post(writeUrl(doc.documentId), '{"mode":'), 400, 'invalid_json');
    expectRejected(await api.post(patchUrl(doc.documentId), '{"mode":'), 400, 'invalid_json');
    expectRejected(await api.post(writeUrl(doc.documentId), { ...write, reason: 'x'.repeat(MAX_JSON) }), 413, 'payload_too_large');
  });
});
