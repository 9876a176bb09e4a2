// Cursors with security on (issue 36, decisions §5 "Tenants cannot harm each other"): a reader
// whose permission rules hide documents pages through search and the document list and learns
// nothing of them from its cursors (every cursor it gets is decoded and searched for document
// ids); an altered cursor, another principal's (same tenant or another) and one of another query
// are 400 invalid_cursor, on every paged list. Runs on fs and pg-s3.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Api, type Reply, expectError, hsToken } from './helpers/docs-client.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const SECRET = randomBytes(32).toString('base64url');
const ALL = 'doc.create doc.read doc.write meta.read meta.write:* schema.write job.read blob.read blob.write';
const NS = 'urn:svc:cursor';
const SCHEMA = 'urn:svc:schema:cursor@1.0.0';
const HIDDEN = 25;
const VISIBLE = 3;

/** Every way a client could read a cursor: the token, and each '.'-separated part decoded as base64url and as base64. */
function readings(cursor: string): string[] {
  const out = [cursor, decodeURIComponent(cursor)];
  for (const part of [cursor, ...cursor.split('.')]) {
    for (const enc of ['base64url', 'base64'] as const) {
      const bytes = Buffer.from(part, enc);
      out.push(bytes.toString('utf8'), bytes.toString('latin1'), bytes.toString('hex'));
    }
  }
  return out;
}

/** The cursor with one byte of its decoded form flipped (each '.'-separated part decoded alike). */
function altered(cursor: string, at: 'first' | 'middle' | 'last'): string {
  const dot = cursor.lastIndexOf('.');
  const head = cursor.slice(0, dot + 1);
  const bytes = Buffer.from(cursor.slice(dot + 1), 'base64url');
  const i = at === 'first' ? 0 : at === 'last' ? bytes.length - 1 : bytes.length >> 1;
  bytes[i] = bytes[i]! ^ 0x01;
  return head + bytes.toString('base64url');
}

describe('cursors with security on', () => {
  const root = tempRoot('svc-cursors-');
  let server: TestServer;
  let writer: Api;
  let reader: Api;
  /** Same tenant, same roles, another subject: sees what reader sees, but its cursors are its own. */
  let colleague: Api;
  let stranger: Api;
  const hidden: string[] = [];
  const visible: string[] = [];
  const token = (claims: Record<string, unknown> = {}) => hsToken(SECRET, { org_id: 'acme', sub: 'writer', scope: ALL, ...claims });
  const everyId = () => [...hidden, ...visible];

  /** No document id, in any reading of any cursor of `cursors`. */
  function expectNoIds(cursors: string[]) {
    const ids = everyId().flatMap((id) => [id, id.replace(/-/g, '')]);
    for (const cursor of cursors) {
      for (const text of readings(cursor)) for (const id of ids) expect(text.includes(id), `cursor ${cursor} names ${id}`).toBe(false);
    }
  }

  /** Every page of GET `path` (with `limit`), following nextCursor: the items and every cursor met. */
  async function pages(api: Api, first: () => Promise<Reply>, next: (cursor: string) => Promise<Reply>, key: string) {
    const items: Array<{ documentId: string }> = [];
    const cursors: string[] = [];
    let r = await first();
    for (let i = 0; i < 200; i++) {
      expect(r.status, r.text).toBe(200);
      items.push(...r.json[key]);
      if (!r.json.nextCursor) return { ids: items.map((x) => x.documentId), cursors };
      cursors.push(r.json.nextCursor);
      r = await next(r.json.nextCursor);
    }
    throw new Error(`too many pages for ${api.base}`);
  }

  beforeAll(async () => {
    server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' }, root);
    writer = new Api(server.url, await token());
    reader = writer.as(await token({ sub: 'clerk-1', roles: ['clerk'] }));
    colleague = writer.as(await token({ sub: 'clerk-2', roles: ['clerk'] }));
    stranger = writer.as(await token({ org_id: 'globex', sub: 'clerk-1', roles: ['clerk'] }));
    const s = await writer.post('/v1/schemas', { schemaUrn: SCHEMA, namespaceUrn: NS, lifecycle: 'published', jsonSchema: { type: 'object' } });
    expect(s.status, s.text).toBe(201);
    // Ids fix the search's order (documentId order): the hidden documents first, so that a page
    // of limit 1 (a scan of 20 keys) meets hidden ones only; the list (newest first) meets them
    // last. Only the writer may see the hidden ones.
    const run = randomUUID().slice(0, 8);
    const idOf = (rank: number) => `${run}-0000-4000-8000-${String(rank).padStart(12, '0')}`;
    const only = { initialPermissions: { rules: [{ effect: 'allow', actions: ['*'], principals: ['user:writer'] }] } };
    const make = async (rank: number, create: Record<string, unknown>) => {
      const namespaces = { [NS]: { schema: SCHEMA, data: { k: 'x', rank } } };
      return (await writer.newDocument(new TextEncoder().encode(`doc ${rank}`), { create: { documentId: idOf(rank), initialMetadata: { namespaces }, ...create }, finalize: { labels: ['filed'] } })).documentId;
    };
    for (let i = 0; i < VISIBLE; i++) visible.push(await make(100 + i, {}));
    for (let i = 0; i < HIDDEN; i += 5) hidden.push(...(await Promise.all([1, 2, 3, 4, 5].map((j) => make(i + j, only)))));
  });
  afterAll(async () => {
    await server?.stop();
  });

  const search = (api: Api, where: Record<string, unknown>, extra: Record<string, unknown> = {}) => api.post('/v1/documents/search', { namespaceUrn: NS, where, ...extra });

  test('search: the reader gets exactly the documents it may see, and no cursor names any document', async () => {
    // A page of limit 1 scans 20 keys: the first meets hidden documents alone, empty, and goes on
    // after the last one it scanned (the cursor that named a hidden document in clear).
    const empty = await search(reader, { '/k': 'x' }, { limit: 1 });
    expect([empty.status, empty.json.documents, typeof empty.json.nextCursor]).toEqual([200, [], 'string']);
    for (const limit of [1, 2, 10]) {
      const where = { '/k': 'x' };
      const got = await pages(reader, () => search(reader, where, { limit }), (cursor) => search(reader, where, { limit, cursor }), 'documents');
      expect(got.ids).toEqual([...visible].sort());
      if (limit === 1) expect(got.cursors.length).toBe(VISIBLE);
      expectNoIds(got.cursors);
    }
    // The writer sees them all; its cursors name none either.
    const all = await pages(writer, () => search(writer, {}, { limit: 4 }), (cursor) => search(writer, {}, { limit: 4, cursor }), 'documents');
    expect(all.ids).toEqual(everyId().sort());
    expectNoIds(all.cursors);
  });

  test('search: an altered cursor, another principal\'s and another query\'s are 400 invalid_cursor', async () => {
    const where = { '/k': 'x' };
    const first = await search(reader, where, { limit: 1 });
    expect(first.status, first.text).toBe(200);
    const cursor = first.json.nextCursor as string;
    expect(cursor).toEqual(expect.any(String));
    // It goes on for its own principal, whatever the page size.
    expect((await search(reader, where, { limit: 5, cursor })).status).toBe(200);
    for (const at of ['first', 'middle', 'last'] as const) expectError(await search(reader, where, { limit: 1, cursor: altered(cursor, at) }), 400, 'invalid_cursor');
    for (const other of [colleague, stranger, writer]) expectError(await search(other, where, { limit: 1, cursor }), 400, 'invalid_cursor');
    expectError(await search(reader, { '/k': 'y' }, { limit: 1, cursor }), 400, 'invalid_cursor');
    expectError(await search(reader, {}, { limit: 1, cursor }), 400, 'invalid_cursor');
    expectError(await search(reader, where, { limit: 1, cursor, mode: 'derived' }), 400, 'invalid_cursor');
    for (const forged of ['nonsense', 'srch1.WyJ4Il0', '!!!', 'A'.repeat(20_000), '']) expectError(await search(reader, where, { cursor: forged }), 400, 'invalid_cursor');
  });

  test('the document list: exactly the visible documents, no cursor names any, foreign and altered cursors refused', async () => {
    const list = (api: Api, query: string, cursor?: string) => api.get(`/v1/documents?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    for (const limit of [1, 2]) {
      const got = await pages(reader, () => list(reader, `limit=${limit}`), (c) => list(reader, `limit=${limit}`, c), 'documents');
      expect(got.ids).toEqual([...visible].reverse());
      expect(got.cursors.length).toBeGreaterThan(0);
      expectNoIds(got.cursors);
      const filed = await pages(reader, () => list(reader, `label=filed&limit=${limit}`), (c) => list(reader, `label=filed&limit=${limit}`, c), 'documents');
      expect(filed.ids).toEqual([...visible].reverse());
      expectNoIds(filed.cursors);
    }
    const first = await list(writer, 'limit=1');
    const cursor = first.json.nextCursor as string;
    expect((await list(writer, 'limit=3', cursor)).status).toBe(200);
    for (const at of ['first', 'middle', 'last'] as const) expectError(await list(writer, 'limit=1', altered(cursor, at)), 400, 'invalid_cursor');
    for (const other of [reader, colleague, stranger]) expectError(await list(other, 'limit=1', cursor), 400, 'invalid_cursor');
    expectError(await list(writer, 'label=filed&limit=1', cursor), 400, 'invalid_cursor');
    expectError(await list(writer, 'limit=1', 'nonsense'), 400, 'invalid_cursor');
  });

  test('schemas and jobs: foreign and altered cursors refused', async () => {
    expect((await writer.post('/v1/schemas', { schemaUrn: 'urn:svc:schema:cursor@1.1.0', namespaceUrn: NS, lifecycle: 'published', jsonSchema: { type: 'object' } })).status).toBe(201);
    const schemas = await writer.get('/v1/schemas?limit=1');
    const cursor = schemas.json.nextCursor as string;
    expect(cursor).toEqual(expect.any(String));
    expect((await writer.get(`/v1/schemas?limit=1&cursor=${encodeURIComponent(cursor)}`)).status).toBe(200);
    expectError(await writer.get(`/v1/schemas?limit=1&cursor=${encodeURIComponent(altered(cursor, 'middle'))}`), 400, 'invalid_cursor');
    expectError(await reader.get(`/v1/schemas?limit=1&cursor=${encodeURIComponent(cursor)}`), 400, 'invalid_cursor');
    expectError(await writer.get(`/v1/schemas?limit=1&namespaceUrn=${encodeURIComponent(NS)}&cursor=${encodeURIComponent(cursor)}`), 400, 'invalid_cursor');
    // Jobs: two derived writes make two jobs.
    for (const id of visible.slice(0, 2)) {
      const key = (await writer.get(`/v1/documents/${id}/versions`)).json.versions[0].contentRef.key as string;
      const r = await writer.post(`/v1/documents/${id}/metadata`, { mode: 'derived', provenance: { producer: { name: 'p', version: '1' }, producedAt: '2026-12-01T00:00:00Z', input: { kind: 'blob', key } }, bundle: { namespaces: { [NS]: { schema: SCHEMA, data: { k: 'derived' } } } } });
      expect(r.status, r.text).toBe(202);
      await writer.settled(r.json.jobId);
    }
    const jobs = await writer.get('/v1/jobs?limit=1');
    const jobCursor = jobs.json.nextCursor as string;
    expect(jobCursor).toEqual(expect.any(String));
    expect((await writer.get(`/v1/jobs?limit=1&cursor=${encodeURIComponent(jobCursor)}`)).status).toBe(200);
    expectError(await writer.get(`/v1/jobs?limit=1&cursor=${encodeURIComponent(altered(jobCursor, 'first'))}`), 400, 'invalid_cursor');
    expectError(await colleague.get(`/v1/jobs?limit=1&cursor=${encodeURIComponent(jobCursor)}`), 400, 'invalid_cursor');
    expectError(await writer.get(`/v1/jobs?limit=1&state=completed&cursor=${encodeURIComponent(jobCursor)}`), 400, 'invalid_cursor');
  });

  test('the blob inventory and a blob\'s blocks: no blob id in the cursor; foreign and altered cursors refused', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { Authorization: `Bearer ${writer.token}` }, body: new Uint8Array(randomBytes(1000 + i)) });
      expect(r.status).toBe(201);
      ids.push(((await r.json()) as { blob: { id: string } }).blob.id);
    }
    const get = async (api: Api, path: string) => {
      const r = await fetch(`${server.url}${path}`, { headers: { Authorization: `Bearer ${api.token}` } });
      return { status: r.status, json: (await r.json()) as any };
    };
    const first = await get(writer, '/api/v1/blobs?limit=1');
    expect(first.status).toBe(200);
    const cursor = first.json.nextCursor as string;
    const hexes = ids.map((id) => id.split(':')[1]!);
    for (const text of readings(cursor)) for (const hex of hexes) expect(text.includes(hex)).toBe(false);
    const second = await get(writer, `/api/v1/blobs?limit=5&cursor=${encodeURIComponent(cursor)}`);
    expect([second.status, second.json.blobs.length]).toEqual([200, 2]);
    for (const at of ['first', 'middle', 'last'] as const) {
      const r = await get(writer, `/api/v1/blobs?limit=1&cursor=${encodeURIComponent(altered(cursor, at))}`);
      expect([r.status, r.json.error]).toEqual([400, 'invalid_cursor']);
    }
    for (const other of [colleague, stranger]) {
      const r = await get(other, `/api/v1/blobs?limit=1&cursor=${encodeURIComponent(cursor)}`);
      expect([r.status, r.json.error]).toEqual([400, 'invalid_cursor']);
    }
    // A blob of several blocks: its block pages' cursors are bound to the blob and the caller.
    const big = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { Authorization: `Bearer ${writer.token}` }, body: new Uint8Array(randomBytes(9 * 1024 * 1024)) });
    const blob = ((await big.json()) as { blob: { id: string; blockCount: number } }).blob;
    expect(blob.blockCount).toBeGreaterThan(1);
    const blocks = await get(writer, `/api/v1/blobs/${blob.id}/metadata?limit=1`);
    const blockCursor = blocks.json.nextCursor as string;
    expect((await get(writer, `/api/v1/blobs/${blob.id}/metadata?limit=1&cursor=${encodeURIComponent(blockCursor)}`)).status).toBe(200);
    const wrong = await get(writer, `/api/v1/blobs/${blob.id}/metadata?limit=1&cursor=${encodeURIComponent(altered(blockCursor, 'middle'))}`);
    expect([wrong.status, wrong.json.error]).toEqual([400, 'invalid_cursor']);
    const foreign = await get(colleague, `/api/v1/blobs/${blob.id}/metadata?limit=1&cursor=${encodeURIComponent(blockCursor)}`);
    expect([foreign.status, foreign.json.error]).toEqual([400, 'invalid_cursor']);
    const elsewhere = await get(writer, `/api/v1/blobs/${ids[0]}/metadata?limit=1&cursor=${encodeURIComponent(blockCursor)}`);
    expect([elsewhere.status, elsewhere.json.error]).toEqual([400, 'invalid_cursor']);
  });

  test('cursors survive a restart (the key is kept in the catalog)', async () => {
    const where = { '/k': 'x' };
    const first = await search(reader, where, { limit: 1 });
    const cursor = first.json.nextCursor as string;
    const list = await writer.get('/v1/documents?limit=1');
    await server.stop();
    server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' }, root);
    writer = new Api(server.url, writer.token);
    reader = new Api(server.url, reader.token);
    const again = await search(reader, where, { limit: 10, cursor });
    expect(again.status, again.text).toBe(200);
    expect((await writer.get(`/v1/documents?limit=1&cursor=${encodeURIComponent(list.json.nextCursor)}`)).status).toBe(200);
  });
});
