// Several S3-only nodes (SVC_BLOB_BACKEND=s3) on one bucket rely on conditional writes. On a
// server that ignores them (s3rver) svc starts one node and refuses a second while the first's
// heartbeat is live: exit 1 and a message naming what the server lacks. A node stopped cleanly
// leaves at once; one killed is gone after SVC_NODE_TTL. Two nodes on radosgw, which honours
// them, run in test/locality.test.ts (the s3 project). A node that made a document is a root
// holder: one node after another on s3rver shows that GC through another node takes nothing of
// it while it is down, and takes its blocks once it is forgotten.
import fs from 'node:fs';
import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ObjectIo } from '../dist/engine/store/s3-only/objects.js';
import { probeConditionalWrites } from '../dist/engine/store/s3/preconditions.js';
import { Api, ISO_UTC, devToken } from './helpers/docs-client.js';
import { BLOCK, FIXED_BLOCKS_ENV } from './helpers/gc.js';
import { seededBytes, sha256 } from './helpers/http.js';
import { type S3Endpoint, s3ClientFor, startS3rver } from './helpers/s3-servers.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const BUCKET = 'svc-nodes';
let s3: S3Endpoint;
let env: Record<string, string>;

beforeAll(async () => {
  s3 = await startS3rver();
  const client = s3ClientFor(s3);
  await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  client.destroy();
  env = {
    SVC_BLOB_BACKEND: 's3',
    SVC_S3_ENDPOINT: s3.endpoint,
    SVC_S3_BUCKET: BUCKET,
    AWS_ACCESS_KEY_ID: s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
    // Long enough for a node's start on a busy machine (seen at 3.7 s) to read a killed node's
    // last heartbeat (beats every TTL / 3) as live: at 2 s a slow start found it expired.
    SVC_NODE_TTL: '8s',
    // The documents node's claim must not lapse while a killed holder waits to be started again
    // here (a busy machine's restarts took longer than the default 30 s): s3-documents-lease.test.ts tests lapses.
    SVC_DOCUMENTS_LEASE_TTL: '10m',
  };
});
afterAll(async () => {
  await s3?.stop();
});

async function nodeId(s: TestServer): Promise<string> {
  return ((await (await fetch(`${s.url}/api/ops/v1/snapshot`)).json()) as { placement: { nodeId: string } }).placement.nodeId;
}

describe('S3-only nodes on a server that ignores preconditions (s3rver)', () => {
  it('one node works; a second is refused (exit 1, naming the missing support) while the first is live', async () => {
    const a = await startServer(env);
    try {
      const put = await fetch(`${a.url}/api/v1/blobs`, { method: 'POST', body: 'one node works anywhere' });
      expect(put.status).toBe(201);
      const refused = await startServer(env).then(
        async (b) => {
          await b.stop();
          return 'started';
        },
        (err: Error) => err.message,
      );
      expect(refused).toMatch(/^server exited with 1: /);
      expect(refused).toContain('ignores conditional writes (If-None-Match: * and If-Match)');
      expect(refused).toContain(await nodeId(a));
    } finally {
      await a.stop();
    }
    // A node stopped cleanly has left: the next one starts at once and finds the blob.
    const c = await startServer(env);
    try {
      const list = (await (await fetch(`${c.url}/api/v1/blobs`)).json()) as { blobs: unknown[] };
      expect(list.blobs).toHaveLength(1);
      await c.kill9();
      const killedAt = Date.now();
      // A killed node holds the bucket until its heartbeat is older than SVC_NODE_TTL (8 s).
      await expect(startServer(env)).rejects.toThrow(/ignores conditional writes/);
      await new Promise((resolve) => setTimeout(resolve, killedAt + 8500 - Date.now()));
      const d = await startServer(env);
      await d.stop();
    } finally {
      await c.stop();
    }
  });
});

describe('the GC lease of S3-only nodes', () => {
  it("another node's live lease is 409 gc_running; a lease this node's killed boot left is taken over at once", async () => {
    const s = await startServer(env);
    const client = s3ClientFor(s3);
    try {
      const lease = (node: string, boot: string) =>
        client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'gc/lease', Body: JSON.stringify({ v: 1, holder: 'x', node, boot, expiresAt: Date.now() + 60_000 }) }));
      const run = () => fetch(`${s.url}/api/ops/v1/gc?phase=mark&apply=false`, { method: 'POST' });
      await lease('another-node', 'b1');
      const busy = await run();
      expect(busy.status).toBe(409);
      expect(((await busy.json()) as { error: string }).error).toBe('gc_running');
      await lease(await nodeId(s), 'an-earlier-boot');
      expect((await run()).status).toBe(200);
      // Released: the next run takes it again.
      expect((await run()).status).toBe(200);
    } finally {
      client.destroy();
      await s.stop();
    }
  });
});

describe('root holders of S3-only nodes (issue 26)', () => {
  const HOLDERS_BUCKET = 'svc-root-holders';
  let holdersEnv: Record<string, string>;
  const roots = { a: tempRoot(), c: tempRoot() };
  const running: TestServer[] = [];
  beforeAll(async () => {
    const client = s3ClientFor(s3);
    await client.send(new CreateBucketCommand({ Bucket: HOLDERS_BUCKET }));
    client.destroy();
    holdersEnv = { ...env, ...FIXED_BLOCKS_ENV, SVC_S3_BUCKET: HOLDERS_BUCKET };
  });
  afterAll(async () => {
    for (const s of running) await s.stop();
    for (const root of Object.values(roots)) fs.rmSync(root, { recursive: true, force: true });
  });

  /** Starts a node on `root`, once the bucket admits it (s3rver: no other node's heartbeat within SVC_NODE_TTL). */
  async function admitted(root: string): Promise<TestServer> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        const s = await startServer(holdersEnv, root);
        running.push(s);
        return s;
      } catch (err) {
        if (!/ignores conditional writes/.test(String(err)) || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  async function stop(s: TestServer, how: 'stop' | 'kill9'): Promise<void> {
    await s[how]();
    running.splice(running.indexOf(s), 1);
  }

  async function objects(prefix: string): Promise<Set<string>> {
    const client = s3ClientFor(s3);
    const out = new Set<string>();
    let ContinuationToken: string | undefined;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: HOLDERS_BUCKET, Prefix: prefix, ContinuationToken }));
      for (const o of page.Contents ?? []) out.add(o.Key!.slice(o.Key!.lastIndexOf('/') + 1));
      ContinuationToken = page.NextContinuationToken;
    } while (ContinuationToken);
    client.destroy();
    return out;
  }

  // What each node said of itself at its last heartbeat (`summary`: the ops snapshot's cluster view) is left out here.
  const listNodes = async (s: TestServer) => ((await (await fetch(`${s.url}/api/ops/v1/nodes`)).json()) as { nodes: any[] }).nodes.map(({ summary: _summary, ...n }) => n);

  it("a run on another node takes nothing while the node that made a document is down (killed, or stopped); back, it keeps it; forgotten, its blocks go", async () => {
    const blockNamesOf = (bytes: Buffer) => Array.from({ length: Math.ceil(bytes.length / BLOCK) }, (_, i) => {
      const block = bytes.subarray(i * BLOCK, (i + 1) * BLOCK);
      return `${sha256(block)}-${block.length}`;
    });
    let a = await admitted(roots.a);
    const aId = await nodeId(a);
    const api = new Api(a.url, await devToken(a.url, { scope: 'doc.create doc.read' }));
    const docBytes = Buffer.concat([seededBytes(2 * BLOCK, 901), seededBytes(40, 902)]);
    const doc = await api.newDocument(docBytes, { contentType: 'application/octet-stream' });
    const docBlocks = blockNamesOf(docBytes);
    const goneBytes = seededBytes(2 * BLOCK, 903);
    const gone = await fetch(`${a.url}/api/v1/blobs`, { method: 'POST', body: goneBytes as Uint8Array<ArrayBuffer> });
    expect(gone.status).toBe(201);
    expect((await fetch(`${a.url}/api/v1/blobs/${((await gone.json()) as any).blob.id}`, { method: 'DELETE' })).status).toBe(204);
    const goneBlocks = blockNamesOf(goneBytes);
    let aAddress = `127.0.0.1:${a.port}`;
    expect(await listNodes(a)).toEqual([{ nodeId: aId, address: aAddress, state: 'live', lastSeenAt: expect.stringMatching(ISO_UTC), rootHolder: true, rootHolderSince: expect.stringMatching(ISO_UTC), self: true }]);

    // A killed; C (another data directory) starts once A's heartbeat is older than SVC_NODE_TTL.
    await stop(a, 'kill9');
    let c = await admitted(roots.c);
    const cId = await nodeId(c);
    // The document platform is A's (it claimed documents-node in the bucket): C refuses it whole, never splits it.
    const elsewhere = await new Api(c.url, api.token).get(`/v1/documents/${doc.documentId}`);
    expect([elsewhere.status, elsewhere.json]).toEqual([503, {
      error: 'documents_single_node',
      message: `On the s3 backend the document platform is served by one node, ${aId}; send /v1 requests to it (docs/backends.md, "s3")`,
    }]);
    const gc = async (phase: string) => {
      const res = await fetch(`${c.url}/api/ops/v1/gc?phase=${phase}&apply=true`, { method: 'POST' });
      const report = (await res.json()) as any;
      expect([res.status, report.error], JSON.stringify(report)).toEqual([200, undefined]);
      return report;
    };
    const heldBy = async () => {
      const down = (await listNodes(c)).find((n) => n.nodeId === aId);
      expect(down).toEqual({ nodeId: aId, address: aAddress, state: 'down', lastSeenAt: expect.stringMatching(ISO_UTC), rootHolder: true, rootHolderSince: expect.stringMatching(ISO_UTC), self: false });
      return {
        reason:
          `Nothing was quarantined or purged: node ${aId} (down, last heartbeat ${down.lastSeenAt}, at ${aAddress}) keeps references to blocks in its data directory ` +
          '(documents, versions, views, legacy imports) that only it can mark, and has not marked them for this run. Start it again on its data directory ' +
          '(a node marks at its next heartbeat, and the next run proceeds), or, for a node gone for good, run `svc nodes forget <id>` (DELETE /api/ops/v1/nodes/<id>): ' +
          'the references in its data directory are then lost, and later runs collect their blocks.',
        nodes: [{ nodeId: aId, address: aAddress, lastSeenAt: down.lastSeenAt }],
      };
    };
    // SVC_GC_MIN_AGE and SVC_GC_QUARANTINE_AGE are 0 s: every block is past them.
    for (const phase of ['run', 'purge']) {
      const run = await gc(phase);
      expect(run.heldBack, phase).toEqual(await heldBy());
      expect([run.quarantined.count, run.purged.count], phase).toEqual([0, 0]);
    }
    let live = await objects('blocks/');
    for (const n of [...docBlocks, ...goneBlocks]) expect(live.has(n), n).toBe(true);
    expect([...(await objects('quarantine/'))]).toEqual([]);
    const self = await fetch(`${c.url}/api/ops/v1/nodes/${encodeURIComponent(cId)}`, { method: 'DELETE' });
    expect([self.status, ((await self.json()) as any).error]).toEqual([409, 'node_live']);

    // A stopped cleanly (its heartbeat goes, its root holder's record says when it left): still held back.
    await stop(c, 'stop');
    a = await admitted(roots.a);
    aAddress = `127.0.0.1:${a.port}`;
    // Back: A's own runs keep its document and take the deleted blob.
    const own = await fetch(`${a.url}/api/ops/v1/gc?phase=run&apply=true`, { method: 'POST' });
    const ownReport = (await own.json()) as any;
    expect([own.status, ownReport.heldBack, ownReport.quarantined.count]).toEqual([200, undefined, goneBlocks.length]);
    const content = await fetch(`${a.url}/v1/documents/${doc.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
    expect(content.status).toBe(200);
    expect(Buffer.from(await content.arrayBuffer()).equals(docBytes)).toBe(true);
    await stop(a, 'stop');
    c = await admitted(roots.c);
    const stopped = await gc('run');
    expect(stopped.heldBack).toEqual(await heldBy());
    expect(stopped.quarantined.count).toBe(0);

    // Forgotten: C's runs take A's document blocks.
    const forgotten = await fetch(`${c.url}/api/ops/v1/nodes/${encodeURIComponent(aId)}`, { method: 'DELETE' });
    expect([forgotten.status, await forgotten.json()]).toEqual([200, {
      nodeId: aId, forgotten: true, rootHolder: true,
      message: `Node ${aId} is forgotten: garbage collection no longer waits for it. The references its data directory held (documents, versions, views, legacy imports) are lost with that directory, and later runs collect the blocks only they referenced.`,
    }]);
    expect((await listNodes(c)).map((n) => n.nodeId)).toEqual([cId]);
    const taken = await gc('run');
    expect(taken.heldBack).toBeUndefined();
    expect(taken.quarantined).toEqual({ count: docBlocks.length, bytes: 2 * BLOCK + 40 });
    // Purged (by that run or the next ones) once their LastModified is before a run's fence (s3rver's are whole seconds).
    const deadline = Date.now() + 10_000;
    while ((await objects('quarantine/')).size > 0 && Date.now() < deadline) await gc('purge');
    expect([...(await objects('quarantine/'))]).toEqual([]);
    live = await objects('blocks/');
    for (const n of docBlocks) expect(live.has(n), n).toBe(false);
  });
});

describe("one S3-only node's objects on a server that overwrites in place (s3rver)", () => {
  it('a read of a key beside this node\'s writes of it gets one whole version, never a torn one', async () => {
    // s3rver writes a PUT in place and answers a GET with the length it found before it opened
    // the file: a GET beside a PUT was served empty, mixed or short of its Content-Length (then
    // 'Error: aborted' once s3rver closed the idle socket, 5 s later). The conformance suite met
    // it as totals() reading a tenant's ledger beside the ledger's flush.
    const client = s3ClientFor(s3);
    try {
      const io = new ObjectIo(client, BUCKET, await probeConditionalWrites(client, BUCKET, ''));
      expect(io.honoursConditions).toBe(false);
      // Versions of different lengths, so that a read of the old length over new bytes shows.
      const version = (n: number) => Buffer.from(JSON.stringify({ n, pad: 'x'.repeat(100 + ((n * 37) % 400)) }));
      await io.put('torn', version(0));
      let writing = true;
      let written = 0;
      const writer = (async () => {
        while (writing) await io.put('torn', version(++written));
      })();
      const reads: number[] = [];
      try {
        const reader = async () => {
          for (let i = 0; i < 100; i++) {
            const got = (await io.get('torn'))!;
            const { n } = JSON.parse(got.body.toString('utf8')) as { n: number };
            expect(got.body.equals(version(n))).toBe(true);
            reads.push(n);
          }
        };
        await Promise.all([reader(), reader()]);
      } finally {
        writing = false;
        await writer;
      }
      // The reads ran beside the writes (they saw several versions), not before or after them.
      expect(new Set(reads).size).toBeGreaterThan(10);
    } finally {
      client.destroy();
    }
  });
});
