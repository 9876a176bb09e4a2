// Issue 40: what a document's steps cost a pg-s3 node in PostgreSQL statements, counted by
// PostgreSQL itself (pg_stat_statements, preloaded by the test cluster when installed): the unit
// store's reads and commits, and the blob catalog's records of unlisted blocks, of the bytes' PUT,
// the finalize and a canonical write. The node that
// committed the upload and its document last takes its copies of both (remembered tables, verified
// by the commit); one that knows only the upload's document reads both in one statement. A read the step
// made before its unit is not made again in it (Unit.getKnown), a document is the node's copy as it
// last read or committed it (a remembered table), the content ledger's record and the content key
// are written where absent by the commit (Unit.putIfAbsent: no read without a quota), the blocks'
// records are written by it too (Unit.recordBlocks), and a version, which never changes, is read once per node. Each step is counted three times (on fresh documents) and
// the least count is the step's: a node's own background work (jobs, heartbeats) only adds.
// Skipped, saying why, on fs (the pg-s3 project runs it) or without pg_stat_statements.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { Api, devToken } from './helpers/docs-client.js';
import { startServer, type TestServer } from './helpers/server.js';

const SCHEMA_URN = 'urn:svc:schema:stmt@1.0.0';
const NAMESPACE = 'urn:svc:stmt';
/** A point read, and several at once (Unit.prefetch): each one statement. */
/** Statements of each kind a step made. */
interface Made {
  reads: number;
  records: number;
  commits: number;
}

const READS = ['SELECT value FROM svc_unit_rows WHERE tbl = $1 AND key = $2', 'SELECT (SELECT u.value FROM svc_unit_rows u WHERE u.tbl = r.tbl AND u.key = r.key) AS value'];

describe.skipIf(TEST_BACKEND !== 'pg-s3')('statements per document step on pg-s3 (issue 40)', () => {
  let server: TestServer;
  let api: Api;
  let db: pg.Client;
  let database: string;
  let skip: string | undefined;

  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed' });
    const url = (await backendEnv(server.root)).SVC_PG_URL!;
    database = new URL(url).pathname.slice(1);
    db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      await db.query('SELECT count(*) FROM pg_stat_statements');
    } catch (err) {
      skip = `pg_stat_statements is not available: ${(err as Error).message}`;
      console.warn(`pg-document-statements: ${skip}`);
    }
    api = new Api(server.url, await devToken(server.url, { org_id: 'stmt', sub: 'alice' }));
    const schema = { schemaUrn: SCHEMA_URN, namespaceUrn: NAMESPACE, lifecycle: 'published', jsonSchema: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } } };
    expect((await api.post('/v1/schemas', schema)).status).toBe(201);
  });
  afterAll(async () => {
    await db?.end();
    await server?.stop();
  });

  /** Point reads and commits of svc's units, and records of unlisted blocks, in this database so far. */
  async function counts(): Promise<Made> {
    const r = await db.query<{ query: string; calls: string }>(
      'SELECT s.query, s.calls::text AS calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1',
      [database],
    );
    let reads = 0;
    let records = 0;
    let commits = 0;
    for (const row of r.rows) {
      if (READS.some((q) => row.query.startsWith(q))) reads += Number(row.calls);
      else if (row.query.startsWith('SELECT svc_record_unlisted(')) records += Number(row.calls);
      else if (row.query.startsWith('SELECT svc_unit_commit(')) commits += Number(row.calls);
    }
    return { reads, records, commits };
  }

  /** The statements `step` made, the least of three runs (each on a document of its own). */
  async function least(prepare: () => Promise<string>, step: (id: string) => Promise<void>): Promise<Made> {
    let best = { reads: Infinity, records: Infinity, commits: Infinity };
    const total = (m: Made) => m.reads + m.records + m.commits;
    for (let i = 0; i < 3; i++) {
      const id = await prepare();
      const before = await counts();
      await step(id);
      const after = await counts();
      const made = { reads: after.reads - before.reads, records: after.records - before.records, commits: after.commits - before.commits };
      if (total(made) < total(best)) best = made;
    }
    return best;
  }

  let n = 0;
  const metadata = () => ({ namespaces: { [NAMESPACE]: { schema: SCHEMA_URN, data: { n: n++ } } } });
  const create = async () => {
    const made = await api.post('/v1/documents', { initialMetadata: metadata() });
    expect(made.status).toBe(201);
    return made.json as { documentId: string; uploadId: string };
  };
  const put = async (uploadId: string) => expect((await api.putBytes(uploadId, new TextEncoder().encode(`bytes of document ${n++}`))).status).toBe(204);
  const finalize = async (uploadId: string) => expect((await api.post(`/v1/uploads/${uploadId}/finalize`, { reason: 'test' })).status).toBe(201);

  it('the bytes: the upload and the document as the node committed them (no read), the content\'s two records written where absent and the blocks\' records, all by one commit', async ({ skip: skipTest }) => {
    if (skip) skipTest(skip);
    expect(await least(async () => (await create()).uploadId, put)).toEqual({ reads: 0, records: 0, commits: 1 });
  });

  it('the finalize: the upload and the document as the node committed them (no read), one commit', async ({ skip: skipTest }) => {
    if (skip) skipTest(skip);
    const ready = async () => {
      const { uploadId } = await create();
      await put(uploadId);
      return uploadId;
    };
    expect(await least(ready, finalize)).toEqual({ reads: 0, records: 0, commits: 1 });
  });

  it('a canonical write: the document as the node committed it (its copy, verified by the commit), the current version known to the node that added it, one commit', async ({ skip: skipTest }) => {
    if (skip) skipTest(skip);
    const ready = async () => {
      const { documentId, uploadId } = await create();
      await put(uploadId);
      await finalize(uploadId);
      return documentId;
    };
    const write = async (documentId: string) => {
      const r = await api.post(`/v1/documents/${documentId}/metadata`, { mode: 'canonical', bundle: metadata() });
      expect(r.status).toBe(201);
    };
    expect(await least(ready, write)).toEqual({ reads: 0, records: 0, commits: 1 });
  });
});
