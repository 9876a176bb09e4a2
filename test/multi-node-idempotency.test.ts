// Issue 37: Idempotency-Key across pg-s3 nodes (the pg-s3 project runs it; fs skips it). Two
// nodes on one PostgreSQL and one S3 server; the second reaches PostgreSQL through a relay
// (helpers/relay.ts) that can hold or cut the one statement that commits a document's creation.
// A create retried with its key on the other node gives the first answer and one document;
// another body under the key is 422; a repeat while the first is running is 409; a create whose
// commit reply is cut is 503 commit_unknown, and its retry with the key makes exactly one document.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { Api, type Reply, devToken, expectError } from './helpers/docs-client.js';
import { Relay } from './helpers/relay.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const shared = TEST_BACKEND === 'pg-s3';
if (!shared) console.warn('multi-node idempotency test skipped: it needs PostgreSQL (the pg-s3 project runs it)');

/**
 * The statement that commits a document's creation carries its tables' names as parameters:
 * `doc_uploads` is written by that unit alone here.
 */
const CREATE_COMMIT = 'doc_uploads';

const answerOf = (r: Reply) => ({ status: r.status, location: r.headers.get('location'), contentType: r.headers.get('content-type'), text: r.text });

describe.skipIf(!shared)('Idempotency-Key on two pg-s3 nodes', () => {
  const roots = [tempRoot('svc-idem-a-'), tempRoot('svc-idem-b-')];
  let a: TestServer;
  let b: TestServer;
  let relay: Relay;
  /** A tenant of its own per test: its documents are counted. */
  const apis = async (name: string) => {
    const token = await devToken(a.url, { org_id: `${name}-${randomUUID().slice(0, 8)}`, sub: 'alice', scope: 'doc.create doc.read' });
    return [new Api(a.url, token), new Api(b.url, token)] as const;
  };
  const documentsOf = async (api: Api) => (await api.get('/v1/documents?limit=100')).json.documents.length as number;

  beforeAll(async () => {
    const env = await backendEnv(roots[0]!);
    const url = new URL(env.SVC_PG_URL!);
    relay = new Relay({ host: url.hostname, port: Number(url.port) });
    await relay.open();
    url.hostname = '127.0.0.1';
    url.port = String(relay.port);
    a = await startServer({ ...env, SVC_NODE_ID: 'node-a', SVC_DURABILITY: 'relaxed' }, roots[0]);
    // Node B's every connection to PostgreSQL goes through the relay.
    b = await startServer({ ...env, SVC_NODE_ID: 'node-b', SVC_DURABILITY: 'relaxed', SVC_PG_URL: url.toString() }, roots[1]);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await relay?.cut().catch(() => {});
    for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
  });

  it('a create retried with its key on the other node: the first answer byte for byte, one document; another body 422', async () => {
    const [onA, onB] = await apis('idem-replay');
    const key = `"${randomUUID()}"`;
    const first = await onA.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '7' }] }, { 'Idempotency-Key': key });
    expect(first.status, first.text).toBe(201);
    const again = await onB.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '7' }] }, { 'Idempotency-Key': key });
    expect(answerOf(again)).toEqual(answerOf(first));
    expect(await documentsOf(onA)).toBe(1);
    expectError(await onB.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '8' }] }, { 'Idempotency-Key': key }), 422, 'idempotency_key_reused');
    expect(await documentsOf(onB)).toBe(1);
  });

  it('a repeat while the first still runs (its commit held on B): 409 on A; once it is answered, the same answer', async () => {
    const [onA, onB] = await apis('idem-concurrent');
    const key = `"${randomUUID()}"`;
    const held = relay.arm(CREATE_COMMIT, { delayMs: 3000 });
    const first = onB.post('/v1/documents', {}, { 'Idempotency-Key': key });
    await held;
    const during = await onA.post('/v1/documents', {}, { 'Idempotency-Key': key });
    expectError(during, 409, 'idempotency_key_in_progress');
    expect(during.headers.get('retry-after')).toBe('1');
    const answered = await first;
    expect(answered.status, answered.text).toBe(201);
    const repeat = await onA.post('/v1/documents', {}, { 'Idempotency-Key': key });
    expect(answerOf(repeat)).toEqual(answerOf(answered));
    expect(await documentsOf(onA)).toBe(1);
  });

  it('a commit whose reply is cut: 503 commit_unknown; its retry with the key (either node) makes exactly one document', async () => {
    const [onA, onB] = await apis('idem-cut');
    const key = `"${randomUUID()}"`;
    const cut = relay.arm(CREATE_COMMIT, { cut: true });
    const lost = await onB.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '9' }] }, { 'Idempotency-Key': key });
    await cut;
    expectError(lost, 503, 'commit_unknown');
    const retryB = await onB.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '9' }] }, { 'Idempotency-Key': key });
    expect(retryB.status, retryB.text).toBe(201);
    const retryA = await onA.post('/v1/documents', { externalRefs: [{ system: 'crm', value: '9' }] }, { 'Idempotency-Key': key });
    expect(answerOf(retryA)).toEqual(answerOf(retryB));
    expect(await documentsOf(onA)).toBe(1);
  });
});
