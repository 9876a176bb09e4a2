// Lists of the document platform: documents (by label, external reference, creation time),
// schemas (by namespace) and jobs (by document and state), paged with an opaque cursor, each
// tenant seeing its own.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkedFetch as fetch } from './helpers/http.js';
import { type TestServer, startServer } from './helpers/server.js';

const SECRET = 'docs-lists-test-secret-0123456789abcdef';

interface Reply {
  status: number;
  json: any;
}

class Client {
  constructor(
    private readonly base: string,
    private readonly token: string,
  ) {}

  async call(method: string, path: string, body?: unknown): Promise<Reply> {
    const res = await fetch(this.base + path, {
      method,
      headers: { Authorization: `Bearer ${this.token}` },
      body: body === undefined ? undefined : body instanceof Uint8Array ? (body as Uint8Array<ArrayBuffer>) : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  }

  /** Every page of a list, following nextCursor. */
  async all(path: string, key: string, limit: number): Promise<{ items: any[]; pages: number[] }> {
    const items: any[] = [];
    const pages: number[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 50; i++) {
      const sep = path.includes('?') ? '&' : '?';
      const r = await this.call('GET', `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(r.status).toBe(200);
      items.push(...r.json[key]);
      pages.push(r.json[key].length);
      cursor = r.json.nextCursor;
      if (!cursor) return { items, pages };
    }
    throw new Error('too many pages');
  }
}

async function client(server: TestServer, org: string): Promise<Client> {
  const res = await fetch(`${server.url}/dev/token`, { method: 'POST', body: JSON.stringify({ org_id: org, sub: 'lister' }) });
  return new Client(server.url, ((await res.json()) as any).access_token);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('lists of the document platform', () => {
  let server: TestServer;
  let acme: Client;
  let other: Client;
  const ids: string[] = [];
  const times: number[] = [];

  beforeAll(async () => {
    server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' });
    acme = await client(server, 'acme');
    other = await client(server, 'other');
    for (const s of ['case', 'note']) {
      expect((await acme.call('POST', '/v1/schemas', { schemaUrn: `urn:svc:schema:${s}@1.0.0`, namespaceUrn: `urn:svc:${s}`, lifecycle: 'published', jsonSchema: { type: 'object' } })).status).toBe(201);
    }
    expect((await acme.call('POST', '/v1/schemas', { schemaUrn: 'urn:svc:schema:case@2.0.0', namespaceUrn: 'urn:svc:case', lifecycle: 'draft', jsonSchema: { type: 'object' } })).status).toBe(201);
    // Five documents, a few ms apart: 0, 2 and 4 labelled "filed"; 1 and 3 referenced by the court.
    for (let i = 0; i < 5; i++) {
      const created = await acme.call('POST', '/v1/documents', { externalRefs: i % 2 ? [{ system: 'court', value: `C-${i}` }, { system: 'crm', value: 'shared' }] : [{ system: 'crm', value: 'shared' }] });
      expect(created.status).toBe(201);
      ids.push(created.json.documentId);
      times.push(Date.parse((await acme.call('GET', `/v1/documents/${created.json.documentId}`)).json.createdAt));
      expect((await acme.call('PUT', `/v1/uploads/${created.json.uploadId}/bytes`, new TextEncoder().encode(`doc ${i}`))).status).toBe(204);
      expect((await acme.call('POST', `/v1/uploads/${created.json.uploadId}/finalize`, { labels: i % 2 ? [] : ['filed'], reason: 'test' })).status).toBe(201);
      await sleep(5);
    }
    expect((await other.call('POST', '/v1/documents', {})).status).toBe(201);
  });
  afterAll(() => server.stop());

  test('documents: newest first, paged exactly, each as GET /v1/documents/{id} shows it', async () => {
    const { items, pages } = await acme.all('/v1/documents', 'documents', 2);
    expect(pages).toEqual([2, 2, 1]);
    expect(items.map((d) => d.documentId)).toEqual([...ids].reverse());
    expect(items[0]).toEqual((await acme.call('GET', `/v1/documents/${ids[4]}`)).json);
  });

  test('documents by label, external reference and creation time, and the filters together', async () => {
    const ids$ = (r: { items: any[] }) => r.items.map((d) => d.documentId);
    expect(ids$(await acme.all('/v1/documents?label=filed', 'documents', 2))).toEqual([ids[4], ids[2], ids[0]]);
    expect(ids$(await acme.all('/v1/documents?externalRef=court:C-3', 'documents', 10))).toEqual([ids[3]]);
    expect(ids$(await acme.all('/v1/documents?externalRef=crm:shared', 'documents', 1))).toEqual([...ids].reverse());
    const between = `createdAfter=${new Date(times[0]!).toISOString()}&createdBefore=${new Date(times[4]!).toISOString()}`;
    expect(ids$(await acme.all(`/v1/documents?${between}`, 'documents', 2))).toEqual([ids[3], ids[2], ids[1]]);
    expect(ids$(await acme.all(`/v1/documents?label=filed&${between}`, 'documents', 2))).toEqual([ids[2]]);
    expect(ids$(await acme.all('/v1/documents?label=filed&externalRef=crm:shared', 'documents', 2))).toEqual([ids[4], ids[2], ids[0]]);
    expect(ids$(await acme.all('/v1/documents?label=nothing', 'documents', 2))).toEqual([]);
  });

  test("each tenant sees its own documents and jobs", async () => {
    const mine = await other.call('GET', '/v1/documents');
    expect(mine.json.documents).toHaveLength(1);
    expect(ids).not.toContain(mine.json.documents[0].documentId);
    expect((await other.call('GET', '/v1/jobs')).json).toEqual({ jobs: [] });
  });

  test('schemas by namespace, in URN order', async () => {
    // With the workflows' schemas, registered at start (workflows.md).
    const all = await acme.all('/v1/schemas', 'schemas', 2);
    expect(all.items.map((s) => s.schemaUrn)).toEqual(['urn:svc:schema:case@1.0.0', 'urn:svc:schema:case@2.0.0', 'urn:svc:schema:entities@1.0.0', 'urn:svc:schema:note@1.0.0', 'urn:svc:schema:ocr@1.0.0']);
    expect(all.pages).toEqual([2, 2, 1]);
    const cases = await acme.all('/v1/schemas?namespaceUrn=urn:svc:case', 'schemas', 10);
    expect(cases.items.map((s) => s.schemaUrn)).toEqual(['urn:svc:schema:case@1.0.0', 'urn:svc:schema:case@2.0.0']);
    expect(cases.items[0]).toEqual((await acme.call('GET', `/v1/schemas/${encodeURIComponent('urn:svc:schema:case@1.0.0')}`)).json);
  });

  test('jobs by document and state, newest first', async () => {
    const provenance = { producer: { name: 't', version: '1' }, producedAt: '2026-11-21T10:00:00Z', input: { kind: 'blob', key: 'b3:00' } };
    const jobIds: string[] = [];
    for (const doc of [ids[0], ids[1], ids[1]]) {
      // The provenance names the document's content (anything else is 422 provenance_input_unknown).
      const key = (await acme.call('GET', `/v1/documents/${doc}/versions`)).json.versions[0].contentRef.key as string;
      const r = await acme.call('POST', `/v1/documents/${doc}/metadata`, { mode: 'derived', provenance: { ...provenance, input: { kind: 'blob', key } }, bundle: { namespaces: { 'urn:svc:note': { schema: 'urn:svc:schema:note@1.0.0', data: { n: 1 } } } } });
      expect(r.status).toBe(202);
      jobIds.push(r.json.jobId);
    }
    for (let i = 0; i < 100; i++) {
      const states = await Promise.all(jobIds.map(async (j) => (await acme.call('GET', `/v1/jobs/${j}`)).json.state));
      if (states.every((s) => s === 'completed')) break;
      await sleep(50);
    }
    const all = await acme.all('/v1/jobs', 'jobs', 2);
    expect(all.items.map((j) => j.jobId)).toEqual([...jobIds].reverse());
    expect(all.items[0]).toEqual((await acme.call('GET', `/v1/jobs/${jobIds[2]}`)).json);
    expect((await acme.all(`/v1/jobs?documentId=${ids[1]}`, 'jobs', 1)).items.map((j) => j.jobId)).toEqual([jobIds[2], jobIds[1]]);
    expect((await acme.all(`/v1/jobs?documentId=${ids[1]}&state=completed`, 'jobs', 5)).items).toHaveLength(2);
    expect((await acme.all('/v1/jobs?state=failed', 'jobs', 5)).items).toEqual([]);
  });

  test('bad limits, cursors, filters and parameters are 400 in the envelope', async () => {
    for (const [path, code] of [
      ['/v1/documents?limit=0', 'invalid_pagination'],
      ['/v1/documents?limit=abc', 'invalid_pagination'],
      ['/v1/documents?cursor=nonsense', 'invalid_cursor'],
      ['/v1/jobs?cursor=doc1.WyJ0Il0', 'invalid_cursor'],
      ['/v1/documents?createdAfter=yesterday', 'invalid_request'],
      ['/v1/documents?externalRef=court', 'invalid_request'],
      ['/v1/documents?sort=asc', 'invalid_request'],
      ['/v1/jobs?state=sleeping', 'invalid_request'],
      ['/v1/jobs?documentId=42', 'invalid_request'],
      ['/v1/schemas?cursor=sch1.%%%', 'invalid_cursor'],
    ] as const) {
      const r = await acme.call('GET', path);
      expect([path, r.status, r.json.error]).toEqual([path, 400, code]);
    }
    // A cursor of one filter does not continue another.
    const page = await acme.call('GET', '/v1/documents?label=filed&limit=1');
    const wrong = await acme.call('GET', `/v1/documents?limit=1&cursor=${encodeURIComponent(page.json.nextCursor)}`);
    expect([wrong.status, wrong.json.error]).toEqual([400, 'invalid_cursor']);
    expect((await fetch(`${server.url}/v1/documents`)).status).toBe(401);
  });
});
