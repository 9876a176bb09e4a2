// Several S3-only nodes (SVC_BLOB_BACKEND=s3) on one bucket rely on conditional writes. On a
// server that ignores them (s3rver) svc starts one node and refuses a second while the first's
// heartbeat is live: exit 1 and a message naming what the server lacks. A node stopped cleanly
// leaves at once; one killed is gone after SVC_NODE_TTL. Two nodes on radosgw, which honours
// them, run in test/locality.test.ts (the s3 project).
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ObjectIo } from '../engine/store/s3-only/objects.js';
import { probeConditionalWrites } from '../engine/store/s3/preconditions.js';
import { type S3Endpoint, s3ClientFor, startS3rver } from './helpers/s3-servers.js';
import { type TestServer, startServer } from './helpers/server.js';

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
