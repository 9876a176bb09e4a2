// Garbage collection of pg-s3 with two nodes on one PostgreSQL catalog and one bucket. Since
// issue 26 nothing a node makes lives only in its data directory: document content, views and
// sessions are records of the shared stores, so a run on any node marks them, a node killed with
// SIGKILL is waited for only until its heartbeat is older than SVC_NODE_TTL, and no pg-s3 node is
// ever a root holder (s3 keeps the document platform in one node's LMDB: root holders are tested
// there, test/s3-only-nodes.test.ts).
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND, backendEnv, storedBlockNames } from './helpers/backends.js';
import { Api, ISO_UTC, devToken } from './helpers/docs-client.js';
import { BLOCK, FIXED_BLOCKS_ENV, gcRun } from './helpers/gc.js';
import { seededBytes, sha256, upload } from './helpers/http.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

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

  it('a run waits for a node killed with SIGKILL only until its heartbeat expires, then proceeds: B holds no roots of its own', async () => {
    const bId = await nodeIdOf(b);
    await b.kill9();
    const started = Date.now();
    const run = await gc(a, 'run');
    // SVC_NODE_TTL is 3 s and heartbeats come every second: the run waited at most about that long.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(run.heldBack).toBeUndefined();
    expect((await nodesSeenBy(a)).find((n) => n.nodeId === bId)).toMatchObject({ state: 'down', rootHolder: false });
  });
});

const SVC = fileURLToPath(new URL('../bin/svc.js', import.meta.url));

/** `svc ARGS` against `server`: exit code and both streams. */
async function svc(server: TestServer, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const done = await promisify(execFile)(process.execPath, [SVC, ...args, '--server', server.url]).then(
    (r) => ({ code: 0, ...r }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
  return { code: done.code, stdout: done.stdout, stderr: done.stderr };
}

async function nodeIdOf(s: TestServer): Promise<string> {
  return ((await (await fetch(`${s.url}/api/ops/v1/snapshot`)).json()) as any).placement.nodeId;
}

async function nodesSeenBy(s: TestServer): Promise<any[]> {
  const res = await fetch(`${s.url}/api/ops/v1/nodes`);
  expect(res.status).toBe(200);
  return ((await res.json()) as any).nodes;
}

/** Polls `check` until it holds, at most `ms`. */
async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(!shared)('a node that is down past the quarantine age (issue 26)', () => {
  let a: TestServer;
  let b: TestServer | undefined;
  const bRoot = tempRoot();
  let env: Record<string, string>;
  beforeAll(async () => {
    a = await startServer(ENV);
    env = { ...(await backendEnv(a.root)), ...ENV };
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    fs.rmSync(bRoot, { recursive: true, force: true });
  });

  it("keeps every block of B's document while B is down and after it is forgotten, and takes the garbage", async () => {
    b = await startServer(env, bRoot);
    const [aId, bId] = [await nodeIdOf(a), await nodeIdOf(b)];
    await until('A sees B live', async () => (await nodesSeenBy(a)).some((n) => n.nodeId === bId && n.state === 'live'));

    const api = new Api(b.url, await devToken(b.url, { scope: 'doc.create doc.read' }));
    const docBytes = Buffer.concat([seededBytes(3 * BLOCK, 801), seededBytes(50, 802)]);
    const doc = await api.newDocument(docBytes, { contentType: 'application/octet-stream' });
    const docBlocks = [...blockNamesOf(docBytes, 3), `${sha256(docBytes.subarray(3 * BLOCK))}-50`];
    const goneBytes = seededBytes(2 * BLOCK, 804);
    const gone = await upload(a.url, goneBytes);
    expect(gone.res.status).toBe(201);
    expect((await fetch(`${a.url}/api/v1/blobs/${gone.json.blob.id}`, { method: 'DELETE' })).status).toBe(204);
    const goneBlocks = blockNamesOf(goneBytes, 2);
    // The document is the cluster's, not B's: B holds no roots.
    expect((await nodesSeenBy(a)).map((n) => [n.nodeId, n.rootHolder])).toEqual([[aId, false], [bId, false]].sort());

    await b.kill9();
    await until('A sees B down (SVC_NODE_TTL 3 s)', async () => (await nodesSeenBy(a)).some((n) => n.nodeId === bId && n.state === 'down'));
    // SVC_GC_QUARANTINE_AGE and SVC_GC_MIN_AGE are 0 s: every block is past them.
    const run = await gc(a, 'run');
    expect(run.heldBack).toBeUndefined();
    expect(run.quarantined.count).toBe(goneBlocks.length);
    expect((await gc(a, 'purge')).purged.count).toBe(goneBlocks.length);
    const afterRun = await storedBlockNames(a.root, 'live');
    for (const n of docBlocks) expect(afterRun.has(n), n).toBe(true);
    for (const n of goneBlocks) expect(afterRun.has(n), n).toBe(false);
    const read = async () => {
      const res = await fetch(`${a.url}/v1/documents/${doc.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(docBytes)).toBe(true);
    };
    await read();

    // Forgotten for good: its document stays, whole.
    const forgotten = await svc(a, 'nodes', 'forget', bId);
    expect(forgotten.code, forgotten.stderr).toBe(0);
    expect((await nodesSeenBy(a)).map((n) => n.nodeId)).toEqual([aId]);
    const again = await gc(a, 'run');
    expect(again.quarantined.count).toBe(0);
    await gc(a, 'purge');
    const end = await storedBlockNames(a.root, 'live');
    for (const n of docBlocks) expect(end.has(n), n).toBe(true);
    await read();
  });
});
