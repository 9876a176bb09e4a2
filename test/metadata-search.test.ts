// POST /v1/documents/search over HTTP: equality of JSON pointers on a namespace's current entry
// (canonical, or the valid derived one), strictly typed, ANDed, paged by an opaque cursor in
// documentId order; the index follows writes, patches, migrations and derived entries; tenants,
// capabilities and permission rules; every refusal in the envelope; the backfill of a catalog
// whose index is missing (its table emptied while the server is down), and the index module on
// an LMDB unit store directly. Runs on fs and pg-s3.
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CatalogEnv, LmdbUnitStore, type Unit, table } from '../dist/engine/store/index.js';
import { openPool } from '../dist/engine/store/pg/pool.js';
import { MAX_LEAVES, MetadataIndex, leaves } from '../dist/engine/documents/metadata-index.js';
import { parseSearchRequest } from '../dist/server/commands/documents.js';
import { CursorSeal } from '../dist/engine/auth/cursor-seal.js';
import { Api, expectError, hsToken } from './helpers/docs-client.js';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const SECRET = `search-test-secret-${randomUUID()}`;
const ALL = 'doc.create doc.read doc.write meta.read meta.write:* meta.patch:* schema.write migration.write job.read';
const CASE = 'urn:svc:case';
const OCR = 'urn:svc:notes';
const MIG = 'urn:svc:mig';
const PAGE = 'urn:svc:page';
const PERM = 'urn:svc:perm';
const provenanceBase = { producer: { name: 'ocr', version: '1' }, producedAt: '2026-11-21T10:00:00Z' };
/** A derived write's provenance naming the document's content (anything else is 422 provenance_input_unknown). */
async function provenanceOf(api: Api, documentId: string) {
  const key = (await api.get(`/v1/documents/${documentId}/versions`)).json.versions[0].contentRef.key as string;
  return { ...provenanceBase, input: { kind: 'blob', key } };
}

const schema = (ns: string, urn: string, jsonSchema: Record<string, unknown>) => ({ schemaUrn: urn, namespaceUrn: ns, lifecycle: 'published', jsonSchema });
const open = { type: 'object' };

const sorted = (ids: string[]) => [...ids].sort();

describe('metadata search', () => {
  const root = tempRoot('svc-search-');
  let server: TestServer;
  let acme: Api;
  let other: Api;
  /** d1..d4 of namespace case (d4 has none). */
  const d: string[] = [];

  const token = (claims: Record<string, unknown> = {}) => hsToken(SECRET, { org_id: 'acme', sub: 'searcher', scope: ALL, ...claims });
  const search = (api: Api, body: unknown) => api.post('/v1/documents/search', body);
  /** The ids of one answer (200 expected). */
  async function ids(api: Api, body: Record<string, unknown>): Promise<string[]> {
    const r = await search(api, body);
    expect(r.status, r.text).toBe(200);
    expect(Object.keys(r.json).sort()).toEqual(['documents']);
    return r.json.documents.map((x: { documentId: string }) => x.documentId);
  }
  /** Every page of a search, following nextCursor; the ids and the page sizes. */
  async function all(api: Api, body: Record<string, unknown>): Promise<{ ids: string[]; pages: number[] }> {
    const out: string[] = [];
    const pages: number[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 200; i++) {
      const r = await search(api, cursor ? { ...body, cursor } : body);
      expect(r.status, r.text).toBe(200);
      out.push(...r.json.documents.map((x: { documentId: string }) => x.documentId));
      pages.push(r.json.documents.length);
      cursor = r.json.nextCursor;
      if (!cursor) return { ids: out, pages };
    }
    throw new Error('too many pages');
  }
  async function newDoc(api: Api, namespaces: Record<string, unknown> = {}, create: Record<string, unknown> = {}): Promise<string> {
    const { documentId } = await api.newDocument(new TextEncoder().encode(randomUUID()), { create: { ...(Object.keys(namespaces).length ? { initialMetadata: { namespaces } } : {}), ...create } });
    return documentId;
  }
  const entry = (schemaUrn: string, data: unknown) => ({ schema: schemaUrn, data });

  beforeAll(async () => {
    server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' }, root);
    acme = new Api(server.url, await token());
    other = new Api(server.url, await token({ org_id: 'other' }));
    for (const api of [acme, other]) {
      for (const s of [
        schema(CASE, 'urn:svc:schema:case@1.0.0', open),
        schema(OCR, 'urn:svc:schema:notes@1.0.0', { type: 'object', required: ['text'], properties: { text: { type: 'string' } } }),
        schema(MIG, 'urn:svc:schema:mig@1.0.0', { type: 'object', required: ['code'], additionalProperties: false, properties: { code: { type: 'string' }, court: { type: 'string' } } }),
        schema(MIG, 'urn:svc:schema:mig@2.0.0', { type: 'object', required: ['ref'], additionalProperties: false, properties: { ref: { type: 'string' }, court: { type: 'string' } } }),
        schema(PAGE, 'urn:svc:schema:page@1.0.0', open),
        schema(PERM, 'urn:svc:schema:perm@1.0.0', open),
      ]) {
        const r = await api.post('/v1/schemas', s);
        expect([200, 201], r.text).toContain(r.status);
      }
    }
    const c = (data: unknown) => ({ [CASE]: entry('urn:svc:schema:case@1.0.0', data) });
    d.push(await newDoc(acme, c({ status: 'open', n: 1, flag: true, court: { city: 'Oslo' }, tags: ['civil', 'urgent'], none: null })));
    d.push(await newDoc(acme, c({ status: 'open', n: '1', flag: 'true', court: { city: 'Bergen' }, tags: ['urgent'] })));
    d.push(await newDoc(acme, c({ status: 'closed', n: 2, flag: false, 'a/b': 'slash', 'x~y': 'tilde', long: 'L'.repeat(300), '': 'empty key' })));
    d.push(await newDoc(acme));
    // Another tenant's document with the same entry.
    await newDoc(other, c({ status: 'open', n: 1 }));
  });
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  test('strings, numbers and booleans, strictly typed; the answer is the document as GET shows it', async () => {
    const r = await search(acme, { namespaceUrn: CASE, where: { '/status': 'open' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(r.json).toEqual({ documents: [(await acme.get(`/v1/documents/${d[0]}`)).json, (await acme.get(`/v1/documents/${d[1]}`)).json].sort((a, b) => (a.documentId < b.documentId ? -1 : 1)) });
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/status': 'closed' } })).toEqual([d[2]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/status': 'Open' } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/n': 1 } })).toEqual([d[0]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/n': 1.0 } })).toEqual([d[0]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/n': '1' } })).toEqual([d[1]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/n': 2 } })).toEqual([d[2]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/flag': true } })).toEqual([d[0]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/flag': 'true' } })).toEqual([d[1]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/flag': false } })).toEqual([d[2]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/flag': 0 } })).toEqual([]);
    // Another namespace, or a mode without entries, finds nothing.
    expect(await ids(acme, { namespaceUrn: OCR, where: { '/status': 'open' } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: CASE, mode: 'derived', where: { '/status': 'open' } })).toEqual([]);
  });

  test('nested pointers, array elements, escaped keys, long values; AND of several pointers; empty where', async () => {
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/court/city': 'Oslo' } })).toEqual([d[0]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/court': 'Oslo' } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/tags/1': 'urgent' } })).toEqual([d[0]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/tags/0': 'urgent' } })).toEqual([d[1]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/a~1b': 'slash' } })).toEqual([d[2]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/x~0y': 'tilde' } })).toEqual([d[2]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/': 'empty key' } })).toEqual([d[2]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/long': 'L'.repeat(300) } })).toEqual([d[2]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/long': 'L'.repeat(299) } })).toEqual([]);
    // null is not a value a search can ask for; the whole data ("") is never a scalar.
    expect(await ids(acme, { namespaceUrn: CASE, where: { '': 'open' } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/status': 'open', '/court/city': 'Bergen' } })).toEqual([d[1]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/court/city': 'Bergen', '/status': 'open', '/tags/0': 'urgent' } })).toEqual([d[1]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/status': 'open', '/n': 2 } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: CASE, where: {} })).toEqual(sorted([d[0]!, d[1]!, d[2]!]));
  });

  test('canonical writes, patches and migrations move a document from the old value to the new', async () => {
    const c = (data: unknown) => ({ [CASE]: entry('urn:svc:schema:case@1.0.0', data) });
    const w = await acme.writeCanonical(d[3]!, c({ status: 'open', n: 7 }));
    expect(w.status, w.text).toBe(201);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/status': 'open' } })).toEqual(sorted([d[0]!, d[1]!, d[3]!]));
    // A replacing write: status changes, n stays, city goes.
    expect((await acme.writeCanonical(d[1]!, c({ status: 'closed', n: '1' }))).status).toBe(201);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/status': 'open' } })).toEqual(sorted([d[0]!, d[3]!]));
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/status': 'closed' } })).toEqual(sorted([d[1]!, d[2]!]));
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/n': '1' } })).toEqual([d[1]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/court/city': 'Bergen' } })).toEqual([]);
    // A patch of one field.
    const meta = await acme.get(`/v1/documents/${d[0]}/metadata/${CASE}`);
    const p = await acme.patch(d[0]!, CASE, { baseMetadataId: meta.json.entry.id, patch: [{ op: 'replace', path: '/data/court/city', value: 'Trondheim' }, { op: 'remove', path: '/data/tags/1' }] });
    expect(p.status, p.text).toBe(200);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/court/city': 'Oslo' } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/court/city': 'Trondheim' } })).toEqual([d[0]]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/tags/1': 'urgent' } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/tags/0': 'civil', '/status': 'open' } })).toEqual([d[0]]);

    // A migration to another schema version: the entry's new data is what is searched.
    const migration = {
      fromSchemaUrn: 'urn:svc:schema:mig@1.0.0', toSchemaUrn: 'urn:svc:schema:mig@2.0.0',
      forward: { type: 'jsonpatch', ops: [{ op: 'move', from: '/code', path: '/ref' }] },
      inverse: { type: 'jsonpatch', ops: [{ op: 'move', from: '/ref', path: '/code' }] },
    };
    expect([200, 201]).toContain((await acme.post('/v1/migrations', migration)).status);
    const m = await newDoc(acme, { [MIG]: entry('urn:svc:schema:mig@1.0.0', { code: 'K-1', court: 'Oslo' }) });
    expect(await ids(acme, { namespaceUrn: MIG, where: { '/code': 'K-1' } })).toEqual([m]);
    const job = await acme.post(`/v1/documents/${m}/migrate`, { namespaceUrn: MIG, toSchemaUrn: 'urn:svc:schema:mig@2.0.0', reason: 'v2' });
    expect(job.status, job.text).toBe(202);
    expect((await acme.settled(job.json.jobId)).json.state).toBe('completed');
    expect(await ids(acme, { namespaceUrn: MIG, where: { '/code': 'K-1' } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: MIG, where: { '/ref': 'K-1', '/court': 'Oslo' } })).toEqual([m]);
  });

  test('mode derived: the valid derived entry is searched, a quarantined one never', async () => {
    const derive = async (documentId: string, data: unknown) => {
      const r = await acme.post(`/v1/documents/${documentId}/metadata`, { mode: 'derived', provenance: await provenanceOf(acme, documentId), bundle: { namespaces: { [OCR]: entry('urn:svc:schema:notes@1.0.0', data) } } });
      expect(r.status, r.text).toBe(202);
      return (await acme.settled(r.json.jobId)).json;
    };
    await derive(d[0]!, { text: 'page one' });
    expect((await derive(d[1]!, { text: 1 })).outputs.quarantinedNamespaces).toEqual([OCR]);
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: { '/text': 'page one' } })).toEqual([d[0]]);
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: { '/text': 1 } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: {} })).toEqual([d[0]]);
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'canonical', where: { '/text': 'page one' } })).toEqual([]);
    // A later valid entry replaces it; a later quarantined one does not.
    await derive(d[0]!, { text: 'page two' });
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: { '/text': 'page one' } })).toEqual([]);
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: { '/text': 'page two' } })).toEqual([d[0]]);
    await derive(d[0]!, { text: 5 });
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: { '/text': 'page two' } })).toEqual([d[0]]);
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: { '/text': 5 } })).toEqual([]);
  });

  test('entries with more scalars than the index keeps per entry are read and checked, canonical and derived', async () => {
    const many = Array.from({ length: 3000 }, (_, i) => `id-${i}`);
    const big = await newDoc(acme, { [CASE]: entry('urn:svc:schema:case@1.0.0', { status: 'bulky', ids: many }) });
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/ids/2999': 'id-2999' } })).toEqual([big]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/status': 'bulky', '/ids/0': 'id-0' } })).toEqual([big]);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/ids/2999': 'id-0' } })).toEqual([]);
    const r = await acme.post(`/v1/documents/${big}/metadata`, { mode: 'derived', provenance: await provenanceOf(acme, big), bundle: { namespaces: { [OCR]: entry('urn:svc:schema:notes@1.0.0', { text: 'long', words: many }) } } });
    expect((await acme.settled(r.json.jobId)).json.state).toBe('completed');
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: { '/words/17': 'id-17', '/text': 'long' } })).toEqual([big]);
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'canonical', where: { '/words/17': 'id-17' } })).toEqual([]);
  });

  test('pages: every match once, in documentId order, a page cut short by the scan budget still goes on', async () => {
    const made: Array<{ id: string; i: number }> = [];
    const indexes = Array.from({ length: 45 }, (_, i) => i);
    // Ids fix the order (documentId order is the search's): the two rare documents sort first and
    // last of bucket a's 23, 22 keys apart, more than a page of limit 1 scans (20), so one page
    // between them is cut short empty and the search goes on. Random ids made that a matter of chance.
    const run = randomUUID().slice(0, 8);
    const rank = (i: number) => (i === 6 ? 0 : i === 40 ? 99 : i + 1);
    const idOf = (i: number) => `${run}-0000-4000-8000-${String(rank(i)).padStart(12, '0')}`;
    while (indexes.length > 0) {
      const batch = indexes.splice(0, 8);
      made.push(...(await Promise.all(batch.map(async (i) => ({ i, id: await newDoc(acme, { [PAGE]: entry('urn:svc:schema:page@1.0.0', { bucket: i % 2 ? 'b' : 'a', i, ...(i === 6 || i === 40 ? { rare: true } : {}) }) }, { documentId: idOf(i) }) })))));
    }
    const bucketA = sorted(made.filter((m) => m.i % 2 === 0).map((m) => m.id));
    const a = await all(acme, { namespaceUrn: PAGE, where: { '/bucket': 'a' }, limit: 5 });
    expect(a.ids).toEqual(bucketA);
    expect(a.pages).toEqual([5, 5, 5, 5, 3]);
    const every = await all(acme, { namespaceUrn: PAGE, where: {}, limit: 7 });
    expect(every.ids).toEqual(sorted(made.map((m) => m.id)));
    expect(new Set(every.ids).size).toBe(45);
    // limit 1: at most 20 keys of bucket a are scanned per page, so some pages are empty and go on.
    const rare = await all(acme, { namespaceUrn: PAGE, where: { '/bucket': 'a', '/rare': true }, limit: 1 });
    expect(rare.ids).toEqual(sorted(made.filter((m) => m.i === 6 || m.i === 40).map((m) => m.id)));
    expect(rare.pages.slice(0, 3)).toEqual([1, 0, 1]);
    // The default page is 100.
    expect((await ids(acme, { namespaceUrn: PAGE, where: {} })).length).toBe(45);
    // A cursor goes on with the same query whatever the order of its pointers.
    const first = await search(acme, { namespaceUrn: PAGE, where: { '/bucket': 'a', '/rare': true }, limit: 1 });
    const swapped = await search(acme, { namespaceUrn: PAGE, where: { '/rare': true, '/bucket': 'a' }, limit: 100, cursor: first.json.nextCursor });
    expect(swapped.status, swapped.text).toBe(200);
  });

  test('each tenant searches its own documents', async () => {
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/n': 1 } })).toEqual([d[0]]);
    const theirs = await ids(other, { namespaceUrn: CASE, where: { '/n': 1 } });
    expect(theirs).toHaveLength(1);
    expect(d).not.toContain(theirs[0]);
    expect(await ids(other, { namespaceUrn: CASE, where: { '/status': 'closed' } })).toEqual([]);
  });

  test('doc.read and meta.read: capabilities, and documents whose rules deny either are left out', async () => {
    const writer = acme.as(await token({ sub: 'writer' }));
    const mine = { effect: 'allow', actions: ['*'], principals: ['user:writer'] };
    const p = (rules: unknown[]) => newDoc(writer, { [PERM]: entry('urn:svc:schema:perm@1.0.0', { k: 'x' }) }, { initialPermissions: { rules: [mine, ...rules] } });
    const readOnly = await p([{ effect: 'allow', actions: ['doc.read'], principals: ['role:clerk'] }]);
    const both = await p([{ effect: 'allow', actions: ['doc.read', 'meta.read'], principals: ['role:clerk'] }]);
    const open = await newDoc(writer, { [PERM]: entry('urn:svc:schema:perm@1.0.0', { k: 'x' }) });
    const denied = await p([{ effect: 'allow', actions: ['*'], principals: ['role:clerk'] }, { effect: 'deny', actions: ['meta.*'], principals: ['role:clerk'] }]);
    const clerk = acme.as(await token({ sub: 'clerk-1', roles: ['clerk'] }));
    const where = { namespaceUrn: PERM, where: { '/k': 'x' } };
    expect(await ids(clerk, where)).toEqual(sorted([both, open]));
    expect(await ids(writer, where)).toEqual(sorted([readOnly, both, open, denied]));
    expect(await ids(acme, where)).toEqual([open]);
    expectError(await search(acme.as(await token({ scope: 'doc.read' })), where), 403, 'forbidden');
    expectError(await search(acme.as(await token({ scope: 'meta.read' })), where), 403, 'forbidden');
    expect(await ids(acme.as(await token({ scope: 'doc.read meta.read' })), where)).toEqual([open]);
    expectError(await search(acme.as(undefined), where), 401, 'unauthenticated');
  });

  test('bad bodies are 400 invalid_request, bad limits 400 invalid_pagination, bad cursors 400 invalid_cursor, in the envelope', async () => {
    const ok = { namespaceUrn: CASE, where: { '/status': 'open' } };
    const bad: Array<[unknown, string]> = [
      [[ok], 'invalid_request'],
      ['"text"', 'invalid_request'],
      [{ ...ok, sort: 'asc' }, 'invalid_request'],
      [{ where: {} }, 'invalid_request'],
      [{ ...ok, namespaceUrn: 'case' }, 'invalid_request'],
      [{ ...ok, namespaceUrn: 'urn:svc:schema:case@1.0.0' }, 'invalid_request'],
      [{ namespaceUrn: CASE }, 'invalid_request'],
      [{ namespaceUrn: CASE, where: [] }, 'invalid_request'],
      [{ namespaceUrn: CASE, where: null }, 'invalid_request'],
      [{ namespaceUrn: CASE, where: { status: 'open' } }, 'invalid_request'],
      [{ namespaceUrn: CASE, where: { '/a~2': 'x' } }, 'invalid_request'],
      [{ namespaceUrn: CASE, where: { '/a~': 'x' } }, 'invalid_request'],
      [{ namespaceUrn: CASE, where: { '/a': {} } }, 'invalid_request'],
      [{ namespaceUrn: CASE, where: { '/a': ['x'] } }, 'invalid_request'],
      [{ namespaceUrn: CASE, where: { '/a': null } }, 'invalid_request'],
      [{ namespaceUrn: CASE, where: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`/f${i}`, i])) }, 'invalid_request'],
      [{ ...ok, mode: 'all' }, 'invalid_request'],
      [{ ...ok, mode: null }, 'invalid_request'],
      [{ ...ok, limit: 0 }, 'invalid_pagination'],
      [{ ...ok, limit: 1001 }, 'invalid_pagination'],
      [{ ...ok, limit: 2.5 }, 'invalid_pagination'],
      [{ ...ok, limit: '10' }, 'invalid_pagination'],
      [{ ...ok, cursor: 'nonsense' }, 'invalid_cursor'],
      [{ ...ok, cursor: 7 }, 'invalid_cursor'],
      [{ ...ok, cursor: 'srch1.WyJ4Il0' }, 'invalid_cursor'],
      [{ ...ok, cursor: 'doc1.WyJ0Il0' }, 'invalid_cursor'],
    ];
    for (const [body, code] of bad) {
      const r = await acme.post('/v1/documents/search', typeof body === 'string' ? body : body, { 'Content-Type': 'application/json' });
      expectError(r, 400, code);
    }
    // 16 pointers are fine.
    expect((await search(acme, { namespaceUrn: CASE, where: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`/f${i}`, i])) })).status).toBe(200);
    // A cursor of one search does not continue another.
    const page = await search(acme, { namespaceUrn: PAGE, where: { '/bucket': 'a' }, limit: 1 });
    expect(page.json.nextCursor).toEqual(expect.any(String));
    for (const other of [{ namespaceUrn: PAGE, where: { '/bucket': 'b' } }, { namespaceUrn: PAGE, where: {} }, { namespaceUrn: PAGE, mode: 'derived', where: { '/bucket': 'a' } }, { namespaceUrn: CASE, where: { '/bucket': 'a' } }]) {
      expectError(await search(acme, { ...other, limit: 1, cursor: page.json.nextCursor }), 400, 'invalid_cursor');
    }
    // The route is not taken for a document id, nor the other way round.
    expectError(await acme.get('/v1/documents/search'), 400, 'invalid_request');
  });

  test('a catalog without the index is indexed at start (the index table emptied while the server was down)', async () => {
    const before = await ids(acme, { namespaceUrn: CASE, where: { '/status': 'open' } });
    const derived = await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: { '/text': 'page two' } });
    expect(before.length).toBeGreaterThan(0);
    await server.stop();
    if (TEST_BACKEND === 'fs') {
      const env = CatalogEnv.open(root, 'relaxed');
      const store = new LmdbUnitStore(env);
      const keys: unknown[] = [];
      for await (const { key } of store.scan(table<true>('doc_meta_index'))) keys.push(key);
      expect(keys.length).toBeGreaterThan(10);
      await store.run((unit) => keys.forEach((k) => unit.remove(table<true>('doc_meta_index'), k as string[])));
      await store.close();
      await env.close();
    } else {
      const sql = openPool((await backendEnv(root)).SVC_PG_URL!, 1);
      await sql`DELETE FROM svc_unit_rows WHERE tbl = 'doc_meta_index'`;
      await sql.end();
    }
    server = await startServer({ SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' }, root);
    acme = new Api(server.url, acme.token);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/status': 'open' } })).toEqual(before);
    expect(await ids(acme, { namespaceUrn: OCR, mode: 'derived', where: { '/text': 'page two' } })).toEqual(derived);
    expect(await ids(acme, { namespaceUrn: CASE, where: { '/court/city': 'Trondheim' } })).toEqual([d[0]]);
    expect((await all(acme, { namespaceUrn: PAGE, where: {}, limit: 10 })).ids).toHaveLength(45);
  });
});

describe('the index module on an LMDB unit store', () => {
  const root = tempRoot('svc-search-units-');
  const env = CatalogEnv.open(root, 'relaxed');
  const store = new LmdbUnitStore(env);
  const index = new MetadataIndex(store);
  const rows = table<true>('doc_meta_index');
  const seal = new CursorSeal({ location: 'memory', keep: async (candidate: string) => ({ secret: candidate, created: true }) });
  const cursors = seal.of('search', { tenant: 't', subject: 's' });
  beforeAll(() => seal.load());
  afterAll(async () => {
    await store.close();
    await env.close();
    fs.rmSync(root, { recursive: true, force: true });
  });
  const q = (where: Record<string, unknown>, extra: Record<string, unknown> = {}) => parseSearchRequest({ namespaceUrn: 'urn:svc:x', where, ...extra });
  const entries = new Map<string, Record<string, unknown>>();
  const found = async (where: Record<string, unknown>, limit?: number) => (await index.search('t', q(where, limit ? { limit } : {}), async (id) => id, async (id) => entries.get(id), cursors)).items;
  const ids: string[] = Array.from({ length: 5 }, () => randomUUID() as string).sort();

  test('leaves: typed tokens, escaped pointers, array elements, nulls skipped', () => {
    expect([...leaves({ a: 'x', b: 1, c: true, d: null, e: { 'f/g': ['y', 2.5] }, 'h~': false })!].sort()).toEqual(
      [['/a', 's:x'], ['/b', 'n:1'], ['/c', 'b:true'], ['/e/f~1g/0', 's:y'], ['/e/f~1g/1', 'n:2.5'], ['/h~0', 'b:false']].sort(),
    );
    const [[, long]] = [...leaves({ a: 'z'.repeat(200) })!];
    expect(long).toMatch(/^h:[0-9a-f]{64}$/);
    // Deep nesting does not use the call stack.
    let deep: unknown = 'bottom';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(leaves({ deep })!.size).toBe(1);
    // Past MAX_LEAVES scalars: none (the entry is read when searched).
    expect(leaves({ ids: Array.from({ length: MAX_LEAVES }, (_, i) => i) })!.size).toBe(MAX_LEAVES);
    expect(leaves({ ids: Array.from({ length: MAX_LEAVES + 1 }, (_, i) => i) })).toBeUndefined();
  });

  test('backfill indexes what it is given, once; changes write only what differs', async () => {
    const data = (i: number) => ({ kind: i % 2 ? 'odd' : 'even', i, tags: ['t', `u${i}`] });
    await index.backfill(
      (async function* () {
        for (const id of ids) yield { tenant: 't', documentId: id };
      })(),
      async (_unit: Unit, _tenant: string, documentId: string) => [{ namespaceUrn: 'urn:svc:x', mode: 'c' as const, entry: { schema: 'urn:svc:schema:x@1.0.0', data: data(ids.indexOf(documentId)) } }],
    );
    expect(await index.built()).toBe(true);
    expect(await found({ '/kind': 'even' })).toEqual([ids[0], ids[2], ids[4]]);
    expect(await found({ '/tags/1': 'u3' })).toEqual([ids[3]]);
    expect(await found({})).toEqual(ids);
    // Built: a second backfill reads nothing.
    await index.backfill(
      (async function* () {
        yield { tenant: 't', documentId: ids[0]! };
      })(),
      async () => {
        throw new Error('not again');
      },
    );
    expect(await index.documentsOnSchema('t', 'urn:svc:x', 'c', 'urn:svc:schema:x@1.0.0', 2)).toEqual([ids[0], ids[1]]);
    expect(await index.documentsOnSchema('t', 'urn:svc:x', 'c', 'urn:svc:schema:x@1.0.0', 10, ids[1])).toEqual([ids[2], ids[3], ids[4]]);
    expect(await index.documentsOnSchema('t', 'urn:svc:x', 'canonical', 'urn:svc:schema:x@2.0.0', 10)).toEqual([]);
    expect(await index.documentsOnSchema('t', 'urn:svc:x', 'derived', 'urn:svc:schema:x@1.0.0', 10)).toEqual([]);

    // One field changed: one key goes, one comes; a new schema moves the schema key.
    const count = () => store.count(rows);
    const n = await count();
    const writes: Array<[string, unknown]> = [];
    const spy = {
      put: (_t: unknown, key: unknown) => writes.push(['put', key]),
      remove: (_t: unknown, key: unknown) => writes.push(['remove', key]),
    } as unknown as Unit;
    const before = { schema: 'urn:svc:schema:x@1.0.0', data: data(1) };
    const after = { schema: 'urn:svc:schema:x@1.0.0', data: { ...data(1), kind: 'even' } };
    index.changed(spy, 't', ids[1]!, 'urn:svc:x', 'c', before, after);
    expect(writes).toEqual([['remove', ['v', 't', 'urn:svc:x', 'c', '/kind', 's:odd', ids[1]]], ['put', ['v', 't', 'urn:svc:x', 'c', '/kind', 's:even', ids[1]]]]);
    await store.run((unit) => index.changed(unit, 't', ids[1]!, 'urn:svc:x', 'c', before, { ...after, schema: 'urn:svc:schema:x@2.0.0' }));
    expect(await count()).toBe(n);
    expect(await found({ '/kind': 'even' })).toEqual([ids[0], ids[1], ids[2], ids[4]]);
    expect(await index.documentsOnSchema('t', 'urn:svc:x', 'c', 'urn:svc:schema:x@2.0.0', 10)).toEqual([ids[1]]);
    // The entry goes: none of its keys stay.
    await store.run((unit) => index.changed(unit, 't', ids[1]!, 'urn:svc:x', 'c', { ...after, schema: 'urn:svc:schema:x@2.0.0' }, undefined));
    expect(await found({})).toEqual([ids[0], ids[2], ids[3], ids[4]]);
    expect(await count()).toBe(n - leaves(after.data)!.size - 2);
  });

  test('an entry with more than MAX_LEAVES scalars costs one overflow key and is read when searched', async () => {
    const big = { kind: 'big', ids: Array.from({ length: 2000 }, (_, i) => i) };
    const writes: unknown[] = [];
    const spy = { put: (_t: unknown, key: unknown) => writes.push(key), remove: (_t: unknown, key: unknown) => writes.push(key) } as unknown as Unit;
    index.changed(spy, 't', ids[2]!, 'urn:svc:x', 'c', undefined, { schema: 'urn:svc:schema:x@1.0.0', data: big });
    expect(writes).toEqual([['o', 't', 'urn:svc:x', 'c', ids[2]], ['s', 't', 'urn:svc:x', 'c', 'urn:svc:schema:x@1.0.0', ids[2]], ['e', 't', 'urn:svc:x', 'c', ids[2]]]);
    // ids[2] holds a small entry (kind even): it becomes the big one.
    const small = { kind: 'even', i: 2, tags: ['t', 'u2'] };
    await store.run((unit) => index.changed(unit, 't', ids[2]!, 'urn:svc:x', 'c', { schema: 'urn:svc:schema:x@1.0.0', data: small }, { schema: 'urn:svc:schema:x@1.0.0', data: big }));
    entries.set(ids[2]!, big);
    expect(await found({ '/kind': 'even' })).toEqual([ids[0], ids[4]]);
    expect(await found({ '/kind': 'big' })).toEqual([ids[2]]);
    expect(await found({ '/ids/1500': 1500 })).toEqual([ids[2]]);
    expect(await found({ '/ids/1500': '1500' })).toEqual([]);
    expect(await found({ '/kind': 'big', '/ids/3': 3 })).toEqual([ids[2]]);
    expect(await found({ '/kind': 'big', '/ids/3': 4 })).toEqual([]);
    expect(await found({})).toEqual([ids[0], ids[2], ids[3], ids[4]]);
    // Pages of one over indexed and overflowing entries together: in documentId order, none missed.
    const pages: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await index.search('t', q({ '/tags/0': 't' }, { limit: 1, ...(cursor ? { cursor } : {}) }), async (id) => id, async (id) => entries.get(id), cursors);
      pages.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    expect(pages).toEqual([ids[0], ids[3], ids[4]]);
    // Small again: the overflow key goes and its leaves come back.
    await store.run((unit) => index.changed(unit, 't', ids[2]!, 'urn:svc:x', 'c', { schema: 'urn:svc:schema:x@1.0.0', data: big }, { schema: 'urn:svc:schema:x@1.0.0', data: small }));
    entries.delete(ids[2]!);
    expect(await found({ '/kind': 'even' })).toEqual([ids[0], ids[2], ids[4]]);
    expect(await found({ '/kind': 'big' })).toEqual([]);
  });
});
