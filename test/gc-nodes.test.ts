// Garbage collection of pg-s3 with two nodes on one PostgreSQL catalog and one bucket: roots
// that live in one node's data directory (document content) are marked by that node when a run on another node opens its marking epoch, so a run on
// node A never takes blocks that only node B references. A node killed with SIGKILL is waited
// for only until its heartbeat is older than SVC_NODE_TTL; if it holds such roots (a root
// holder), the run then quarantines and purges nothing and says why, for as long as it is down,
// until it comes back or an operator forgets it (svc nodes forget).
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

  it('a run waits for a node killed with SIGKILL only until its heartbeat expires, then, B being a root holder, takes nothing', async () => {
    const bId = await nodeIdOf(b);
    await b.kill9();
    const started = Date.now();
    const run = await gc(a, 'run');
    // SVC_NODE_TTL is 3 s and heartbeats come every second: the run waited at most about that long.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(run.heldBack.nodes.map((n: { nodeId: string }) => n.nodeId)).toEqual([bId]);
    expect([run.quarantined.count, run.purged.count]).toEqual([0, 0]);
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

/** The reason a run held back by one root holder gives (engine/gc/shared-collector.ts). */
const heldBackReason = (nodeId: string, lastSeenAt: string, address: string) =>
  `Nothing was quarantined or purged: node ${nodeId} (down, last heartbeat ${lastSeenAt}, at ${address}) keeps references to blocks in its data directory ` +
  '(documents, versions, views, legacy imports) that only it can mark, and has not marked them for this run. Start it again on its data directory ' +
  '(a node marks at its next heartbeat, and the next run proceeds), or, for a node gone for good, run `svc nodes forget <id>` (DELETE /api/ops/v1/nodes/<id>): ' +
  'the references in its data directory are then lost, and later runs collect their blocks.';

describe.skipIf(!shared)('a root holder that is down (issue 26)', () => {
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

  it('holds back quarantine and purge past the quarantine age while B is down; B back marks again; B forgotten, its blocks go', async () => {
    b = await startServer(env, bRoot);
    const [aId, bId] = [await nodeIdOf(a), await nodeIdOf(b)];
    await until('A sees B live', async () => (await nodesSeenBy(a)).some((n) => n.nodeId === bId && n.state === 'live'));
    // Neither holds roots yet: a pg-s3 node's blobs and sessions are in the catalog.
    expect((await nodesSeenBy(a)).map((n) => [n.nodeId, n.rootHolder])).toEqual([[aId, false], [bId, false]].sort());

    // B's document: its content's blocks are referenced only from B's data directory.
    const api = new Api(b.url, await devToken(b.url, { scope: 'doc.create doc.read' }));
    const docBytes = Buffer.concat([seededBytes(3 * BLOCK, 801), seededBytes(50, 802)]);
    const doc = await api.newDocument(docBytes, { contentType: 'application/octet-stream' });
    const docBlocks = [...blockNamesOf(docBytes, 3), `${sha256(docBytes.subarray(3 * BLOCK))}-50`];
    // A blob uploaded through A, kept, and one deleted through A (garbage).
    const keptBytes = seededBytes(2 * BLOCK, 803);
    const kept = await upload(a.url, keptBytes);
    expect(kept.res.status).toBe(201);
    const goneBytes = seededBytes(2 * BLOCK, 804);
    const gone = await upload(a.url, goneBytes);
    expect(gone.res.status).toBe(201);
    expect((await fetch(`${a.url}/api/v1/blobs/${gone.json.blob.id}`, { method: 'DELETE' })).status).toBe(204);
    const goneBlocks = blockNamesOf(goneBytes, 2);

    // B became a root holder before its document was acknowledged.
    const seen = await nodesSeenBy(a);
    expect(seen).toEqual([
      { nodeId: aId, address: expect.stringMatching(/:\d+$/), state: 'live', lastSeenAt: expect.stringMatching(ISO_UTC), rootHolder: false, self: true },
      { nodeId: bId, address: `127.0.0.1:${b.port}`, state: 'live', lastSeenAt: expect.stringMatching(ISO_UTC), rootHolder: true, rootHolderSince: expect.stringMatching(ISO_UTC), self: false },
    ].sort((x, y) => (x.nodeId < y.nodeId ? -1 : 1)));

    await b.kill9();
    await until("A sees B down (SVC_NODE_TTL 3 s)", async () => (await nodesSeenBy(a)).some((n) => n.nodeId === bId && n.state === 'down'));
    const bDown = (await nodesSeenBy(a)).find((n) => n.nodeId === bId);
    expect(bDown).toEqual({ nodeId: bId, address: `127.0.0.1:${b.port}`, state: 'down', lastSeenAt: expect.stringMatching(ISO_UTC), rootHolder: true, rootHolderSince: expect.stringMatching(ISO_UTC), self: false });

    // SVC_GC_QUARANTINE_AGE and SVC_GC_MIN_AGE are 0 s: every block is past them (the deleted
    // blob's go at once below, once B is back). With B down, runs take nothing, whatever the phase.
    const reason = heldBackReason(bId, bDown.lastSeenAt, bDown.address);
    const heldBack = { reason, nodes: [{ nodeId: bId, address: bDown.address, lastSeenAt: bDown.lastSeenAt }] };
    for (const phase of ['run', 'quarantine', 'purge', 'run']) {
      const run = await gc(a, phase);
      expect(run.heldBack, phase).toEqual(heldBack);
      expect([run.candidates, run.quarantined, run.purged], phase).toEqual([0, { count: 0, bytes: 0 }, { count: 0, bytes: 0 }]);
    }
    // The same through the command (exit 1, the reason on stderr), the ops snapshot and GC's state.
    const cli = await svc(a, 'gc', '--apply');
    expect([cli.code, cli.stderr]).toEqual([1, `svc gc: held back: ${reason}\n`]);
    expect(JSON.parse(cli.stdout).heldBack).toEqual(heldBack);
    const snapshot = (await (await fetch(`${a.url}/api/ops/v1/snapshot`)).json()) as any;
    expect(snapshot.checks).toContainEqual({ id: 'gc', status: 'warn', detail: `the last garbage collection run was held back: ${reason}` });
    expect(snapshot.status).toBe('Degraded');
    const live = await storedBlockNames(a.root, 'live');
    for (const n of [...docBlocks, ...goneBlocks]) expect(live.has(n), n).toBe(true);
    expect([...(await storedBlockNames(a.root, 'quarantine'))]).toEqual([]);

    // `svc nodes` lists both; forgetting a live node is refused (409 node_live, nothing changes).
    const listed = await svc(a, 'nodes');
    expect(listed).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        `${aId}\t${seen.find((n) => n.nodeId === aId).address}\tlive\tno roots\t(answered)`,
        `${bId}\t${bDown.address}\tdown since ${bDown.lastSeenAt}\troot holder`,
      ].sort().join('\n') + '\n',
    });
    const refused = await fetch(`${a.url}/api/ops/v1/nodes/${aId}`, { method: 'DELETE' });
    expect([refused.status, await refused.json()]).toEqual([409, { error: 'node_live', message: `Node ${aId} is live (it is the node answering this request): only a node that is down can be forgotten; stop it first` }]);
    // B back on its data directory: A forgets it through B (live there: not A's own request).
    b = await startServer(env, bRoot);
    await until('B live again', async () => (await nodesSeenBy(a)).some((n) => n.nodeId === bId && n.state === 'live'));
    const refusedCli = await svc(b, 'nodes', 'forget', aId);
    expect(refusedCli.code).toBe(1);
    expect(refusedCli.stderr).toMatch(new RegExp(`^svc: 409 node_live: Node ${aId} is live \\(its last heartbeat, \\S+Z, is within SVC_NODE_TTL\\): only a node that is down can be forgotten; stop it first\n$`));
    const unknown = await fetch(`${a.url}/api/ops/v1/nodes/no-such-node`, { method: 'DELETE' });
    expect([unknown.status, await unknown.json()]).toEqual([404, { error: 'node_not_found', message: 'No node no-such-node is known (svc nodes lists them)' }]);

    // B marks at its heartbeat: the run proceeds, keeps B's document and takes the deleted blob.
    const back = await gc(a, 'run');
    expect(back.heldBack).toBeUndefined();
    expect(back.quarantined.count).toBe(goneBlocks.length);
    expect((await gc(a, 'purge')).purged.count).toBe(goneBlocks.length);
    const afterBack = await storedBlockNames(a.root, 'live');
    for (const n of docBlocks) expect(afterBack.has(n), n).toBe(true);
    for (const n of goneBlocks) expect(afterBack.has(n), n).toBe(false);
    const content = await fetch(`${b.url}/v1/documents/${doc.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
    expect(content.status).toBe(200);
    expect(Buffer.from(await content.arrayBuffer()).equals(docBytes)).toBe(true);

    // B gone for good: killed, then forgotten. The next run takes its document's blocks, and only them.
    await b.kill9();
    await until('A sees B down again', async () => (await nodesSeenBy(a)).some((n) => n.nodeId === bId && n.state === 'down'));
    const forgotten = await svc(a, 'nodes', 'forget', bId);
    expect(forgotten).toEqual({
      code: 0,
      stderr: '',
      stdout: `Node ${bId} is forgotten: garbage collection no longer waits for it. The references its data directory held (documents, versions, views, legacy imports, resumable sessions made through it) are lost with that directory, and later runs collect the blocks only they referenced.\n`,
    });
    expect((await nodesSeenBy(a)).map((n) => n.nodeId)).toEqual([aId]);
    const again = await fetch(`${a.url}/api/ops/v1/nodes/${bId}`, { method: 'DELETE' });
    expect([again.status, ((await again.json()) as any).error]).toEqual([404, 'node_not_found']);
    const taken = await gc(a, 'run');
    expect(taken.heldBack).toBeUndefined();
    expect(taken.quarantined).toEqual({ count: docBlocks.length, bytes: 3 * BLOCK + 50 });
    expect((await gc(a, 'purge')).purged).toEqual({ count: docBlocks.length, bytes: 3 * BLOCK + 50 });
    const end = await storedBlockNames(a.root, 'live');
    for (const n of docBlocks) expect(end.has(n), n).toBe(false);
    const verified = await fetch(`${a.url}/api/v1/blobs/${kept.json.blob.id}/verify`, { method: 'POST' });
    expect(((await verified.json()) as any).verified).toBe(true);
  });
});
