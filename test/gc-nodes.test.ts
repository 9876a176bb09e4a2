// Garbage collection of pg-s3 with two nodes on one PostgreSQL catalog and one bucket: roots
// that live in one node's data directory (document content) are marked by that node when a run on another node opens its marking epoch, so a run on
// node A never takes blocks that only node B references; a node killed with SIGKILL is waited
// for only until its heartbeat is older than SVC_NODE_TTL.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND, backendEnv, storedBlockNames } from './helpers/backends.js';
import { Api, devToken } from './helpers/docs-client.js';
import { BLOCK, FIXED_BLOCKS_ENV, gcRun } from './helpers/gc.js';
import { seededBytes, sha256, upload } from './helpers/http.js';
import { type TestServer, startServer } from './helpers/server.js';

const shared = TEST_BACKEND !== 'fs';
if (!shared) console.warn('gc-nodes test skipped: it needs a shared catalog (the pg-s3 project runs it)');

const ENV = { ...FIXED_BLOCKS_ENV, SVC_NODE_TTL: '3s' };

const blockNamesOf = (bytes: Buffer, blocks: number) => Array.from({ length: blocks }, (_, i) => `${sha256(bytes.subarray(i * BLOCK, (i + 1) * BLOCK))}-${BLOCK}`);

const gc = (s: TestServer, phase: string) => gcRun(s.url, phase);

describe.skipIf(!shared)('garbage collection across two pg-s3 nodes', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    a = await startServer(ENV);
    b = await startServer({ ...(await backendEnv(a.root)), ...ENV });
    for (let i = 0; i < 50; i++) {
      const { placement } = (await (await fetch(`${a.url}/api/ops/v1/snapshot`)).json()) as any;
      if (placement.nodes.length === 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
  });

  it("a run on node A keeps the blocks of node B's document content and of a session opened on B, and takes the rest", async () => {
    // Only node B knows a document's content (its data directory); an open session's part is in
    // the catalog (marked with the manifests).
    const api = new Api(b.url, await devToken(b.url, { scope: 'doc.create doc.read' }));
    const docBytes = Buffer.concat([seededBytes(3 * BLOCK, 701), seededBytes(70, 702)]);
    const doc = await api.newDocument(docBytes, { contentType: 'application/octet-stream' });
    const session = randomUUID();
    const sessionBytes = Buffer.concat([seededBytes(3 * BLOCK, 703), seededBytes(90, 704)]);
    expect((await fetch(`${b.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': session } })).status).toBe(201);
    const part = await fetch(`${b.url}/api/v1/uploads/${session}`, { method: 'PATCH', body: sessionBytes, headers: { 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() } });
    expect(part.status).toBe(204);
    // Something to collect, deleted through node A.
    const goneBytes = seededBytes(2 * BLOCK, 705);
    const gone = await upload(a.url, goneBytes);
    expect(gone.res.status).toBe(201);
    expect((await fetch(`${a.url}/api/v1/blobs/${gone.json.blob.id}`, { method: 'DELETE' })).status).toBe(204);

    const docBlocks = blockNamesOf(docBytes, 3);
    const before = await storedBlockNames(a.root, 'live');
    for (const n of docBlocks) expect(before.has(n)).toBe(true);
    const sessionBlocks = blockNamesOf(sessionBytes, 3).filter((n) => before.has(n));
    expect(sessionBlocks.length).toBeGreaterThan(0);

    const run = await gc(a, 'run');
    expect(run.quarantined.count).toBe(2);
    await gc(a, 'purge');
    const after = await storedBlockNames(a.root, 'live');
    for (const n of [...docBlocks, ...sessionBlocks]) expect(after.has(n), n).toBe(true);
    for (const n of blockNamesOf(goneBytes, 2)) expect(after.has(n)).toBe(false);

    const content = await fetch(`${b.url}/v1/documents/${doc.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
    expect(Buffer.from(await content.arrayBuffer()).equals(docBytes)).toBe(true);
    const committed = await fetch(`${b.url}/api/v1/uploads/${session}/commit`, { method: 'POST' });
    expect(committed.status).toBe(200);
    const verified = await fetch(`${a.url}/api/v1/blobs/${((await committed.json()) as any).committedBlob}/verify`, { method: 'POST' });
    expect(((await verified.json()) as any).verified).toBe(true);
  });

  it('a run waits for a node killed with SIGKILL only until its heartbeat expires', async () => {
    await b.kill9();
    const started = Date.now();
    await gc(a, 'run');
    // SVC_NODE_TTL is 3 s and heartbeats come every second: the run waited at most about that long.
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
