// The locality runtime on two real nodes sharing one PostgreSQL catalog and one bucket (the
// pg-s3 project): a session-localized upload is ingested by one owner whichever node it reaches
// (the other forwards the body once), every blob reads back from both nodes, and an owner that
// died is 503 locality_failed until its heartbeat is older than SVC_NODE_TTL, and one that is
// stopped (SIGSTOP: its kernel still takes the connection) is 503 after SVC_LOCALITY_TIMEOUT.
// The s3 project runs it on Ceph radosgw (scripts/ceph/start.sh), not s3rver: several S3-only
// nodes need a server that honours conditional writes, and svc refuses to start a second node on
// s3rver (test/s3-only-nodes.test.ts). Where Ceph cannot run it is skipped with the reason.
import { randomUUID } from 'node:crypto';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { Api, devToken } from './helpers/docs-client.js';
import { seededBytes, sha256 } from './helpers/http.js';
import { type S3Endpoint, s3ClientFor, startRadosgw } from './helpers/s3-servers.js';
import { type TestServer, startServer } from './helpers/server.js';

const shared = TEST_BACKEND !== 'fs';
if (!shared) console.warn('locality test skipped: it needs a shared catalog (the pg-s3 project runs it)');

const TENANT = randomUUID();
// A short quarantine age: a node's ingest fence lasts min(60 s, it) after each upload, and the GC
// case below needs another node's upload to be past it.
const NODE = { SVC_LOCALITY: 'on', SVC_NODE_TTL: '3s', SVC_DURABILITY: 'relaxed', SVC_GC_QUARANTINE_AGE: '1s' };
// The forwarder's bound: short on A, which forwards to a stopped B below; B keeps the default, so
// that B's forward of a large body to A is not cut while A, on a loaded machine, holds the body
// back until its blocks are stored (a paused owner and a stopped one look alike to the forwarder).
const A_ONLY = { SVC_LOCALITY_TIMEOUT: '1500ms' };
let a: TestServer;
let b: TestServer;
let radosgw: S3Endpoint | undefined;
let radosgwSkip: string | undefined;

/** The variables of the two nodes' shared backend: the test backend's, or (s3) a bucket on radosgw. */
async function sharedBackend(): Promise<Record<string, string>> {
  if (TEST_BACKEND !== 's3') return {};
  const started = await startRadosgw();
  if ('skip' in started) {
    radosgwSkip = started.skip;
    return {};
  }
  radosgw = started;
  const client = s3ClientFor(started);
  await client.send(new CreateBucketCommand({ Bucket: 'svc-locality' }));
  client.destroy();
  return {
    SVC_BLOB_BACKEND: 's3',
    SVC_S3_ENDPOINT: started.endpoint,
    SVC_S3_BUCKET: 'svc-locality',
    AWS_ACCESS_KEY_ID: started.accessKeyId,
    AWS_SECRET_ACCESS_KEY: started.secretAccessKey,
  };
}

async function snapshot(s: TestServer): Promise<any> {
  return (await fetch(`${s.url}/api/ops/v1/snapshot`)).json();
}

async function post(s: TestServer, body: Buffer, session: string) {
  const res = await fetch(`${s.url}/api/v1/blobs`, { method: 'POST', body: body as Uint8Array<ArrayBuffer>, headers: { 'X-Svc-Tenant-Id': TENANT, 'X-Svc-Upload-Session-Id': session } });
  return { status: res.status, node: res.headers.get('x-svc-node'), location: res.headers.get('location'), json: (await res.json()) as any };
}

describe.skipIf(!shared)(`locality runtime (two ${TEST_BACKEND} nodes)`, () => {
  beforeAll(async () => {
    const backend = await sharedBackend();
    if (radosgwSkip) return;
    a = await startServer({ ...backend, ...NODE, ...A_ONLY });
    b = await startServer({ ...(await backendEnv(a.root)), ...backend, ...NODE });
    // Each node announces itself as it starts listening.
    for (let i = 0; i < 50 && (await snapshot(a)).placement.nodes.length < 2; i++) await new Promise((r) => setTimeout(r, 100));
  }, 150_000);
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await radosgw?.stop();
  }, 60_000);
  beforeEach(({ skip }) => {
    if (radosgwSkip) skip(radosgwSkip);
  });

  it('both nodes see each other', async () => {
    for (const s of [a, b]) {
      const { placement } = await snapshot(s);
      expect(placement.mode).toBe('multi-node');
      expect(placement.nodes.map((n: any) => n.address).sort()).toEqual([`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`].sort());
    }
  });

  it('a session has one owner whichever node the upload reaches, and every blob reads back from both', async () => {
    const owners = new Set<string>();
    // At least 12 sessions, and on until both nodes own one: placement hashes the random session
    // id, so 12 alone would all land on one node once in 2,048 runs.
    for (let i = 0; i < 40 && (i < 12 || owners.size < 2); i++) {
      const session = randomUUID();
      const viaA = seededBytes(100_000 + i, 800 + i);
      const viaB = seededBytes(200_000 + i, 900 + i);
      const first = await post(a, viaA, session);
      const second = await post(b, viaB, session);
      expect([first.status, second.status], JSON.stringify([first.json, second.json])).toEqual([201, 201]);
      expect(second.node).toBe(first.node);
      owners.add(first.node!);
      for (const [answer, body] of [[first, viaA], [second, viaB]] as const) {
        expect(answer.json.blob.id).toBe(`sha-256:${sha256(body)}:${body.length}`);
        expect(answer.location).toBe(`/api/v1/blobs/${answer.json.blob.id}`);
        for (const s of [a, b]) {
          const got = await fetch(`${s.url}${answer.location}`);
          expect(got.status).toBe(200);
          expect(Buffer.from(await got.arrayBuffer()).equals(body)).toBe(true);
        }
      }
    }
    // Both own some (40 sessions all on one node: odds of 1 in 2^39).
    expect(owners.size).toBe(2);
  });

  it('a large body is forwarded as a stream', async () => {
    // Through B (the default SVC_LOCALITY_TIMEOUT) to a session A owns.
    const aNode = (await snapshot(a)).placement.nodeId;
    let session = randomUUID();
    for (let i = 0; i < 64 && (await post(b, seededBytes(10, i), session)).node !== aNode; i++) session = randomUUID();
    const body = seededBytes(24 * 1024 * 1024, 77);
    const answer = await post(b, body, session);
    expect(answer.status).toBe(201);
    expect(answer.node).toBe(aNode);
    const got = await fetch(`${b.url}${answer.location}`);
    expect(sha256(Buffer.from(await got.arrayBuffer()))).toBe(sha256(body));
  });

  // s3 only: there each node sweeps its own roots back (pg-s3 keeps documents in PostgreSQL, which every run marks: test/gc-nodes.test.ts).
  it.skipIf(TEST_BACKEND !== 's3')("a GC run on one node keeps another node's document blocks: quarantined at most, swept back by their node, never purged", async () => {
    const gc = async (s: TestServer, phase: string) => {
      const res = await fetch(`${s.url}/api/ops/v1/gc?phase=${phase}&apply=true&minAge=0s&quarantineAge=0s`, { method: 'POST' });
      const report = (await res.json()) as any;
      expect([res.status, report.error]).toEqual([200, undefined]);
      return report;
    };
    // A document on A (the node that serves the document platform on s3: it started first and
    // claimed documents-node): its content's blocks are in the bucket, referenced only from A's LMDB.
    const api = new Api(a.url, await devToken(a.url, { scope: 'doc.create doc.read' }));
    const content = seededBytes(3 * 1024 * 1024 + 17, 4242);
    const doc = await api.newDocument(content, { contentType: 'application/octet-stream' });
    // Past A's ingest fence (1 s after the upload here): only A's sweep protects the blocks now.
    await new Promise((r) => setTimeout(r, 1500));
    const read = async () => {
      const res = await fetch(`${a.url}/v1/documents/${doc.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
      expect(res.status).toBe(200);
      return Buffer.from(await res.arrayBuffer());
    };
    // B's run does not know A's roots: it quarantines them (and, with quarantineAge=0, would purge
    // them at once), but A's heartbeat holds back the purge of what was quarantined since A's last sweep.
    const run = await gc(b, 'quarantine');
    expect(run.quarantined.count, JSON.stringify(run)).toBeGreaterThan(0);
    // Two seconds on (radosgw's LastModified may round up a second; A sweeps every 6 s), before
    // or after A's sweep: nothing of A's is purged (the quarantined copies are newer than A's
    // last sweep, or already back).
    await new Promise((r) => setTimeout(r, 2000));
    expect((await gc(b, 'purge')).purged.count).toBe(0);
    expect(sha256(await read())).toBe(sha256(content));
    // A's next sweep (every 2 x SVC_NODE_TTL here) moves them back: B's next run finds them live
    // and quarantines them again (the cost of runs that cannot see other nodes' roots), and still
    // purges none of them.
    await new Promise((r) => setTimeout(r, 8000));
    const again = await gc(b, 'run');
    expect([again.quarantined.count, again.purged.count]).toEqual([run.quarantined.count, 0]);
    expect(sha256(await read())).toBe(sha256(content));
  });

  it('an owner that is stopped (its kernel still takes the connection) is 503 locality_failed after SVC_LOCALITY_TIMEOUT, not a request left waiting', async () => {
    const bNode = (await snapshot(b)).placement.nodeId;
    let session: string | undefined;
    for (let i = 0; !session && i < 64; i++) {
      const candidate = randomUUID();
      if ((await post(a, seededBytes(10, 300 + i), candidate)).node === bNode) session = candidate;
    }
    expect(session).toBeDefined();
    b.proc.kill('SIGSTOP');
    try {
      const started = performance.now();
      const stalled = await post(a, seededBytes(5000, 3), session!);
      const waited = performance.now() - started;
      expect(stalled.status).toBe(503);
      expect(stalled.json).toEqual({ error: 'locality_failed', message: expect.stringContaining(`${bNode}`) });
      expect(stalled.json.message).toContain('no progress for 1.5 s');
      // A's SVC_LOCALITY_TIMEOUT is 1.5 s (and SVC_NODE_TTL 3 s: B was still the owner when A forwarded).
      expect(waited).toBeGreaterThanOrEqual(1400);
      expect(waited).toBeLessThan(15_000);
    } finally {
      b.proc.kill('SIGCONT');
    }
    // B heartbeats again: both nodes live before the next case.
    for (let i = 0; i < 100 && (await snapshot(a)).placement.nodes.length < 2; i++) await new Promise((r) => setTimeout(r, 100));
    expect((await snapshot(a)).placement.nodes.length).toBe(2);
  }, 60_000);

  it('an owner that died is 503 locality_failed until its heartbeat expires, then the living node owns its sessions', async () => {
    const bNode = (await snapshot(b)).placement.nodeId;
    const sessions: string[] = [];
    for (let i = 0; sessions.length < 2 && i < 64; i++) {
      const session = randomUUID();
      if ((await post(a, seededBytes(10, 100 + i), session)).node === bNode) sessions.push(session);
    }
    expect(sessions).toHaveLength(2);
    await b.kill9();
    const failed = await post(a, seededBytes(5000, 1), sessions[0]!);
    expect(failed.status).toBe(503);
    expect(failed.json).toEqual({ error: 'locality_failed', message: expect.stringContaining(bNode) });
    // SVC_NODE_TTL is 3 s: then only node A is live.
    await new Promise((r) => setTimeout(r, 3500));
    const taken = await post(a, seededBytes(5000, 2), sessions[1]!);
    expect(taken.status).toBe(201);
    expect(taken.node).toBe((await snapshot(a)).placement.nodeId);
  });
});
