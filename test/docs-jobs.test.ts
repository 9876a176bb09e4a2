// Jobs of the document platform over HTTP: derived writes and migrations, and kill -9 while
// they run: after the restart every job finishes exactly once and no version is lost.

import fs from 'node:fs';
import { afterAll, describe, expect, test } from 'vitest';
import { checkedFetch as fetch } from './helpers/http.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const SECRET = 'docs-jobs-test-secret-0123456789abcdef';

class Client {
  constructor(
    public base: string,
    private token: string,
  ) {}

  async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(this.base + path, {
      method,
      headers: { Authorization: `Bearer ${this.token}`, ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : body instanceof Uint8Array ? (body as Uint8Array<ArrayBuffer>) : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  }
}

async function client(server: TestServer): Promise<Client> {
  const res = await fetch(`${server.url}/dev/token`, { method: 'POST', body: JSON.stringify({ org_id: 'acme', sub: 'tester' }) });
  return new Client(server.url, ((await res.json()) as any).access_token);
}

const caseSchema = (version: string, key: string) => ({
  schemaUrn: `urn:svc:schema:case@${version}`,
  namespaceUrn: 'urn:svc:case',
  lifecycle: 'published',
  jsonSchema: { type: 'object', required: [key], additionalProperties: false, properties: { [key]: { type: 'string' }, court: { type: 'string' } } },
});
const ocrSchema = {
  schemaUrn: 'urn:svc:schema:ocr-notes@1.0.0',
  namespaceUrn: 'urn:svc:ocr',
  lifecycle: 'published',
  jsonSchema: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } },
};
const provenanceBase = { producer: { name: 'ocr', version: '1' }, producedAt: '2026-11-21T10:00:00Z', confidence: 0.5 };
/** A derived write's provenance naming the document's first version's content (anything else is 422 provenance_input_unknown). */
async function provenanceOf(c: Client, doc: string) {
  const versions = await c.call('GET', `/v1/documents/${doc}/versions`);
  return { ...provenanceBase, input: { kind: 'blob', key: versions.json.versions[0].contentRef.key as string } };
}

async function newDocument(c: Client, caseNumber: string): Promise<string> {
  const created = await c.call('POST', '/v1/documents', {
    initialMetadata: { namespaces: { 'urn:svc:case': { schema: 'urn:svc:schema:case@1.0.0', data: { caseNumber, court: 'Oslo' } } } },
  });
  expect(created.status).toBe(201);
  expect((await c.call('PUT', `/v1/uploads/${created.json.uploadId}/bytes`, new TextEncoder().encode(`bytes of ${caseNumber}`))).status).toBe(204);
  expect((await c.call('POST', `/v1/uploads/${created.json.uploadId}/finalize`, { reason: 'test' })).status).toBe(201);
  return created.json.documentId;
}

async function settle(c: Client, jobId: string, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.call('GET', `/v1/jobs/${jobId}`);
    if (['completed', 'failed', 'dead'].includes(r.json.state)) return r.json;
    if (Date.now() > until) throw new Error(`job ${jobId} still ${r.json.state}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('document jobs', () => {
  const root = tempRoot();
  let server: TestServer;
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  test('derived writes: valid and quarantined entries, never a version; migrations write one version', async () => {
    server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'strict', SVC_JOB_CONCURRENCY: '1' }, root);
    const c = await client(server);
    for (const s of [caseSchema('1.0.0', 'caseNumber'), caseSchema('2.0.0', 'number'), ocrSchema]) expect((await c.call('POST', '/v1/schemas', s)).status).toBe(201);
    const migration = {
      fromSchemaUrn: 'urn:svc:schema:case@1.0.0',
      toSchemaUrn: 'urn:svc:schema:case@2.0.0',
      forward: { type: 'jsonpatch', ops: [{ op: 'move', from: '/caseNumber', path: '/number' }] },
      inverse: { type: 'jsonpatch', ops: [{ op: 'move', from: '/number', path: '/caseNumber' }] },
    };
    const registered = await c.call('POST', '/v1/migrations', migration);
    expect(registered.status).toBe(201);
    expect(registered.json.probedInstances).toBeGreaterThanOrEqual(2);
    expect((await c.call('POST', '/v1/migrations', migration)).status).toBe(200);
    const lossy = await c.call('POST', '/v1/migrations', {
      ...migration,
      toSchemaUrn: 'urn:svc:schema:case@1.0.0',
      fromSchemaUrn: 'urn:svc:schema:case@2.0.0',
      forward: { type: 'jsonpatch', ops: [{ op: 'move', from: '/number', path: '/caseNumber' }, { op: 'replace', path: '/court', value: 'X' }] },
      inverse: { type: 'jsonpatch', ops: [{ op: 'move', from: '/caseNumber', path: '/number' }] },
    });
    expect(lossy.status).toBe(422);
    expect(lossy.json.error).toBe('migration_not_invertible');

    const doc = await newDocument(c, 'C-1');
    const provenance = await provenanceOf(c, doc);
    const noProvenance = await c.call('POST', `/v1/documents/${doc}/metadata`, { mode: 'derived', bundle: { namespaces: { 'urn:svc:ocr': { schema: ocrSchema.schemaUrn, data: { text: 'x' } } } } });
    expect(noProvenance.status).toBe(400);
    expect(noProvenance.json).toMatchObject({ status: 'rejected', error: { code: 'provenance_required' } });
    const good = await c.call('POST', `/v1/documents/${doc}/metadata`, { mode: 'derived', provenance, bundle: { namespaces: { 'urn:svc:ocr': { schema: ocrSchema.schemaUrn, data: { text: 'page one' } } } } });
    expect(good.status).toBe(202);
    expect(good.json.status).toBe('accepted');
    const done = await settle(c, good.json.jobId);
    expect(done).toMatchObject({ state: 'completed', error: null, outputs: { derivedNamespaces: ['urn:svc:ocr'], viewKeys: [] } });
    const bad = await c.call('POST', `/v1/documents/${doc}/metadata`, { mode: 'derived', provenance, bundle: { namespaces: { 'urn:svc:entities': { schema: ocrSchema.schemaUrn, data: { text: 1 } } } } });
    await settle(c, bad.json.jobId);
    const meta = await c.call('GET', `/v1/documents/${doc}/metadata`);
    expect(meta.json.namespaces['urn:svc:ocr']).toMatchObject({ mode: 'derived', status: 'valid', data: { text: 'page one' }, provenance });
    expect(meta.json.namespaces['urn:svc:entities']).toBeUndefined();
    const withQuarantined = await c.call('GET', `/v1/documents/${doc}/metadata?includeQuarantined=true`);
    expect(withQuarantined.json.namespaces['urn:svc:entities']).toMatchObject({ mode: 'derived', status: 'quarantined' });
    // One namespace alone answers what the bundle shows for it, quarantined entries only when asked.
    const ocrAlone = await c.call('GET', `/v1/documents/${doc}/metadata/urn:svc:ocr`);
    expect(ocrAlone.status).toBe(200);
    expect(ocrAlone.json).toEqual({ namespaceUrn: 'urn:svc:ocr', entry: meta.json.namespaces['urn:svc:ocr'] });
    const entitiesAlone = await c.call('GET', `/v1/documents/${doc}/metadata/urn:svc:entities`);
    expect(entitiesAlone.status).toBe(404);
    expect(entitiesAlone.json.error).toBe('metadata_not_found');
    const quarantinedAlone = await c.call('GET', `/v1/documents/${doc}/metadata/urn:svc:entities?includeQuarantined=true`);
    expect(quarantinedAlone.status).toBe(200);
    expect(quarantinedAlone.json).toEqual({ namespaceUrn: 'urn:svc:entities', entry: withQuarantined.json.namespaces['urn:svc:entities'] });
    expect((await c.call('GET', `/v1/documents/${doc}/versions`)).json.versions).toHaveLength(1);

    const migrate = await c.call('POST', `/v1/documents/${doc}/migrate`, { namespaceUrn: 'urn:svc:case', toSchemaUrn: 'urn:svc:schema:case@2.0.0', reason: 'v2' });
    expect(migrate.status).toBe(202);
    expect((await settle(c, migrate.json.jobId)).state).toBe('completed');
    const entry = await c.call('GET', `/v1/documents/${doc}/metadata/urn:svc:case`);
    expect(entry.json.entry).toMatchObject({ schema: 'urn:svc:schema:case@2.0.0', data: { number: 'C-1', court: 'Oslo' } });
    const versions = (await c.call('GET', `/v1/documents/${doc}/versions`)).json.versions;
    expect(versions).toHaveLength(2);
    expect(versions[1].parents).toEqual([versions[0].versionId]);
    const unknown = await c.call('GET', `/v1/jobs/01a1fe6c-d9a3-7718-8ed3-a9e9cca1a5fd`);
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toBe('job_not_found');
  });

  test('kill -9 while jobs run: after the restart every job completes exactly once and no version is lost', async () => {
    const c = await client(server);
    const docs = await Promise.all(Array.from({ length: 6 }, (_, i) => newDocument(c, `K-${i}`)));
    const provenances = new Map(await Promise.all(docs.map(async (doc) => [doc, await provenanceOf(c, doc)] as const)));
    // All requested at once and the server killed as soon as they are accepted: jobs are pending or running.
    const requests = docs.flatMap((doc) => [
      c.call('POST', `/v1/documents/${doc}/migrate`, { namespaceUrn: 'urn:svc:case', toSchemaUrn: 'urn:svc:schema:case@2.0.0', reason: 'v2' }).then((r) => ({ r, doc, kind: 'migrate' as const })),
      ...Array.from({ length: 5 }, (_, k) =>
        c.call('POST', `/v1/documents/${doc}/metadata`, {
          mode: 'derived', provenance: provenances.get(doc), bundle: { namespaces: { [`urn:svc:ocr${k}`]: { schema: ocrSchema.schemaUrn, data: { text: `t${k}` } } } },
        }).then((r) => ({ r, doc, kind: 'derived' as const })),
      ),
    ]);
    const accepted = await Promise.all(requests);
    await server.kill9();
    const restartedAt = Date.now();
    for (const a of accepted) expect(a.r.status).toBe(202);
    const jobs = accepted.map((a) => ({ jobId: a.r.json.jobId as string, doc: a.doc, kind: a.kind }));
    server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'strict', SVC_JOB_CONCURRENCY: '1' }, root);
    const after = new Client(server.url, (c as any).token);
    let ranAfterRestart = 0;
    for (const job of jobs) {
      const settled = await settle(after, job.jobId);
      // Derived writes into a namespace without a schema of its own are stored as quarantined, still completed.
      expect(settled.state, `${job.kind} ${job.jobId}`).toBe('completed');
      if (Date.parse(settled.startedAt) >= restartedAt) ranAfterRestart++;
    }
    // Some jobs were still pending or running when the server was killed.
    expect(ranAfterRestart).toBeGreaterThan(0);
    for (const doc of docs) {
      const versions = (await after.call('GET', `/v1/documents/${doc}/versions`)).json.versions;
      // The finalize version and exactly one migration version.
      expect(versions).toHaveLength(2);
      const entry = (await after.call('GET', `/v1/documents/${doc}/metadata/urn:svc:case`)).json.entry;
      expect(entry.schema).toBe('urn:svc:schema:case@2.0.0');
      const meta = (await after.call('GET', `/v1/documents/${doc}/metadata?includeQuarantined=true`)).json.namespaces;
      for (let k = 0; k < 5; k++) expect(meta[`urn:svc:ocr${k}`]?.data).toEqual({ text: `t${k}` });
    }
  });
});

describe('derived data that fails validation', () => {
  test('never displaces the last valid entry of its namespace; includeQuarantined lists both, each with its status', async () => {
    const server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' });
    try {
      const c = await client(server);
      expect((await c.call('POST', '/v1/schemas', caseSchema('1.0.0', 'caseNumber'))).status).toBe(201);
      const entities = { ...ocrSchema, schemaUrn: 'urn:svc:schema:entities-notes@1.0.0', namespaceUrn: 'urn:svc:entities' };
      expect((await c.call('POST', '/v1/schemas', entities)).status).toBe(201);
      const doc = await newDocument(c, 'C-9');
      const provenance = await provenanceOf(c, doc);
      const write = async (text: unknown) => {
        const r = await c.call('POST', `/v1/documents/${doc}/metadata`, { mode: 'derived', provenance, bundle: { namespaces: { 'urn:svc:entities': { schema: entities.schemaUrn, data: { text } } } } });
        expect(r.status).toBe(202);
        return settle(c, r.json.jobId);
      };
      expect((await write('Oslo')).outputs).toEqual({ derivedNamespaces: ['urn:svc:entities'], quarantinedNamespaces: [], viewKeys: [] });
      const invalid = await write(42);
      expect(invalid).toMatchObject({ state: 'completed', outputs: { derivedNamespaces: ['urn:svc:entities'], quarantinedNamespaces: ['urn:svc:entities'] } });

      const meta = (await c.call('GET', `/v1/documents/${doc}/metadata`)).json;
      expect(meta.namespaces['urn:svc:entities']).toMatchObject({ mode: 'derived', status: 'valid', data: { text: 'Oslo' } });
      expect(meta.quarantined).toBeUndefined();
      const all = (await c.call('GET', `/v1/documents/${doc}/metadata?includeQuarantined=true`)).json;
      expect(all.namespaces['urn:svc:entities']).toMatchObject({ status: 'valid', data: { text: 'Oslo' } });
      expect(all.quarantined['urn:svc:entities']).toMatchObject({ mode: 'derived', status: 'quarantined', data: { text: 42 } });
      expect(all.quarantined['urn:svc:entities'].issues.length).toBeGreaterThan(0);

      // A later valid write replaces the valid entry; the quarantined one stays listed.
      await write('Bergen');
      const later = (await c.call('GET', `/v1/documents/${doc}/metadata?includeQuarantined=true`)).json;
      expect(later.namespaces['urn:svc:entities'].data).toEqual({ text: 'Bergen' });
      expect(later.quarantined['urn:svc:entities'].data).toEqual({ text: 42 });
    } finally {
      await server.stop();
    }
  });
});
