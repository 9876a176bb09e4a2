// Bulk migration over HTTP (decisions, "Bulk migration"): POST /v1/migrations/apply moves every
// matching document's entry to the target schema, one new version each, with progress on the
// job; bad requests; and (fs) a kill -9 halfway: the job goes on after the restart and no
// document is migrated twice. On fs and pg-s3.

import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TEST_BACKEND } from './helpers/backends.js';
import { Api, ISO_UTC, devToken, expectError } from './helpers/docs-client.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const SECRET = 'bulk-migration-test-secret-0123456789';
const CASE = 'urn:svc:case';
const V1 = 'urn:svc:schema:case@1.0.0';
const V2 = 'urn:svc:schema:case@2.0.0';
const V3 = 'urn:svc:schema:case@3.0.0';

const schemas = [
  { schemaUrn: V1, namespaceUrn: CASE, lifecycle: 'published', jsonSchema: { type: 'object', required: ['caseNumber'], additionalProperties: false, properties: { caseNumber: { type: 'string' }, court: { type: 'string' } } } },
  { schemaUrn: V2, namespaceUrn: CASE, lifecycle: 'published', jsonSchema: { type: 'object', required: ['number'], additionalProperties: false, properties: { number: { type: 'string' }, court: { type: 'string' } } } },
  { schemaUrn: V3, namespaceUrn: CASE, lifecycle: 'published', jsonSchema: { type: 'object', required: ['id'], additionalProperties: false, properties: { id: { type: 'string' }, court: { type: 'string' } } } },
];
const migrations = [
  { fromSchemaUrn: V1, toSchemaUrn: V2, forward: { type: 'jsonpatch', ops: [{ op: 'move', from: '/caseNumber', path: '/number' }] }, inverse: { type: 'jsonpatch', ops: [{ op: 'move', from: '/number', path: '/caseNumber' }] } },
  { fromSchemaUrn: V2, toSchemaUrn: V3, forward: { type: 'jsonpatch', ops: [{ op: 'move', from: '/number', path: '/id' }] }, inverse: { type: 'jsonpatch', ops: [{ op: 'move', from: '/id', path: '/number' }] } },
];

async function setUp(api: Api): Promise<void> {
  for (const s of schemas) expect((await api.post('/v1/schemas', s)).status).toBe(201);
  for (const m of migrations) expect((await api.post('/v1/migrations', m)).status).toBe(201);
}

/** `count` documents on V1, created `concurrency` at a time; court alternates Oslo/Bergen. */
async function seed(api: Api, count: number, concurrency = 8, extra: Record<string, unknown> = {}): Promise<Array<{ documentId: string; court: string }>> {
  const out: Array<{ documentId: string; court: string }> = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const court = i % 2 === 0 ? 'Oslo' : 'Bergen';
        const doc = await api.newDocument(new TextEncoder().encode(`case ${i}`), {
          create: { initialMetadata: { namespaces: { [CASE]: { schema: V1, data: { caseNumber: `C-${i}`, court } } } }, ...extra },
        });
        out.push({ documentId: doc.documentId, court });
      }
    }),
  );
  return out;
}

const versionsOf = async (api: Api, documentId: string) => (await api.get(`/v1/documents/${documentId}/versions`)).json.versions as unknown[];

describe('bulk migration', () => {
  let server: TestServer;
  let api: Api;

  beforeAll(async () => {
    server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' });
    api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice' }));
    await setUp(api);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test('moves every matching document once, one new version each, with progress and a tally; the rest is left alone', async () => {
    const docs = await seed(api, 40);
    // A document whose rules refuse meta.write to alice: skipped, untouched.
    const [locked] = await seed(api, 1, 1, { initialPermissions: { rules: [{ effect: 'allow', actions: ['doc.read', 'doc.write', 'meta.read'], principals: ['user:alice'] }, { effect: 'allow', actions: ['*'], principals: ['user:bob'] }] } });
    // Another tenant's document on V1: never seen.
    const other = new Api(server.url, await devToken(server.url, { org_id: 'globex', sub: 'carol' }));
    const [foreign] = await seed(other, 1, 1);

    const applied = await api.post('/v1/migrations/apply', { fromSchemaUrn: V1, toSchemaUrn: V2, where: { '/court': 'Oslo' }, reason: 'v2 for Oslo' }, { 'X-Request-Id': 'bulk-1' });
    expect(applied.status, applied.text).toBe(202);
    expect(applied.headers.get('location')).toBe(`/v1/jobs/${applied.json.jobId}`);
    expect(Object.keys(applied.json)).toEqual(['jobId']);
    const job = await api.settled(applied.json.jobId);
    // Total: the tenant's documents on V1 when the job began (where is checked as each is reached).
    expect(job.json).toMatchObject({
      kind: 'metadata.migrate-all', state: 'completed', error: null,
      progress: { done: 41, total: 41 },
      outputs: { derivedNamespaces: [], viewKeys: [], migration: { migrated: 20, skipped: 21, failed: 0, failures: [] } },
    });
    for (const d of docs) {
      const entry = (await api.get(`/v1/documents/${d.documentId}/metadata/${encodeURIComponent(CASE)}?envelope=1.1`)).json.entry;
      if (d.court === 'Oslo') {
        expect(entry).toMatchObject({ schema: { $id: V2 }, data: { number: expect.stringMatching(/^C-\d+$/), court: 'Oslo' }, receipt: { principal: { sub: 'alice', org: 'acme' }, requestId: 'bulk-1', recordedAt: expect.stringMatching(ISO_UTC) } });
        expect(await versionsOf(api, d.documentId)).toHaveLength(2);
      } else {
        expect(entry).toMatchObject({ schema: { $id: V1 }, data: { court: 'Bergen' } });
        expect(await versionsOf(api, d.documentId)).toHaveLength(1);
      }
    }
    expect((await api.get(`/v1/documents/${locked!.documentId}/metadata/${encodeURIComponent(CASE)}`)).json.entry.schema).toBe(V1);
    expect((await other.get(`/v1/documents/${foreign!.documentId}/metadata/${encodeURIComponent(CASE)}`)).json.entry.schema).toBe(V1);
    // Search follows: Oslo documents are on V2 now.
    const onV2 = await api.post('/v1/documents/search', { namespaceUrn: CASE, where: { '/court': 'Oslo', '/number': 'C-0' } });
    expect(onV2.status, onV2.text).toBe(200);
    expect(onV2.json.documents).toHaveLength(1);
    // On V1 still: the locked document alone (its case number is C-0 too).
    expect((await api.post('/v1/documents/search', { namespaceUrn: CASE, where: { '/caseNumber': 'C-0' } })).json.documents.map((d: { documentId: string }) => d.documentId)).toEqual([locked!.documentId]);
    expect((await api.post('/v1/documents/search', { namespaceUrn: CASE, where: { '/court': 'Bergen', '/caseNumber': 'C-1' } })).json.documents).toHaveLength(1);

    // Again without where: the Bergen ones; the Oslo ones are on V2 and never migrated twice.
    const rest = await api.settled((await api.post('/v1/migrations/apply', { fromSchemaUrn: V1, toSchemaUrn: V2, reason: 'the rest' })).json.jobId);
    expect(rest.json).toMatchObject({ state: 'completed', progress: { done: 21, total: 21 }, outputs: { migration: { migrated: 20, skipped: 1, failed: 0 } } });
    for (const d of docs) expect(await versionsOf(api, d.documentId)).toHaveLength(2);
    const none = await api.settled((await api.post('/v1/migrations/apply', { fromSchemaUrn: V1, toSchemaUrn: V2, reason: 'nothing left' })).json.jobId);
    expect(none.json).toMatchObject({ state: 'completed', progress: { done: 1, total: 1 }, outputs: { migration: { migrated: 0, skipped: 1, failed: 0 } } });
  });

  test('bad requests: each a documented 4xx, and no job', async () => {
    const body = { fromSchemaUrn: V2, toSchemaUrn: V3, reason: 'r' };
    for (const bad of [
      { ...body, extra: 1 },
      { ...body, fromSchemaUrn: 'urn:svc:case' },
      { ...body, toSchemaUrn: 7 },
      { ...body, reason: ' ' },
      { fromSchemaUrn: V2, toSchemaUrn: V3 },
      { ...body, where: { court: 'Oslo' } },
      { ...body, where: { '/court': ['Oslo'] } },
      { ...body, where: { '/court': null } },
      { ...body, where: 'court=Oslo' },
      [body],
    ]) {
      expectError(await api.post('/v1/migrations/apply', bad), 400, 'invalid_request');
    }
    expectError(await api.post('/v1/migrations/apply', { ...body, fromSchemaUrn: 'urn:svc:schema:case@9.0.0' }), 404, 'schema_not_found');
    expectError(await api.post('/v1/migrations/apply', { ...body, fromSchemaUrn: V1, toSchemaUrn: V3 }), 404, 'migration_not_found');
    const narrow = api.as(await devToken(server.url, { org_id: 'acme', sub: 'alice', scope: 'meta.write:* job.read' }));
    expectError(await narrow.post('/v1/migrations/apply', body), 403, 'forbidden');
    const otherNs = api.as(await devToken(server.url, { org_id: 'acme', sub: 'alice', scope: 'migration.write meta.write:urn:svc:other' }));
    expectError(await otherNs.post('/v1/migrations/apply', body), 403, 'forbidden');
    expect((await api.call('PATCH', `/v1/schemas/${encodeURIComponent(V3)}`, { lifecycle: 'retired' })).status).toBe(200);
    expectError(await api.post('/v1/migrations/apply', body), 422, 'schema_retired');
    const jobs = await api.get('/v1/jobs?limit=100');
    expect(jobs.json.jobs.filter((j: { kind: string }) => j.kind === 'metadata.migrate-all')).toHaveLength(3);
  });
});

describe('bulk migration counts only what the caller may see', () => {
  let server: TestServer;
  afterAll(async () => {
    await server?.stop();
  });

  test('total, progress and tally leave out the documents the caller\'s rules hide; those are not migrated', async () => {
    server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' });
    const alice = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice' }));
    const bob = alice.as(await devToken(server.url, { org_id: 'acme', sub: 'bob' }));
    await setUp(alice);
    const mine = await seed(alice, 6, 3);
    // 25 documents only bob may see, and one alice may read but not write (visible: skipped).
    const hidden = await seed(bob, 25, 5, { initialPermissions: { rules: [{ effect: 'allow', actions: ['*'], principals: ['user:bob'] }] } });
    const [readOnly] = await seed(bob, 1, 1, { initialPermissions: { rules: [{ effect: 'allow', actions: ['doc.read', 'meta.read'], principals: ['user:alice'] }, { effect: 'allow', actions: ['*'], principals: ['user:bob'] }] } });

    const progress: Array<{ done: number; total: number }> = [];
    const { jobId } = (await alice.post('/v1/migrations/apply', { fromSchemaUrn: V1, toSchemaUrn: V2, reason: 'alice moves hers' })).json;
    for (;;) {
      const seen = (await alice.get(`/v1/jobs/${jobId}`)).json;
      if (seen.progress) progress.push(seen.progress);
      if (['completed', 'failed', 'dead'].includes(seen.state)) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const job = await alice.settled(jobId);
    expect(job.json).toMatchObject({ state: 'completed', progress: { done: 7, total: 7 }, outputs: { migration: { migrated: 6, skipped: 1, failed: 0, failures: [] } } });
    // Every progress alice saw counts her seven alone.
    for (const p of progress) expect([p.total, p.done <= 7]).toEqual([7, true]);
    for (const d of mine) expect(await versionsOf(alice, d.documentId)).toHaveLength(2);
    for (const d of [...hidden, readOnly!]) expect(await versionsOf(bob, d.documentId)).toHaveLength(1);
    // Where filters what is migrated, not what is counted: the same 26 for bob, who sees them all (alice's are on V2 now).
    const theirs = await bob.settled((await bob.post('/v1/migrations/apply', { fromSchemaUrn: V1, toSchemaUrn: V2, where: { '/court': 'Oslo' }, reason: 'bob moves Oslo' })).json.jobId);
    expect(theirs.json).toMatchObject({ state: 'completed', progress: { done: 26, total: 26 }, outputs: { migration: { migrated: 14, skipped: 12, failed: 0 } } });
  });
});

describe.runIf(TEST_BACKEND === 'fs')('bulk migration after kill -9', () => {
  const root = tempRoot();
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  test('the job goes on from its progress after the restart; every document migrated exactly once', async () => {
    const env = { SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'strict', SVC_JOB_LEASE: '2s' };
    let server = await startServer(env, root);
    let api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice' }));
    await setUp(api);
    const docs = await seed(api, 1500, 16);
    const { jobId } = (await api.post('/v1/migrations/apply', { fromSchemaUrn: V1, toSchemaUrn: V2, reason: 'all' })).json;
    let seen: { state: string; progress?: { done: number; total: number } };
    for (;;) {
      seen = (await api.get(`/v1/jobs/${jobId}`)).json;
      if (seen.state !== 'pending' && (seen.progress?.done ?? 0) > 0) break;
    }
    await server.kill9();
    // Killed halfway: some batches committed, not all.
    expect(seen.state).toBe('running');
    expect(seen.progress!.done).toBeLessThan(1500);

    server = await startServer(env, root);
    try {
      api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice' }));
      const job = await api.settled(jobId, 60_000);
      expect(job.json).toMatchObject({ state: 'completed', attempts: 2, progress: { done: 1500, total: 1500 }, outputs: { migration: { migrated: 1500, skipped: 0, failed: 0 } } });
      const counts = new Map<number, number>();
      for (const d of docs) {
        const n = (await versionsOf(api, d.documentId)).length;
        counts.set(n, (counts.get(n) ?? 0) + 1);
      }
      expect([...counts]).toEqual([[2, 1500]]);
    } finally {
      await server.stop();
    }
  });
});
