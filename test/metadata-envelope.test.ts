// Metadata envelope v1.1 over HTTP (decisions, "Metadata envelope v1.1"): X-Request-Id, the
// v1.1 form with status, pinned schema and receipt, derived entries that wait for their schema,
// the status filter, bad reading parameters, and the schema lifecycle. On fs and pg-s3.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TEST_BACKEND } from './helpers/backends.js';
import { Api, ISO_UTC, JSON_TYPE, META_ID, devToken, expectError, expectRejected } from './helpers/docs-client.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const SECRET = 'metadata-envelope-test-secret-0123456789';
const CASE = 'urn:svc:case';
const CASE_1 = 'urn:svc:schema:case@1.0.0';
const NOTES = 'urn:svc:notes';
const NOTES_1 = 'urn:svc:schema:notes@1.0.0';
const V11 = 'application/vnd.svc.metadata+json; version=1.1';
const ACCEPT_V11 = { Accept: 'application/vnd.svc.metadata+json;version=1.1' };
const provenance = { producer: { name: 'notes-bot', version: '2' }, producedAt: '2026-11-27T10:00:00Z', input: { kind: 'blob', key: 'b3:00' } };

const schema = (schemaUrn: string, namespaceUrn: string, lifecycle: string, properties: Record<string, unknown>, required: string[]) => ({
  schemaUrn, namespaceUrn, lifecycle, jsonSchema: { type: 'object', required, additionalProperties: false, properties },
});
const caseSchema = (version: string, lifecycle = 'published') => schema(`urn:svc:schema:case@${version}`, CASE, lifecycle, { caseNumber: { type: 'string' }, court: { type: 'string' } }, ['caseNumber']);

describe('metadata envelope v1.1', () => {
  let server: TestServer;
  let api: Api;
  let admin: Api;

  beforeAll(async () => {
    server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_LOG_LEVEL: 'debug', SVC_DURABILITY: 'relaxed' });
    admin = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice' }));
    // Everything but schema.write: the lifecycle rules for drafts.
    api = admin.as(await devToken(server.url, { org_id: 'acme', sub: 'bob', scope: 'doc.create doc.read doc.write meta.read meta.write:* meta.patch:* migration.write job.read' }));
    expect((await admin.post('/v1/schemas', caseSchema('1.0.0'))).status).toBe(201);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test('X-Request-Id: the request\'s when valid, minted otherwise, on every /v1 and /api answer and in its log lines', async () => {
    const sent = await api.get('/v1/documents', { 'X-Request-Id': 'trace-42/abc:DEF' });
    expect(sent.status).toBe(200);
    expect(sent.headers.get('x-request-id')).toBe('trace-42/abc:DEF');
    const max = 'r'.repeat(128);
    expect((await api.get('/v1/documents', { 'X-Request-Id': max })).headers.get('x-request-id')).toBe(max);
    const minted = new Set<string>();
    for (const bad of ['r'.repeat(129), 'has space', 'tab\there', undefined]) {
      const r = await api.get('/v1/documents', bad === undefined ? {} : { 'X-Request-Id': bad });
      const id = r.headers.get('x-request-id')!;
      expect(id).toMatch(/^[\x21-\x7e]{1,128}$/);
      expect(id).not.toBe(bad);
      minted.add(id);
    }
    expect(minted.size).toBe(4);
    // Errors, the blob API, the operator routes, unknown routes.
    const missing = await api.get('/v1/documents/0190a0a0-0000-7000-8000-000000000000', { 'X-Request-Id': 'err-1' });
    expectError(missing, 404, 'document_not_found');
    expect(missing.headers.get('x-request-id')).toBe('err-1');
    for (const p of ['/api/v1/health', '/api/v1/blobs/nope', '/v1/nothing-here', '/api/v1/nothing-here']) {
      const r = await fetch(server.url + p, { headers: { 'X-Request-Id': `p-${p.length}` } });
      await r.arrayBuffer();
      expect(r.headers.get('x-request-id'), p).toBe(`p-${p.length}`);
    }
    const head = await fetch(`${server.url}/api/v1/health`, { method: 'HEAD', headers: { 'X-Request-Id': 'head-1' } });
    expect(head.headers.get('x-request-id')).toBe('head-1');
    expect(await head.text()).toBe('');
    // Each answer's log line names its request.
    await expect.poll(() => server.stderr().split('\n').filter((l) => l.includes('"requestId":"err-1"')).length, { timeout: 5000 }).toBe(1);
    const line = JSON.parse(server.stderr().split('\n').find((l) => l.includes('"requestId":"err-1"'))!);
    expect(line).toMatchObject({ level: 'debug', msg: 'answer', requestId: 'err-1', method: 'GET', status: 404 });
  });

  test('v1.1 by Accept or envelope=1.1: status, schema {$id}, receipt; v1 stays the default and unchanged', async () => {
    const before = Date.now();
    const doc = await api.newDocument(new TextEncoder().encode('v1.1 doc'));
    const w = await api.post(`/v1/documents/${doc.documentId}/metadata`, { mode: 'canonical', bundle: { namespaces: { [CASE]: { schema: { $id: CASE_1 }, data: { caseNumber: 'C-1' } } } } }, { 'X-Request-Id': 'write-1' });
    expect(w.status, w.text).toBe(201);
    const entryId = w.json.metadataIds[CASE];
    expect(entryId).toMatch(META_ID);

    const v1 = await api.get(`/v1/documents/${doc.documentId}/metadata`);
    expect(v1.status).toBe(200);
    expect(v1.headers.get('content-type')).toBe(JSON_TYPE);
    expect(v1.headers.get('vary')).toBe('Accept');
    expect(v1.json).toEqual({ namespaces: { [CASE]: { schema: CASE_1, id: entryId, data: { caseNumber: 'C-1' }, mode: 'canonical' } } });

    const expected = {
      envelope: '1.1',
      namespaces: {
        [CASE]: {
          id: entryId, mode: 'canonical', status: 'valid', schema: { $id: CASE_1 }, data: { caseNumber: 'C-1' },
          receipt: { receivedAt: expect.stringMatching(ISO_UTC), recordedAt: expect.stringMatching(ISO_UTC), principal: { sub: 'bob', org: 'acme' }, requestId: 'write-1' },
        },
      },
    };
    for (const r of [await api.get(`/v1/documents/${doc.documentId}/metadata`, ACCEPT_V11), await api.get(`/v1/documents/${doc.documentId}/metadata?envelope=1.1`)]) {
      expect(r.status, r.text).toBe(200);
      expect(r.headers.get('content-type')).toBe(V11);
      expect(r.json).toEqual(expected);
      const { receivedAt, recordedAt } = r.json.namespaces[CASE].receipt;
      expect(Date.parse(receivedAt)).toBeGreaterThanOrEqual(before - 1);
      expect(Date.parse(recordedAt)).toBeGreaterThanOrEqual(Date.parse(receivedAt));
      expect(Date.parse(recordedAt)).toBeLessThanOrEqual(Date.now());
    }
    // Accept among others, with weights; version=1 is v1.
    const listed = await api.get(`/v1/documents/${doc.documentId}/metadata`, { Accept: 'text/html, application/vnd.svc.metadata+json; version="1.1"; q=0.9, */*;q=0.1' });
    expect(listed.headers.get('content-type')).toBe(V11);
    const asV1 = await api.get(`/v1/documents/${doc.documentId}/metadata`, { Accept: 'application/vnd.svc.metadata+json;version=1' });
    expect(asV1.json).toEqual(v1.json);

    const one = await api.get(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(CASE)}?envelope=1.1`);
    expect(one.status).toBe(200);
    expect(one.headers.get('content-type')).toBe(V11);
    expect(one.json).toEqual({ envelope: '1.1', namespaceUrn: CASE, entry: expected.namespaces[CASE] });
    const oneV1 = await api.get(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(CASE)}`);
    expect(oneV1.json).toEqual({ namespaceUrn: CASE, entry: v1.json.namespaces[CASE] });

    // A patch makes a new entry with its own receipt; the entries carried into a version keep theirs.
    const p = await api.patch(doc.documentId, CASE, { baseMetadataId: entryId, patch: [{ op: 'add', path: '/data/court', value: 'Oslo' }] });
    expect(p.status, p.text).toBe(200);
    const afterPatch = await api.get(`/v1/documents/${doc.documentId}/metadata?envelope=1.1`);
    expect(afterPatch.json.namespaces[CASE]).toMatchObject({ id: p.json.newMetadataId, data: { caseNumber: 'C-1', court: 'Oslo' }, receipt: { principal: { sub: 'bob', org: 'acme' } } });
    expect(afterPatch.json.namespaces[CASE].receipt.requestId).not.toBe('write-1');
    expect(afterPatch.json.namespaces[CASE].receipt.requestId).toBe(p.headers.get('x-request-id'));
  });

  test('derived entries: unverified until their schema is registered, then re-checked by a job; status= widens the answer', async () => {
    const doc = await api.newDocument(new TextEncoder().encode('derived doc'));
    const other = await api.newDocument(new TextEncoder().encode('derived doc 2'));
    // The provenance names the document's content (anything else is 422 provenance_input_unknown).
    const provenanceOf = (d: { contentRef: { key: string } }) => ({ ...provenance, input: { kind: 'blob', key: d.contentRef.key } });
    const write = async (d: { documentId: string; contentRef: { key: string } }, data: Record<string, unknown>) => {
      const documentId = d.documentId;
      const r = await api.post(`/v1/documents/${documentId}/metadata`, { mode: 'derived', bundle: { namespaces: { [NOTES]: { schema: NOTES_1, data } } }, provenance: provenanceOf(d) }, { 'X-Request-Id': `derived-${documentId}` });
      expect(r.status, r.text).toBe(202);
      const job = await api.settled(r.json.jobId);
      expect(job.json).toMatchObject({ state: 'completed', outputs: { derivedNamespaces: [NOTES], quarantinedNamespaces: [] } });
    };
    await write(doc, { text: 'fine' });
    await write(other, { text: 42 });

    const metadata = (id: string, query = '') => api.get(`/v1/documents/${id}/metadata${query}`);
    expect((await metadata(doc.documentId)).json).toEqual({ namespaces: {} });
    expect((await metadata(doc.documentId, '?includeQuarantined=true')).json).toEqual({ namespaces: {}, quarantined: {} });
    const unverified = await metadata(doc.documentId, '?envelope=1.1&status=unverified');
    expect(unverified.json.namespaces[NOTES]).toEqual({
      id: expect.stringMatching(META_ID), mode: 'derived', status: 'unverified', schema: { $id: NOTES_1 }, data: { text: 'fine' }, provenance: provenanceOf(doc),
      receipt: { receivedAt: expect.stringMatching(ISO_UTC), recordedAt: expect.stringMatching(ISO_UTC), principal: { sub: 'bob', org: 'acme' }, requestId: `derived-${doc.documentId}` },
    });
    expectError(await api.get(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(NOTES)}`), 404, 'metadata_not_found');
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(NOTES)}?status=valid,unverified`)).json.entry.status).toBe('unverified');

    // Registering the schema re-checks both: one valid, one quarantined.
    expect((await admin.post('/v1/schemas', schema(NOTES_1, NOTES, 'published', { text: { type: 'string' } }, ['text']))).status).toBe(201);
    await expect.poll(async () => (await metadata(doc.documentId)).json.namespaces[NOTES]?.status, { timeout: 20_000 }).toBe('valid');
    await expect.poll(async () => (await metadata(other.documentId, '?status=quarantined')).json.namespaces[NOTES]?.status, { timeout: 20_000 }).toBe('quarantined');
    expect((await metadata(doc.documentId, '?status=unverified')).json).toEqual({ namespaces: {} });
    const valid = await metadata(doc.documentId, '?envelope=1.1');
    expect(valid.json.namespaces[NOTES]).toMatchObject({ status: 'valid', data: { text: 'fine' }, receipt: { requestId: `derived-${doc.documentId}` } });
    const quarantined = await metadata(other.documentId, '?includeQuarantined=true');
    expect(quarantined.json.namespaces[NOTES]).toMatchObject({ mode: 'derived', status: 'quarantined', issues: [expect.objectContaining({ path: '/text' })] });
    expect(quarantined.json.quarantined[NOTES]).toEqual(quarantined.json.namespaces[NOTES]);
    expect((await metadata(other.documentId)).json).toEqual({ namespaces: {} });
    // Written after registration: checked at once.
    await write(other, { text: 'now fine' });
    expect((await metadata(other.documentId)).json.namespaces[NOTES]).toMatchObject({ status: 'valid', data: { text: 'now fine' } });
    const all = await metadata(other.documentId, '?status=valid,quarantined,unverified&envelope=1.1');
    expect(all.json.namespaces[NOTES].status).toBe('valid');
    expect((await metadata(other.documentId, '?status=quarantined&envelope=1.1')).json.namespaces[NOTES]).toMatchObject({ status: 'quarantined', data: { text: 42 } });
  });

  test('bad reading parameters: 400 for malformed Accept, envelope, status and unknown parameters; 406 for a version not served', async () => {
    const doc = await api.newDocument(new TextEncoder().encode('params doc'));
    const base = `/v1/documents/${doc.documentId}/metadata`;
    for (const [query, headers] of [
      ['?envelope=2', {}],
      ['?envelope=', {}],
      ['?status=', {}],
      ['?status=valid,bogus', {}],
      ['?status=valid&includeQuarantined=true', {}],
      ['?includeQuarantined=yes', {}],
      ['?statuses=valid', {}],
      ['?envelope=1', ACCEPT_V11],
      ['', { Accept: 'application/vnd.svc.metadata+json;version' }],
      ['', { Accept: 'not a media type' }],
      ['', { Accept: 'application/vnd.svc.metadata+json;q=2' }],
    ] as Array<[string, Record<string, string>]>) {
      for (const p of [base, `${base}/${encodeURIComponent(CASE)}`]) expectError(await api.get(p + query, headers), 400, 'invalid_request');
    }
    expectError(await api.get(base, { Accept: 'application/vnd.svc.metadata+json;version=2' }), 406, 'not_acceptable');
    // Another acceptable range beside it: v1.
    const fallback = await api.get(base, { Accept: 'application/vnd.svc.metadata+json;version=2, application/json' });
    expect(fallback.status).toBe(200);
    expect(fallback.json).toEqual({ namespaces: {} });
    // A schema that is neither a URN nor { $id } is refused in the rejected form.
    for (const bad of [{ id: CASE_1 }, { $id: CASE_1, extra: 1 }, { $id: 'nope' }, 7]) {
      expectRejected(await api.writeCanonical(doc.documentId, { [CASE]: { schema: bad, data: { caseNumber: 'x' } } }), 400, 'invalid_request');
    }
  });

  test('schema lifecycle: forward only; drafts need schema.write; deprecated writes are flagged; retired ones refused; reads unchanged', async () => {
    const doc = await api.newDocument(new TextEncoder().encode('lifecycle doc'));
    const draft = caseSchema('3.0.0', 'draft');
    expect((await admin.post('/v1/schemas', draft)).json.lifecycle).toBe('draft');
    const urn = encodeURIComponent(draft.schemaUrn);
    const entry = { [CASE]: { schema: draft.schemaUrn, data: { caseNumber: 'L-1' } } };

    // Draft: schema.write needed besides meta.write.
    expectRejected(await api.writeCanonical(doc.documentId, entry), 403, 'forbidden');
    const byAdmin = await admin.writeCanonical(doc.documentId, entry);
    expect(byAdmin.status, byAdmin.text).toBe(201);
    expect(byAdmin.headers.get('deprecation')).toBeNull();

    // PATCH: schema.write; forward only; the same again changes nothing.
    expectError(await api.call('PATCH', `/v1/schemas/${urn}`, { lifecycle: 'published' }), 403, 'forbidden');
    expectError(await admin.call('PATCH', `/v1/schemas/${urn}`, { lifecycle: 'final' }), 400, 'invalid_request');
    expectError(await admin.call('PATCH', `/v1/schemas/${urn}`, { lifecycle: 'published', note: 1 }), 400, 'invalid_request');
    expectError(await admin.call('PATCH', `/v1/schemas/${encodeURIComponent('urn:svc:schema:none@1.0.0')}`, { lifecycle: 'published' }), 404, 'schema_not_found');
    const published = await admin.call('PATCH', `/v1/schemas/${urn}`, { lifecycle: 'published' });
    expect(published.status, published.text).toBe(200);
    expect(published.json).toMatchObject({ schemaUrn: draft.schemaUrn, lifecycle: 'published', jsonSchema: draft.jsonSchema });
    expect((await api.writeCanonical(doc.documentId, entry)).status).toBe(201);
    expect((await admin.call('PATCH', `/v1/schemas/${urn}`, { lifecycle: 'published' })).status).toBe(200);

    const deprecated = await admin.call('PATCH', `/v1/schemas/${urn}`, { lifecycle: 'deprecated' });
    expect(deprecated.json).toMatchObject({ lifecycle: 'deprecated', deprecatedAt: expect.stringMatching(ISO_UTC) });
    expectError(await admin.call('PATCH', `/v1/schemas/${urn}`, { lifecycle: 'published' }), 409, 'lifecycle_backwards');
    const flagged = await api.writeCanonical(doc.documentId, entry);
    expect(flagged.status).toBe(201);
    const since = Math.floor(Date.parse(deprecated.json.deprecatedAt) / 1000);
    expect(flagged.headers.get('deprecation')).toBe(`@${since}`);
    expect(flagged.headers.get('link')).toBe(`</v1/schemas/${urn}>; rel="deprecation"; title="${draft.schemaUrn}"`);
    const current = await api.get(`/v1/documents/${doc.documentId}/metadata`);
    const patched = await api.patch(doc.documentId, CASE, { baseMetadataId: current.json.namespaces[CASE].id, patch: [{ op: 'add', path: '/data/court', value: 'Bergen' }] });
    expect(patched.status).toBe(200);
    expect(patched.headers.get('deprecation')).toBe(`@${since}`);
    const listed = await api.get(`/v1/schemas?namespaceUrn=${encodeURIComponent(CASE)}`);
    expect(listed.json.schemas.map((s: { schemaUrn: string; lifecycle: string }) => [s.schemaUrn, s.lifecycle])).toEqual([[CASE_1, 'published'], [draft.schemaUrn, 'deprecated']]);

    expect((await admin.call('PATCH', `/v1/schemas/${urn}`, { lifecycle: 'retired' })).json.lifecycle).toBe('retired');
    expectError(await admin.call('PATCH', `/v1/schemas/${urn}`, { lifecycle: 'deprecated' }), 409, 'lifecycle_backwards');
    expectRejected(await api.writeCanonical(doc.documentId, entry), 422, 'schema_retired');
    const latest = await api.get(`/v1/documents/${doc.documentId}/metadata`);
    expectRejected(await api.patch(doc.documentId, CASE, { baseMetadataId: latest.json.namespaces[CASE].id, patch: [{ op: 'add', path: '/data/court', value: 'Tromsø' }] }), 422, 'schema_retired');
    expectRejected(await api.post(`/v1/documents/${doc.documentId}/metadata`, { mode: 'derived', bundle: { namespaces: { [CASE]: { schema: draft.schemaUrn, data: { caseNumber: 'x' } } } }, provenance }), 422, 'schema_retired');
    const created = await api.post('/v1/documents', { initialMetadata: { namespaces: entry } });
    expectError(created, 422, 'schema_retired');
    // Reads never change.
    expect(latest.json.namespaces[CASE]).toMatchObject({ schema: draft.schemaUrn, data: { caseNumber: 'L-1', court: 'Bergen' } });
    expect((await api.get(`/v1/schemas/${urn}`)).json.lifecycle).toBe('retired');
  });
});

describe.runIf(TEST_BACKEND === 'fs')('entries stored before v1.1', () => {
  const root = tempRoot();
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  test('a one-time re-check at the first start gives them their status, and a receipt of what is known', async () => {
    let server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'strict' }, root);
    let api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice' }));
    expect((await api.post('/v1/schemas', caseSchema('1.0.0'))).status).toBe(201);
    expect((await api.post('/v1/schemas', schema(NOTES_1, NOTES, 'published', { text: { type: 'string' } }, ['text']))).status).toBe(201);
    const doc = await api.newDocument(new TextEncoder().encode('old doc'));
    await server.stop();

    // What an older version stored: entries without receipts, a "valid" one that does not validate,
    // one quarantined for want of a schema that is still missing, and no re-check milestone.
    const { CatalogEnv, LmdbUnitStore, table } = await import('../dist/engine/store/index.js');
    const env = CatalogEnv.open(path.join(root), 'strict');
    const store = new LmdbUnitStore(env);
    const old = (status: string, schemaUrn: string, data: Record<string, unknown>, issues: unknown[]) => ({
      schema: schemaUrn, id: 'meta_01JQ0000000000000000000000', data, status, issues, provenance, jobId: '0190a0a0-0000-7000-8000-000000000000', actor: 'alice', at: Date.parse('2026-01-02T03:04:05.000Z'),
    });
    await store.run((unit) => {
      unit.put(table('doc_derived'), ['acme', doc.documentId, NOTES], old('valid', NOTES_1, { text: 5 }, []));
      unit.put(table('doc_derived'), ['acme', doc.documentId, 'urn:svc:later'], old('quarantined', 'urn:svc:schema:later@1.0.0', { any: true }, [{ path: '/', code: 'schema_not_found', message: 'No schema' }]));
      unit.remove(table('doc_milestones'), 'envelope-1.1-recheck');
    });
    await env.close();

    server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'strict' }, root);
    try {
      api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice' }));
      const read = (query: string) => api.get(`/v1/documents/${doc.documentId}/metadata${query}`);
      await expect.poll(async () => (await read('?status=quarantined&envelope=1.1')).json.namespaces[NOTES]?.status, { timeout: 20_000 }).toBe('quarantined');
      await expect.poll(async () => (await read('?status=unverified&envelope=1.1')).json.namespaces['urn:svc:later']?.status, { timeout: 20_000 }).toBe('unverified');
      expect((await read('')).json).toEqual({ namespaces: {} });
      expect((await read('?status=quarantined&envelope=1.1')).json.namespaces[NOTES].receipt).toEqual({ receivedAt: null, recordedAt: '2026-01-02T03:04:05.000Z', principal: null, requestId: null });
    } finally {
      await server.stop();
    }
  });
});
