// Tenants cannot harm each other through the document platform (security on; decisions §5):
// metadata entries count against the tenant's quota, once per distinct stored entry (a version
// that carries an entry unchanged adds nothing), an entry is at most SVC_MAX_METADATA_ENTRY_BYTES
// (413), a write past the quota is 507 and writes nothing; a schema belongs to the tenant that
// registered it: another tenant can neither change its lifecycle nor migrate from or to it
// (403), an operator holding schema.admin can. On fs and pg-s3.

import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CatalogEnv, LmdbUnitStore, PgUnitStore, type UnitStore, table } from '../dist/engine/store/index.js';
import { openPool } from '../dist/engine/store/pg/pool.js';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { Api, devToken, expectError, expectRejected } from './helpers/docs-client.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const QUOTA = 2_500_000;
const ENTRY_LIMIT = 1_048_576;
const BIG = 'urn:svc:bigmeta';
const BIG_1 = 'urn:svc:schema:bigmeta@1.0.0';
const SMALL = 'urn:svc:smallmeta';
const SMALL_1 = 'urn:svc:schema:smallmeta@1.0.0';
const SCOPE = 'doc.create doc.read doc.write meta.read meta.write:* meta.patch:* schema.write migration.write job.read';

/** `{ text, n? }`; with `strict`, exactly `{ text }`, or `{ text, n }` both required. */
const textSchema = (schemaUrn: string, namespaceUrn: string, strict?: 'text' | 'text+n') => ({
  schemaUrn, namespaceUrn, lifecycle: 'published',
  jsonSchema: strict === undefined
    ? { type: 'object', required: ['text'], properties: { text: { type: 'string' }, n: { type: 'integer' } } }
    : strict === 'text'
      ? { type: 'object', required: ['text'], additionalProperties: false, properties: { text: { type: 'string' } }, examples: [{ text: 'a' }] }
      : { type: 'object', required: ['text', 'n'], additionalProperties: false, properties: { text: { type: 'string' }, n: { type: 'integer' } } },
});

let server: TestServer;
let env: Record<string, string>;

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-tenant-meta-'));
  const policyFile = path.join(dir, 'policy.json');
  fs.writeFileSync(policyFile, JSON.stringify({ tenants: { 'mq-quota': { quotaBytes: QUOTA } } }));
  // Bodies up to 4 MiB: the entry limit (1 MiB, the default) is met before the body's.
  env = {
    SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_TENANT_POLICY_FILE: policyFile,
    SVC_DOC_MAX_JSON_BYTES: '4MiB', SVC_DURABILITY: 'relaxed',
  };
  // A root of the test's own: the server is stopped and started again on it.
  server = await startServer(env, tempRoot('svc-tenant-meta-'));
}, 60_000);

/** The server's unit store, opened while it is stopped. */
async function withUnits(root: string, step: (store: UnitStore) => Promise<void>): Promise<void> {
  // The units are LMDB under the data directory on fs and s3 (the documents node's), PostgreSQL on pg-s3.
  if (TEST_BACKEND !== 'pg-s3') {
    const catalog = CatalogEnv.open(root, 'relaxed');
    const store = new LmdbUnitStore(catalog);
    await step(store);
    await store.close();
    await catalog.close();
    return;
  }
  const sql = openPool((await backendEnv(root)).SVC_PG_URL!, 1);
  const store = new PgUnitStore(sql);
  await step(store);
  await store.close();
  await sql.end();
}

afterAll(async () => {
  await server?.stop();
  if (server) fs.rmSync(server.root, { recursive: true, force: true });
});

async function retained(api: Api): Promise<number> {
  const r = await api.get('/api/v1/usage');
  expect(r.status, r.text).toBe(200);
  return r.json.retainedBytes;
}

async function versions(api: Api, documentId: string): Promise<number> {
  const r = await api.get(`/v1/documents/${documentId}/versions`);
  expect(r.status, r.text).toBe(200);
  return r.json.versions.length;
}

describe('metadata counts against the tenant\'s quota', () => {
  test('each distinct stored entry once; 413 past SVC_MAX_METADATA_ENTRY_BYTES and 507 past the quota, nothing written', async () => {
    const api = new Api(server.url, await devToken(server.url, { org_id: 'mq-quota', sub: 'alice', scope: SCOPE }));
    for (const s of [textSchema(BIG_1, BIG), textSchema(SMALL_1, SMALL)]) expect((await api.post('/v1/schemas', s)).status).toBe(201);
    const doc = await api.newDocument(randomBytes(1000));
    expect(await retained(api)).toBe(1000);

    // A 900 kB entry: its stored bytes (data, schema, id, receipt), once.
    let before = await retained(api);
    const w1 = await api.writeCanonical(doc.documentId, { [BIG]: { schema: BIG_1, data: { text: 'x'.repeat(900_000) } } });
    expect(w1.status, w1.text).toBe(201);
    let grown = (await retained(api)) - before;
    expect(grown).toBeGreaterThan(900_000);
    expect(grown).toBeLessThan(901_000);

    // Another namespace: a new version that carries the 900 kB entry unchanged; only the small entry counts.
    before = await retained(api);
    const w2 = await api.writeCanonical(doc.documentId, { [SMALL]: { schema: SMALL_1, data: { text: 'small' } } });
    expect(w2.status, w2.text).toBe(201);
    grown = (await retained(api)) - before;
    expect(grown).toBeGreaterThan(0);
    expect(grown).toBeLessThan(1000);

    // A patch stores a new entry: counted whole.
    before = await retained(api);
    const p1 = await api.patch(doc.documentId, BIG, { baseMetadataId: w1.json.metadataIds[BIG], patch: [{ op: 'add', path: '/data/n', value: 1 }] });
    expect(p1.status, p1.text).toBe(200);
    grown = (await retained(api)) - before;
    expect(grown).toBeGreaterThan(900_000);
    expect(grown).toBeLessThan(901_000);

    // Past the entry limit: 413 in the rejected form, nothing written.
    before = await retained(api);
    const versionsBefore = await versions(api, doc.documentId);
    const huge = await api.writeCanonical(doc.documentId, { [SMALL]: { schema: SMALL_1, data: { text: 'y'.repeat(ENTRY_LIMIT) } } });
    expectRejected(huge, 413, 'metadata_entry_too_large');
    expect(await retained(api)).toBe(before);
    expect(await versions(api, doc.documentId)).toBe(versionsBefore);

    // Initial metadata counts at the document's creation, once: finalizing adds only the content.
    before = await retained(api);
    const created = await api.post('/v1/documents', { initialMetadata: { namespaces: { [SMALL]: { schema: SMALL_1, data: { text: 'z'.repeat(100_000) } } } } });
    expect(created.status, created.text).toBe(201);
    grown = (await retained(api)) - before;
    expect(grown).toBeGreaterThan(100_000);
    expect(grown).toBeLessThan(101_000);
    before = await retained(api);
    expect((await api.putBytes(created.json.uploadId, randomBytes(1000))).status).toBe(204);
    expect((await api.post(`/v1/uploads/${created.json.uploadId}/finalize`, {})).status).toBe(201);
    expect(await retained(api)).toBe(before + 1000);

    // About 1.9 MB retained of 2.5 MB: another 900 kB entry does not fit, by patch or by write.
    before = await retained(api);
    expect(QUOTA - before).toBeLessThan(900_000);
    const versionsNow = await versions(api, doc.documentId);
    const p2 = await api.patch(doc.documentId, BIG, { baseMetadataId: p1.json.newMetadataId, patch: [{ op: 'replace', path: '/data/n', value: 2 }] });
    expectRejected(p2, 507, 'tenant_storage_quota_exceeded', ['quotaBytes', 'retainedBytes']);
    expect(p2.json).toMatchObject({ quotaBytes: QUOTA, retainedBytes: before });
    const w3 = await api.writeCanonical(doc.documentId, { [BIG]: { schema: BIG_1, data: { text: 'w'.repeat(900_000) } } });
    expectRejected(w3, 507, 'tenant_storage_quota_exceeded', ['quotaBytes', 'retainedBytes']);
    expect(w3.json).toMatchObject({ quotaBytes: QUOTA, retainedBytes: before });
    const documentId = randomUUID();
    const c2 = await api.post('/v1/documents', { documentId, initialMetadata: { namespaces: { [BIG]: { schema: BIG_1, data: { text: 'v'.repeat(900_000) } } } } });
    expect({ status: c2.status, body: c2.json }).toMatchObject({ status: 507, body: { error: 'tenant_storage_quota_exceeded', quotaBytes: QUOTA, retainedBytes: before } });
    expect(await retained(api)).toBe(before);
    expect(await versions(api, doc.documentId)).toBe(versionsNow);
    expect((await api.get(`/v1/documents/${documentId}`)).status).toBe(404);
    const current = await api.get(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent(BIG)}`);
    expect(current.status).toBe(200);
    expect(current.text).toContain(p1.json.newMetadataId);
  }, 60_000);

  test('a patch that grows its entry past the limit (copies doubling it) is 413 as soon as it passes, nothing written', async () => {
    const api = new Api(server.url, await devToken(server.url, { org_id: 'mq-free', sub: 'alice', scope: SCOPE }));
    expect([200, 201]).toContain((await api.post('/v1/schemas', textSchema(BIG_1, BIG))).status);
    const doc = await api.newDocument(randomBytes(100));
    const w = await api.writeCanonical(doc.documentId, { [BIG]: { schema: BIG_1, data: { text: 'x'.repeat(1000) } } });
    expect(w.status, w.text).toBe(201);
    const before = await retained(api);
    // 2^40 copies of 1000 bytes if applied whole.
    const patch = Array.from({ length: 40 }, (_, i) => ({ op: 'copy', from: '/data', path: `/data/k${i}` }));
    const started = Date.now();
    const p = await api.patch(doc.documentId, BIG, { baseMetadataId: w.json.metadataIds[BIG], patch });
    expectRejected(p, 413, 'metadata_entry_too_large');
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await retained(api)).toBe(before);
    expect(await versions(api, doc.documentId)).toBe(2);
  });

  test('a store from before the count: its entries are counted once at start, and a start again counts nothing twice', async () => {
    const api = new Api(server.url, await devToken(server.url, { org_id: 'mq-quota', sub: 'alice', scope: SCOPE }));
    const before = await retained(api);
    const { root } = server;
    await server.stop();
    // Back to a catalog whose entries were never counted: no entry records, the totals without them, no build mark.
    await withUnits(root, async (store) => {
      const contents = table<number, [string, string]>('doc_tenant_content');
      const totals = table<number, string>('doc_tenant_bytes');
      const entries: Array<{ key: [string, string]; bytes: number }> = [];
      for await (const { key, value } of store.scan(contents)) if (key[1].startsWith('meta:')) entries.push({ key, bytes: value });
      expect(entries.length).toBeGreaterThan(3);
      await store.run(async (unit) => {
        for (const e of entries) {
          unit.remove(contents, e.key);
          unit.add(totals, e.key[0], -e.bytes);
        }
        unit.remove(table<number, string>('doc_ledger_builds'), 'metadata-entries');
      });
    });
    for (let start = 0; start < 2; start++) {
      server = await startServer(env, root);
      expect(await retained(new Api(server.url, api.token))).toBe(before);
      if (start === 0) await server.stop();
    }
  }, 60_000);
});

describe('a schema belongs to the tenant that registered it', () => {
  const A_1 = 'urn:svc:schema:owned@1.0.0';
  const A_2 = 'urn:svc:schema:owned@2.0.0';
  const B_2 = 'urn:svc:schema:owned@3.0.0';
  const OWNED = 'urn:svc:owned';
  const forward = { type: 'jsonpatch', ops: [{ op: 'add', path: '/n', value: 0 }] };
  const inverse = { type: 'jsonpatch', ops: [{ op: 'remove', path: '/n' }] };
  let a: Api;
  let b: Api;
  let operator: Api;

  beforeAll(async () => {
    a = new Api(server.url, await devToken(server.url, { org_id: 'sch-a', sub: 'alice', scope: SCOPE }));
    b = new Api(server.url, await devToken(server.url, { org_id: 'sch-b', sub: 'bob', scope: SCOPE }));
    operator = new Api(server.url, await devToken(server.url, { org_id: 'sch-b', sub: 'root', scope: `${SCOPE} schema.admin` }));
    expect((await a.post('/v1/schemas', textSchema(A_1, OWNED, 'text'))).status).toBe(201);
    expect((await a.post('/v1/schemas', textSchema(A_2, OWNED, 'text+n'))).status).toBe(201);
    expect((await b.post('/v1/schemas', textSchema(B_2, OWNED, 'text+n'))).status).toBe(201);
  });

  test('another tenant\'s lifecycle change is 403 and the owner\'s writes go on; schema.admin may change it', async () => {
    const retire = await b.call('PATCH', `/v1/schemas/${encodeURIComponent(A_1)}`, { lifecycle: 'retired' });
    expectError(retire, 403, 'forbidden');
    expect((await a.get(`/v1/schemas/${encodeURIComponent(A_1)}`)).json.lifecycle).toBe('published');
    const doc = await a.newDocument(randomBytes(100));
    const w = await a.writeCanonical(doc.documentId, { [OWNED]: { schema: A_1, data: { text: 'still mine' } } });
    expect(w.status, w.text).toBe(201);
    // Its owner may; an operator with schema.admin may, whatever its tenant.
    const deprecate = await a.call('PATCH', `/v1/schemas/${encodeURIComponent(A_1)}`, { lifecycle: 'deprecated' });
    expect(deprecate.status, deprecate.text).toBe(200);
    const byOperator = await operator.call('PATCH', `/v1/schemas/${encodeURIComponent(A_2)}`, { lifecycle: 'deprecated' });
    expect(byOperator.status, byOperator.text).toBe(200);
    expect(byOperator.json.lifecycle).toBe('deprecated');
    // The platform's own schemas have no owner: schema.admin alone.
    expectError(await a.call('PATCH', `/v1/schemas/${encodeURIComponent('urn:svc:schema:ocr@1.0.0')}`, { lifecycle: 'retired' }), 403, 'forbidden');
  });

  test('migrations from or to another tenant\'s schema are 403: registering one, migrating a document, a bulk migration', async () => {
    expectError(await b.post('/v1/migrations', { fromSchemaUrn: A_1, toSchemaUrn: B_2, forward, inverse }), 403, 'forbidden');
    expectError(await b.post('/v1/migrations', { fromSchemaUrn: B_2, toSchemaUrn: A_1, forward: inverse, inverse: forward }), 403, 'forbidden');
    // The owner registers its own migration; another tenant cannot run it, on its own documents either.
    const registered = await a.post('/v1/migrations', { fromSchemaUrn: A_1, toSchemaUrn: A_2, forward, inverse });
    expect(registered.status, registered.text).toBe(201);
    const doc = await b.newDocument(randomBytes(100));
    expect((await b.writeCanonical(doc.documentId, { [OWNED]: { schema: A_1, data: { text: 'borrowed' } } })).status).toBe(201);
    const one = await b.post(`/v1/documents/${doc.documentId}/migrate`, { namespaceUrn: OWNED, toSchemaUrn: A_2, reason: 'try' });
    expectError(one, 403, 'forbidden');
    const bulk = await b.post('/v1/migrations/apply', { fromSchemaUrn: A_1, toSchemaUrn: A_2, reason: 'try' });
    expectError(bulk, 403, 'forbidden');
    // schema.admin may.
    const admitted = await operator.post(`/v1/documents/${doc.documentId}/migrate`, { namespaceUrn: OWNED, toSchemaUrn: A_2, reason: 'operator' });
    expect(admitted.status, admitted.text).toBe(202);
    const migrationByOperator = await operator.post('/v1/migrations', { fromSchemaUrn: A_1, toSchemaUrn: B_2, forward, inverse });
    expect(migrationByOperator.status, migrationByOperator.text).toBe(201);
  });
});
