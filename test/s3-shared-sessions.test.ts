// Resumable sessions shared by two S3-only nodes (SVC_BLOB_BACKEND=s3) through their bucket
// (engine/store/s3-only/upload-catalog.ts): a part, a status, a commit or a cancel may reach
// either node, the lease and the offset are one across nodes (compare-and-swap on the record's
// ETag), and a GC run on either node keeps the blocks of a session opened through the other.
// Several S3-only nodes need a server that honours conditional writes: Ceph radosgw
// (scripts/ceph/start.sh), not s3rver; where Ceph cannot run the suite is skipped with the reason.
import { randomUUID } from 'node:crypto';
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from './helpers/backends.js';
import { blockNames } from './helpers/gc.js';
import { contentId, seededBytes } from './helpers/http.js';
import { type S3Endpoint, s3ClientFor, startRadosgw } from './helpers/s3-servers.js';
import { type TestServer, startServer } from './helpers/server.js';
import { commit, create, patch, readBack, status } from './helpers/sessions.js';

const run = TEST_BACKEND === 's3';
if (!run) console.warn('s3-shared-sessions test skipped: the s3 project runs it (two S3-only nodes on radosgw)');

const MiB = 1024 * 1024;
const BUCKET = 'svc-sessions';
const NODE = { SVC_NODE_TTL: '3s', SVC_DURABILITY: 'relaxed', SVC_INLINE_MAX_BYTES: '0', SVC_GC_MIN_AGE: '0s', SVC_GC_QUARANTINE_AGE: '0s' };
let a: TestServer;
let b: TestServer;
let radosgw: S3Endpoint | undefined;
let skipReason: string | undefined;
let client: S3Client;

async function verified(s: TestServer, blobId: string): Promise<boolean> {
  const res = await fetch(`${s.url}/api/v1/blobs/${blobId}/verify`, { method: 'POST' });
  return ((await res.json()) as any).verified === true;
}

/** The keys under `prefix` in the nodes' bucket, relative to it. */
async function keys(prefix: string): Promise<string[]> {
  const out: string[] = [];
  let ContinuationToken: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix, ContinuationToken }));
    for (const o of page.Contents ?? []) out.push(o.Key!.slice(prefix.length));
    ContinuationToken = page.NextContinuationToken;
  } while (ContinuationToken);
  return out;
}

/** `<hex>-<size>` of a block object's key. */
function blockName(key: string): string {
  return key.slice(key.lastIndexOf('/') + 1);
}

/** `<hex>-<size>` of every block the session's part objects in the bucket record (a JSON line, then 45 bytes per block). */
async function recordedBlocks(id: string): Promise<Set<string>> {
  const out = new Set<string>();
  for (const name of await keys(`upload-parts/${id}/`)) {
    if (!/^[0-9]{8}$/.test(name)) continue;
    const got = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: `upload-parts/${id}/${name}` }));
    const body = Buffer.from(await got.Body!.transformToByteArray());
    for (let at = body.indexOf(0x0a) + 1; at < body.length; at += 45) out.add(`${body.toString('hex', at, at + 32)}-${body.readUInt32LE(at + 40)}`);
  }
  return out;
}

async function gc(s: TestServer, phase: string) {
  const res = await fetch(`${s.url}/api/ops/v1/gc?phase=${phase}&apply=true&minAge=0s&quarantineAge=0s`, { method: 'POST' });
  const report = (await res.json()) as any;
  expect([res.status, report.error], JSON.stringify(report)).toEqual([200, undefined]);
  return report;
}

describe.skipIf(!run)('resumable sessions shared by two S3-only nodes through the bucket (radosgw)', () => {
  beforeAll(async () => {
    const started = await startRadosgw();
    if ('skip' in started) {
      skipReason = started.skip;
      console.warn(`s3-shared-sessions test skipped: ${skipReason}`);
      return;
    }
    radosgw = started;
    client = s3ClientFor(started);
    await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
    const env = {
      SVC_BLOB_BACKEND: 's3',
      SVC_S3_ENDPOINT: started.endpoint,
      SVC_S3_BUCKET: BUCKET,
      AWS_ACCESS_KEY_ID: started.accessKeyId,
      AWS_SECRET_ACCESS_KEY: started.secretAccessKey,
      ...NODE,
    };
    a = await startServer(env);
    b = await startServer(env);
  }, 150_000);
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    client?.destroy();
    await radosgw?.stop();
  }, 60_000);
  beforeEach(({ skip }) => {
    if (skipReason) skip(skipReason);
  });

  it('parts alternate between the nodes; a part id replayed on the other node answers the durable offset; the other node commits, both read the blob', async () => {
    const data = seededBytes(17 * MiB + 4321, 5100);
    const sizes = [3 * MiB + 7, 1, 5 * MiB, 64 * 1024 + 3, 2 * MiB];
    const { id, status: created } = await create(a);
    expect(created).toBe(201);
    let offset = 0;
    const firstPart = randomUUID();
    for (const [i, size] of sizes.entries()) {
      const node = i % 2 === 0 ? a : b;
      const part = await patch(node, id, offset, data.subarray(offset, offset + size), i === 0 ? firstPart : undefined);
      expect([i, part.status, part.json]).toEqual([i, 204, undefined]);
      offset += size;
      expect(part.offset).toBe(String(offset));
      // The other node sees the offset at once.
      expect((await status(i % 2 === 0 ? b : a, id)).json).toMatchObject({ state: 'Open', offset, partCount: i + 1 });
      if (i === 2) await new Promise((r) => setTimeout(r, 300));
    }
    // The first part again, on the node that did not take it: applied once, the durable offset.
    const replay = await patch(b, id, 0, data.subarray(0, sizes[0]!), firstPart);
    expect([replay.status, replay.offset]).toEqual([204, String(offset)]);
    expect((await patch(a, id, offset, data.subarray(offset))).status).toBe(204);
    const committed = await commit(b, id);
    expect(committed.status, JSON.stringify(committed.json)).toBe(200);
    expect(committed.json.committedBlob).toBe(contentId(data));
    expect((await commit(a, id)).json.committedBlob).toBe(contentId(data));
    for (const node of [a, b]) expect((await readBack(node, contentId(data))).equals(data)).toBe(true);
    expect(await verified(a, contentId(data))).toBe(true);
    // What the session staged in the bucket is gone with the commit; its record stays.
    expect(await keys(`staging/${id}/`)).toEqual([]);
    expect(await keys(`upload-parts/${id}/`)).toEqual([]);
    expect(await keys(`upload-sessions/${id}`)).toEqual(['']);
  });

  it('one session id created on both nodes at once: exactly one 201, the other 409 upload_exists', async () => {
    for (let i = 0; i < 4; i++) {
      const id = randomUUID();
      const answers = await Promise.all([create(a, id), create(b, id)]);
      expect(answers.map((x) => x.status).sort()).toEqual([201, 409]);
      expect(answers.find((x) => x.status === 409)!.json.error).toBe('upload_exists');
    }
  });

  it('two parts at one offset on the two nodes at once: exactly one is acknowledged, the other is 409; the blob has the winner\'s bytes', async () => {
    for (let round = 0; round < 3; round++) {
      const { id } = await create(a);
      const viaA = seededBytes(3 * MiB + round, 5200 + round);
      const viaB = seededBytes(3 * MiB + round, 5300 + round);
      const [ra, rb] = await Promise.all([patch(a, id, 0, viaA), patch(b, id, 0, viaB)]);
      expect([ra.status, rb.status].sort(), JSON.stringify([ra.json, rb.json])).toEqual([204, 409]);
      const loser = ra.status === 409 ? ra : rb;
      expect(['upload_busy', 'upload_offset_mismatch']).toContain(loser.json.error);
      const winner = ra.status === 204 ? viaA : viaB;
      expect((await status(b, id)).json).toMatchObject({ offset: winner.length, partCount: 1 });
      const rest = seededBytes(MiB + 1, 5400 + round);
      expect((await patch(round % 2 === 0 ? b : a, id, winner.length, rest)).status).toBe(204);
      const done = await commit(round % 2 === 0 ? a : b, id);
      const blob = contentId(Buffer.concat([winner, rest]));
      expect(done.json.committedBlob).toBe(blob);
      expect(await verified(b, blob)).toBe(true);
    }
  });

  it('a cancel through the other node ends the session; its staged tails and parts leave the bucket', async () => {
    const { id } = await create(a);
    expect((await patch(a, id, 0, seededBytes(3 * MiB + 5, 5500))).status).toBe(204);
    expect(await keys(`staging/${id}/`)).toHaveLength(1);
    expect((await keys(`upload-parts/${id}/`)).length).toBeGreaterThan(0);
    expect((await fetch(`${b.url}/api/v1/uploads/${id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await status(a, id)).json.state).toBe('Cancelled');
    expect(await keys(`staging/${id}/`)).toEqual([]);
    expect(await keys(`upload-parts/${id}/`)).toEqual([]);
    expect((await patch(a, id, 3 * MiB + 5, Buffer.from('x'))).json.error).toBe('upload_state');
  });

  it("a GC run on one node keeps the blocks of a session open through the other; after the commit the blob verifies, and no node became a root holder", async () => {
    // Garbage the run must find: a blob deleted at once.
    const garbage = seededBytes(2 * MiB + 9, 5600);
    const put = await fetch(`${a.url}/api/v1/blobs`, { method: 'POST', body: garbage as Uint8Array<ArrayBuffer> });
    expect(put.status).toBe(201);
    expect((await fetch(`${a.url}/api/v1/blobs/${contentId(garbage)}`, { method: 'DELETE' })).status).toBe(204);
    // A session through B: its blocks are referenced only by its parts in the bucket.
    const data = seededBytes(12 * MiB + 77, 5700);
    const { id } = await create(b);
    expect((await patch(b, id, 0, data.subarray(0, 5 * MiB))).status).toBe(204);
    expect((await patch(b, id, 5 * MiB, data.subarray(5 * MiB, 10 * MiB))).status).toBe(204);
    // After B's live ingest closed: a part under a segment drains before its answer, recording
    // the blocks cut so far (what early answers left in the tail, too).
    await new Promise((r) => setTimeout(r, 300));
    expect((await patch(b, id, 10 * MiB, data.subarray(10 * MiB, 10 * MiB + 512 * 1024))).status).toBe(204);
    // Past B's ingest fence (min(60 s, quarantine age) after its last upload): only the marks protect them now.
    await new Promise((r) => setTimeout(r, 1500));
    const recorded = await recordedBlocks(id);
    expect(recorded.size).toBeGreaterThan(0);
    const report = await gc(a, 'run');
    expect(report.quarantined.count, JSON.stringify(report)).toBeGreaterThan(0);
    const quarantined = new Set((await keys('quarantine/')).map(blockName));
    // Every block the session's parts recorded is marked by A's run (A reads them from the bucket).
    // Blocks B's drained ingest stored past the last part's answer are in B's memory only: like a
    // document's, quarantined at most, swept back by B, never purged (test/locality.test.ts).
    expect([...recorded].filter((n) => quarantined.has(n)), 'recorded blocks of the open session were quarantined').toEqual([]);
    expect((await patch(a, id, 10 * MiB + 512 * 1024, data.subarray(10 * MiB + 512 * 1024))).status).toBe(204);
    const committed = await commit(b, id);
    expect(committed.json.committedBlob).toBe(contentId(data));
    const names = await blockNames(a.url, contentId(data));
    for (const n of recorded) expect(names).toContain(n);
    const kept = new Set([...(await keys('blocks/')), ...(await keys('quarantine/'))].map(blockName));
    for (const n of names) expect(kept.has(n), `block ${n} of the blob was purged`).toBe(true);
    expect(await verified(a, contentId(data))).toBe(true);
    expect((await readBack(b, contentId(data))).equals(data)).toBe(true);
    // Sessions are in the bucket: no node holds roots only it can mark.
    expect(await keys('root-holders/')).toEqual([]);
  });
});
