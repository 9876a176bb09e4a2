// Issue 37: Idempotency-Key on every creating POST (docs/documents.md, "Idempotency-Key"). One
// server (fs): per route, the same request twice under one key gets the first answer again and
// makes one object; another request under the key is 422; keys outside the syntax are 400. The
// cluster cases (another node, a concurrent repeat, a commit whose reply is cut) are in
// test/multi-node-idempotency.test.ts.
import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Api, type Reply, devToken, expectError } from './helpers/docs-client.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const CASE = 'urn:svc:case';
const V1 = 'urn:svc:schema:case@1.0.0';
const V2 = 'urn:svc:schema:case@2.0.0';
const SCHEMA_1 = { schemaUrn: V1, namespaceUrn: CASE, lifecycle: 'published', jsonSchema: { type: 'object', required: ['caseNumber'], additionalProperties: false, properties: { caseNumber: { type: 'string' } } } };
const SCHEMA_2 = { schemaUrn: V2, namespaceUrn: CASE, lifecycle: 'published', jsonSchema: { type: 'object', required: ['number'], additionalProperties: false, properties: { number: { type: 'string' } } } };
const MIGRATION = {
  fromSchemaUrn: V1, toSchemaUrn: V2,
  forward: { type: 'jsonpatch', ops: [{ op: 'move', from: '/caseNumber', path: '/number' }] },
  inverse: { type: 'jsonpatch', ops: [{ op: 'move', from: '/number', path: '/caseNumber' }] },
};
const ENTITIES = 'urn:svc:workflow:entities@1';
const ALL = 'doc.create doc.read doc.write meta.read meta.write meta.write:* schema.write migration.write job.read workflow.run:* legacy.import legacy.read';

let key = 0;
/** A fresh key each call. */
const newKey = () => `"k-${process.pid}-${++key}"`;

/** What must be the same in a replay: the status, every header that matters, the body byte for byte. */
function answerOf(r: Reply) {
  const headers: Record<string, string | null> = {};
  for (const name of ['location', 'content-type', 'upload-offset', 'upload-length', 'upload-expires', 'x-svc-upload-session-id', 'deprecation']) headers[name] = r.headers.get(name);
  return { status: r.status, headers, text: r.text };
}

describe('Idempotency-Key on the creating POSTs (fs)', () => {
  const root = tempRoot('svc-idem-');
  const legacyRoot = path.join(root, 'legacy');
  let server: TestServer;
  let api: Api;

  /** The request twice under one key: the second answer is the first, byte for byte. */
  async function twice(method: string, route: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
    const k = newKey();
    const first = await api.call(method, route, body, { ...headers, 'Idempotency-Key': k });
    expect(first.status, first.text).toBeLessThan(300);
    const again = await api.call(method, route, body, { ...headers, 'Idempotency-Key': k });
    expect(answerOf(again)).toEqual(answerOf(first));
    return first;
  }

  const jobsOf = async (documentId: string) => (await api.get(`/v1/jobs?documentId=${documentId}`)).json.jobs as unknown[];

  beforeAll(async () => {
    // One legacy document: its binary and its descriptor.
    const bytes = Buffer.from('a legacy binary');
    const h = createHash('sha256').update(bytes).digest('hex');
    fs.mkdirSync(path.join(legacyRoot, 'binaries', h.slice(0, 2), h.slice(2, 4)), { recursive: true });
    fs.writeFileSync(path.join(legacyRoot, 'binaries', h.slice(0, 2), h.slice(2, 4), `${h}.bin`), bytes);
    fs.mkdirSync(path.join(legacyRoot, 'metadata'), { recursive: true });
    fs.writeFileSync(path.join(legacyRoot, 'metadata', 'doc-1.xml'), `<?xml version="1.0"?><record id="doc-1"><binaryHash>${h}</binaryHash><mimeType>text/plain</mimeType><length>${bytes.length}</length></record>`);
    server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_LEGACY_REPOS: `main=${legacyRoot}` }, path.join(root, 'data'));
    api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice', scope: ALL }));
  });
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  test("POST /v1/documents: the same answer and one document; another body under the key 422; another caller's key is theirs", async () => {
    const before = (await api.get('/v1/documents?limit=1000')).json.documents.length;
    const k = newKey();
    const first = await api.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '1' }] }, { 'Idempotency-Key': k });
    expect(first.status, first.text).toBe(201);
    const again = await api.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '1' }] }, { 'Idempotency-Key': k });
    expect(answerOf(again)).toEqual(answerOf(first));
    expect((await api.get('/v1/documents?limit=1000')).json.documents.length).toBe(before + 1);
    expectError(await api.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '2' }] }, { 'Idempotency-Key': k }), 422, 'idempotency_key_reused');
    // Another principal's same key is another request.
    const bob = api.as(await devToken(server.url, { org_id: 'acme', sub: 'bob', scope: ALL }));
    const theirs = await bob.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '1' }] }, { 'Idempotency-Key': k });
    expect(theirs.status).toBe(201);
    expect(theirs.json.documentId).not.toBe(first.json.documentId);
  });

  test('keys outside 1..255 printable ASCII are 400; the draft\'s quoted form and a bare one are the same key', async () => {
    for (const bad of ['""', `"${'x'.repeat(256)}"`, '"a\u00e9"', '"unterminated']) {
      expectError(await api.post('/v1/documents', {}, { 'Idempotency-Key': bad }), 400, 'invalid_idempotency_key');
    }
    const quoted = await api.post('/v1/documents', {}, { 'Idempotency-Key': '"same-key-1"' });
    const bare = await api.post('/v1/documents', {}, { 'Idempotency-Key': 'same-key-1' });
    expect(answerOf(bare)).toEqual(answerOf(quoted));
  });

  test('POST /v1/uploads/{id}/finalize, workflow runs, /v1/schemas, /v1/migrations, migrate and apply: the first answer again, one object', async () => {
    const created = await twice('POST', '/v1/documents', { placementHint: 'archival' });
    const put = await api.putBytes(created.json.uploadId, Buffer.from('Alice Smith met Bob Jones in Paris.'), 'text/plain');
    expect(put.status, put.text).toBe(204);
    const fin = await twice('POST', `/v1/uploads/${created.json.uploadId}/finalize`, { reason: 'first' });
    expect(fin.status).toBe(201);
    const documentId = created.json.documentId as string;
    expect((await api.get(`/v1/documents/${documentId}/versions`)).json.versions).toHaveLength(1);

    const run = await twice('POST', `/v1/documents/${documentId}/workflows/${encodeURIComponent(ENTITIES)}/run`, { inputs: { options: { language: 'eng' } } });
    expect(run.status).toBe(202);
    expect(await jobsOf(documentId)).toHaveLength(1);

    expect((await twice('POST', '/v1/schemas', SCHEMA_1)).status).toBe(201);
    expect((await twice('POST', '/v1/schemas', SCHEMA_2)).status).toBe(201);
    expect((await twice('POST', '/v1/migrations', MIGRATION)).status).toBe(201);

    const withCase = await api.post('/v1/documents', { initialMetadata: { namespaces: { [CASE]: { schema: V1, data: { caseNumber: 'C-1' } } } } });
    expect(withCase.status, withCase.text).toBe(201);
    expect((await api.putBytes(withCase.json.uploadId, Buffer.from('case'), 'text/plain')).status).toBe(204);
    expect((await api.post(`/v1/uploads/${withCase.json.uploadId}/finalize`, {})).status).toBe(201);
    const migrate = await twice('POST', `/v1/documents/${withCase.json.documentId}/migrate`, { namespaceUrn: CASE, toSchemaUrn: V2, reason: 'rename' });
    expect(migrate.status).toBe(202);
    expect(await jobsOf(withCase.json.documentId)).toHaveLength(1);

    const jobsBefore = (await api.get('/v1/jobs?limit=1000')).json.jobs.length;
    const apply = await twice('POST', '/v1/migrations/apply', { fromSchemaUrn: V1, toSchemaUrn: V2, reason: 'all of them' });
    expect(apply.status).toBe(202);
    expect((await api.get('/v1/jobs?limit=1000')).json.jobs.length).toBe(jobsBefore + 1);
  });

  test('POST /v1/legacy/import: the first answer again, one job; another document under the key 422', async () => {
    const k = newKey();
    const first = await api.post('/v1/legacy/import', { repo: 'main', legacyDocId: 'doc-1' }, { 'Idempotency-Key': k });
    expect(first.status, first.text).toBe(202);
    const again = await api.post('/v1/legacy/import', { repo: 'main', legacyDocId: 'doc-1' }, { 'Idempotency-Key': k });
    expect(answerOf(again)).toEqual(answerOf(first));
    expect(await jobsOf(first.json.documentId)).toHaveLength(1);
    expectError(await api.post('/v1/legacy/import', { repo: 'main', legacyDocId: 'doc-2' }, { 'Idempotency-Key': k }), 422, 'idempotency_key_reused');
  });

  test('POST /api/v1/uploads: the first answer again, one session', async () => {
    const headers = { 'Upload-Length': '10', 'Content-Type': 'text/plain', 'X-Svc-Tenant-Id': randomUUID(), 'X-Svc-Upload-Session-Id': randomUUID() };
    const k = newKey();
    const first = await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { ...headers, 'Idempotency-Key': k } });
    const firstText = await first.text();
    expect(first.status, firstText).toBe(201);
    const again = await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { ...headers, 'Idempotency-Key': k } });
    expect(again.status).toBe(201);
    expect(await again.text()).toBe(firstText);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.headers.get('upload-expires')).toBe(first.headers.get('upload-expires'));
    // Another Upload-Length under the key is another request.
    const other = await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { ...headers, 'Upload-Length': '11', 'Idempotency-Key': k } });
    expect(other.status).toBe(422);
    expect((await other.json()).error).toBe('idempotency_key_reused');
  });

  test('POST /files/: the first answer again, one upload; a creation with bytes under a key is 400', async () => {
    const headers = { 'Tus-Resumable': '1.0.0', 'Upload-Length': '10', 'Upload-Metadata': 'filename aGVsbG8=' };
    const k = newKey();
    const first = await fetch(`${server.url}/files/`, { method: 'POST', headers: { ...headers, 'Idempotency-Key': k } });
    expect(first.status).toBe(201);
    const again = await fetch(`${server.url}/files/`, { method: 'POST', headers: { ...headers, 'Idempotency-Key': k } });
    expect(again.status).toBe(201);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.headers.get('upload-expires')).toBe(first.headers.get('upload-expires'));
    expect(again.headers.get('upload-offset')).toBe('0');
    const withBytes = await fetch(`${server.url}/files/`, {
      method: 'POST', headers: { ...headers, 'Content-Type': 'application/offset+octet-stream', 'Idempotency-Key': newKey() }, body: Buffer.from('0123456789'),
    });
    expect(withBytes.status).toBe(400);
    expect((await withBytes.json()).error).toBe('idempotency_key_unsupported');
  });
});
