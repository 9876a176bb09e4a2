// Issue 19's multi-node test: three svc processes (pg-s3, locality on) on one PostgreSQL cluster
// and one Ceph radosgw (scripts/ceph/start.sh; the test is skipped, saying why, only when
// radosgw cannot start). Mixed direct uploads through every node (inline, multi-block, with and
// without the locality headers), resumable sessions whose parts go to different nodes, full and
// ranged downloads from other nodes, deletes, a GC through one node while all three mark their
// roots; then one node is killed with SIGKILL while a large upload streams into it (a session
// whose first part it acknowledged is finished by the survivors). Afterwards
// every acknowledged blob verifies and reads back byte-exact from both survivors, deleted ones
// are 404, the inventory and what the bucket's journal says is held are exactly the
// acknowledged-and-not-deleted blobs, and after a GC (quarantine age 0) no block object is left that no manifest references.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { CreateBucketCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3Journal } from '../dist/engine/store/s3/journal.js';
import { blockNames, gcRun } from './helpers/gc.js';
import { contentId, seededBytes } from './helpers/http.js';
import { type PgServer, startPostgres } from './helpers/postgres.js';
import { type S3Endpoint, s3ClientFor, startRadosgw } from './helpers/s3-servers.js';
import { type TestServer, startServer } from './helpers/server.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const BUCKET = 'svc-multi-node';
const TTL_MS = 3000;
const NODE_ENV = {
  SVC_BLOB_BACKEND: 'pg-s3',
  SVC_PG_POOL: '4',
  SVC_S3_BUCKET: BUCKET,
  SVC_LOCALITY: 'on',
  SVC_NODE_TTL: `${TTL_MS / 1000}s`,
  SVC_DURABILITY: 'relaxed',
  // Blocks of 16-128 KiB: multi-block blobs stay small; inline up to 16 KiB.
  SVC_CHUNK_MIN: '16KiB',
  SVC_CHUNK_AVG: '64KiB',
  SVC_CHUNK_MAX: '128KiB',
  SVC_INLINE_MAX_BYTES: '16KiB',
  SVC_GC_MIN_AGE: '0s',
  SVC_GC_QUARANTINE_AGE: '0s',
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Acknowledged {
  id: string;
  bytes: Buffer;
}

let pg: PgServer | { skip: string };
let s3: S3Endpoint | { skip: string };
let client: S3Client;
let nodes: TestServer[] = [];
const skipReason = () => ('skip' in pg ? pg.skip : 'skip' in s3 ? s3.skip : undefined);

async function json(res: Response): Promise<any> {
  const text = await res.text();
  return text ? JSON.parse(text) : undefined;
}

async function snapshot(s: TestServer): Promise<any> {
  return json(await fetch(`${s.url}/api/ops/v1/snapshot`));
}

async function post(s: TestServer, bytes: Buffer, locality?: { tenant: string; session: string }) {
  const headers: Record<string, string> = locality ? { 'X-Svc-Tenant-Id': locality.tenant, 'X-Svc-Upload-Session-Id': locality.session } : {};
  const res = await fetch(`${s.url}/api/v1/blobs`, { method: 'POST', body: bytes as Uint8Array<ArrayBuffer>, headers });
  return { status: res.status, node: res.headers.get('x-svc-node'), json: await json(res) };
}

const gc = (s: TestServer, phase: 'run' | 'purge') => gcRun(s.url, phase);

/** Every blob id of the inventory, page by page. */
async function inventory(s: TestServer): Promise<Set<string>> {
  const ids = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await json(await fetch(`${s.url}/api/v1/blobs?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`));
    for (const b of page.blobs) ids.add(b.id);
    cursor = page.nextCursor;
  } while (cursor);
  return ids;
}

/** The block objects (`<hex>-<size>`) a blob's manifest names. */
/** Object names under `prefix` in the bucket (the last path segment). */
async function objects(prefix: string): Promise<string[]> {
  const names: string[] = [];
  let ContinuationToken: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix, ContinuationToken }));
    for (const o of page.Contents ?? []) names.push(o.Key!.slice(o.Key!.lastIndexOf('/') + 1));
    ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (ContinuationToken);
  return names;
}

/** The blobs the bucket's journal says are held: for each (tenant, blob) the entry of the largest number, when it is a put. */
async function heldByJournal(): Promise<Set<string>> {
  const server = s3 as S3Endpoint;
  const journal = new S3Journal(client, { kind: 's3', endpoint: server.endpoint, region: server.region, bucket: BUCKET, prefix: '', forcePathStyle: true });
  const last = new Map<string, { seq: number; put: boolean; id: string }>();
  for await (const records of journal.listRecords()) {
    for (const { seq, entry } of records) {
      const [tenant, id] = entry.op === 'put' ? [entry.holding.tenant, entry.holding.id] : [entry.tenant, entry.id];
      const key = `${tenant} ${id}`;
      if ((last.get(key)?.seq ?? -1) < seq) last.set(key, { seq, put: entry.op === 'put', id });
    }
  }
  return new Set([...last.values()].filter((e) => e.put).map((e) => e.id));
}

const sameSet = (a: Set<string>, b: Set<string>) => a.size === b.size && [...a].every((x) => b.has(x));

/** A POST that streams `total` declared bytes a MiB every 20 ms; resolves with the status (0: the connection broke). */
function slowUpload(s: TestServer, total: number, sent: { bytes: number }): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port: s.port, method: 'POST', path: '/api/v1/blobs', headers: { 'Content-Length': String(total), 'Content-Type': 'application/octet-stream' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
      res.on('error', () => resolve(0));
    });
    req.on('error', () => resolve(0));
    const step = () => {
      if (sent.bytes >= total || req.destroyed) return;
      const chunk = seededBytes(Math.min(MiB, total - sent.bytes), 90_000 + sent.bytes / MiB);
      req.write(chunk, () => {
        sent.bytes += chunk.length;
        setTimeout(step, 20);
      });
    };
    step();
  });
}

describe('three pg-s3 nodes on one PostgreSQL and one radosgw', () => {
  const acknowledged = new Map<string, Acknowledged>();
  const deleted = new Set<string>();
  let victim: TestServer;
  let survivors: TestServer[];

  beforeAll(async () => {
    [pg, s3] = await Promise.all([startPostgres(), startRadosgw({ memstoreBytes: 1024 * MiB })]);
    const reason = skipReason();
    if (reason) {
      console.warn(`multi-node test skipped: ${reason}`);
      return;
    }
    const server = s3 as S3Endpoint;
    client = s3ClientFor(server);
    await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
    const url = await (pg as PgServer).createDatabase('svc_multi_node');
    const env = { ...NODE_ENV, SVC_PG_URL: url, SVC_S3_ENDPOINT: server.endpoint, AWS_ACCESS_KEY_ID: server.accessKeyId, AWS_SECRET_ACCESS_KEY: server.secretAccessKey };
    // One at a time: the first migrates the schema (the others would wait on its lock anyway).
    for (const n of [1, 2, 3]) nodes.push(await startServer({ ...env, SVC_NODE_ID: `node-${n}` }));
    for (let i = 0; i < 100; i++) {
      const seen = await Promise.all(nodes.map(async (s) => (await snapshot(s)).placement.nodes.length));
      if (seen.every((n) => n === 3)) break;
      await sleep(100);
    }
  }, 240_000);

  afterAll(async () => {
    await Promise.all(nodes.map((s) => s.stop()));
    client?.destroy();
    if (s3 && 'stop' in s3) await s3.stop();
    if (pg && 'stop' in pg) await pg.stop();
  }, 120_000);

  it('every node sees the other two', async ({ skip }) => {
    const reason = skipReason();
    if (reason) return skip(reason);
    for (const s of nodes) {
      const { placement } = await snapshot(s);
      expect(placement.mode).toBe('multi-node');
      expect(placement.nodes.map((n: any) => n.nodeId).sort()).toEqual(['node-1', 'node-2', 'node-3']);
    }
  });

  it('mixed direct uploads through every node, read back full and ranged from the others', async ({ skip }) => {
    const reason = skipReason();
    if (reason) return skip(reason);
    const tenant = randomUUID();
    const sizes = [100, 5 * KiB, 16 * KiB, 16 * KiB + 1, 200 * KiB, MiB + 17, 3 * MiB + 5];
    const owners = new Set<string>();
    let seed = 1;
    for (const [i, size] of sizes.entries()) {
      for (const localized of [false, true]) {
        const via = nodes[(i + (localized ? 1 : 0)) % 3]!;
        const bytes = seededBytes(size, seed++);
        const answer = await post(via, bytes, localized ? { tenant, session: randomUUID() } : undefined);
        expect(answer.status, JSON.stringify(answer.json)).toBe(201);
        expect(answer.json.blob.id).toBe(contentId(bytes));
        if (localized) owners.add(answer.node!);
        acknowledged.set(answer.json.blob.id, { id: answer.json.blob.id, bytes });
      }
    }
    // Fourteen sessions over three nodes: more than one owner.
    expect(owners.size).toBeGreaterThan(1);
    for (const [n, { id, bytes }] of [...acknowledged.values()].entries()) {
      const from = nodes[(n + 2) % 3]!;
      const full = await fetch(`${from.url}/api/v1/blobs/${id}`);
      expect(full.status).toBe(200);
      expect(Buffer.from(await full.arrayBuffer()).equals(bytes)).toBe(true);
      const start = Math.floor(bytes.length / 3);
      const end = Math.min(bytes.length - 1, start + 70 * KiB);
      const ranged = await fetch(`${nodes[(n + 1) % 3]!.url}/api/v1/blobs/${id}`, { headers: { Range: `bytes=${start}-${end}` } });
      expect(ranged.status).toBe(206);
      expect(Buffer.from(await ranged.arrayBuffer()).equals(bytes.subarray(start, end + 1))).toBe(true);
    }
  });

  describe('resumable sessions split across nodes', () => {
    it('parts go to all three nodes in turn; another node commits; all read it', async ({ skip }) => {
      const reason = skipReason();
      if (reason) return skip(reason);
      const bytes = seededBytes(5 * MiB + 333, 7000);
      const id = randomUUID();
      expect((await fetch(`${nodes[0]!.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': id } })).status).toBe(201);
      const cuts = [0, MiB + 1, 2 * MiB + 7, 3 * MiB, 4 * MiB + 11, bytes.length];
      for (let i = 0; i + 1 < cuts.length; i++) {
        const res = await fetch(`${nodes[i % 3]!.url}/api/v1/uploads/${id}`, {
          method: 'PATCH',
          body: bytes.subarray(cuts[i], cuts[i + 1]) as Uint8Array<ArrayBuffer>,
          headers: { 'Upload-Offset': String(cuts[i]), 'Upload-Part-Id': randomUUID() },
        });
        expect([i, res.status, await res.text()]).toEqual([i, 204, '']);
      }
      const committed = await fetch(`${nodes[2]!.url}/api/v1/uploads/${id}/commit`, { method: 'POST' });
      const status = await json(committed);
      expect(committed.status, JSON.stringify(status)).toBe(200);
      expect(status.committedBlob).toBe(contentId(bytes));
      acknowledged.set(status.committedBlob, { id: status.committedBlob, bytes });
      for (const s of nodes) expect(Buffer.from(await (await fetch(`${s.url}/api/v1/blobs/${status.committedBlob}`)).arrayBuffer()).equals(bytes)).toBe(true);
    });

    it('a session opened on one node, continued on another, is cancelled from the third', async ({ skip }) => {
      const reason = skipReason();
      if (reason) return skip(reason);
      const id = randomUUID();
      expect((await fetch(`${nodes[1]!.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': id } })).status).toBe(201);
      const part = await fetch(`${nodes[2]!.url}/api/v1/uploads/${id}`, { method: 'PATCH', body: seededBytes(2 * MiB + 9, 7100) as Uint8Array<ArrayBuffer>, headers: { 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() } });
      expect(part.status).toBe(204);
      expect((await fetch(`${nodes[0]!.url}/api/v1/uploads/${id}`, { method: 'DELETE' })).status).toBeLessThan(300);
      expect((await fetch(`${nodes[1]!.url}/api/v1/uploads/${id}/commit`, { method: 'POST' })).status).toBeGreaterThanOrEqual(400);
    });
  });

  it('deletes through every node are seen by all; a GC through one node while all three mark', async ({ skip }) => {
    const reason = skipReason();
    if (reason) return skip(reason);
    const ids = [...acknowledged.keys()];
    for (const [n, id] of ids.filter((_, i) => i % 4 === 1).entries()) {
      expect((await fetch(`${nodes[n % 3]!.url}/api/v1/blobs/${id}`, { method: 'DELETE' })).status).toBe(204);
      deleted.add(id);
    }
    for (const id of deleted) for (const s of nodes) expect((await fetch(`${s.url}/api/v1/blobs/${id}`)).status).toBe(404);
    const report = await gc(nodes[1]!, 'run');
    expect(report.quarantined.count).toBeGreaterThan(0);
    for (const { id, bytes } of acknowledged.values()) {
      if (deleted.has(id)) continue;
      const verify = await json(await fetch(`${nodes[0]!.url}/api/v1/blobs/${id}/verify`, { method: 'POST' }));
      expect(verify.verified, `${id} ${JSON.stringify(verify)} ${JSON.stringify(report)} ${nodes.map((s) => s.stderr()).join('\n')}`).toBe(true);
      const got = await fetch(`${nodes[0]!.url}/api/v1/blobs/${id}`);
      const body = await got.arrayBuffer().catch((err) => {
        throw new Error(`${id}: ${err} ${nodes.map((s) => s.stderr()).join('\n')}`);
      });
      expect(Buffer.from(body).equals(bytes)).toBe(true);
    }
  });

  it('a node killed with SIGKILL mid-upload: the survivors serve every acknowledged blob and the stores agree', async ({ skip }) => {
    const reason = skipReason();
    if (reason) return skip(reason);
    victim = nodes[2]!;
    survivors = [nodes[0]!, nodes[1]!];
    // A session whose first part the victim acknowledged: the survivors finish it after its death.
    const session = randomUUID();
    const sessionBytes = seededBytes(3 * MiB + 71, 7200);
    const cut = 2 * MiB + 5;
    expect((await fetch(`${victim.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': session } })).status).toBe(201);
    const first = await fetch(`${victim.url}/api/v1/uploads/${session}`, { method: 'PATCH', body: sessionBytes.subarray(0, cut) as Uint8Array<ArrayBuffer>, headers: { 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() } });
    expect(first.status).toBe(204);
    const sent = { bytes: 0 };
    const large = slowUpload(victim, 96 * MiB, sent);
    while (sent.bytes < 12 * MiB) await sleep(20);
    // Uploads to the survivors go on while the victim dies.
    const during = Promise.all([0, 1, 2, 3].map(async (i) => {
      const bytes = seededBytes(300 * KiB + i, 8000 + i);
      const answer = await post(survivors[i % 2]!, bytes);
      if (answer.status === 201) acknowledged.set(answer.json.blob.id, { id: answer.json.blob.id, bytes });
      return answer.status;
    }));
    await victim.kill9();
    expect(await large).not.toBe(201);
    expect(await during).toEqual([201, 201, 201, 201]);

    // The victim's heartbeat expires; then the survivors own every session and GC stops waiting for it.
    await sleep(TTL_MS + 500);
    for (const s of survivors) expect((await snapshot(s)).placement.nodes.map((n: any) => n.nodeId).sort()).toEqual(['node-1', 'node-2']);
    const rest = await fetch(`${survivors[0]!.url}/api/v1/uploads/${session}`, { method: 'PATCH', body: sessionBytes.subarray(cut) as Uint8Array<ArrayBuffer>, headers: { 'Upload-Offset': String(cut), 'Upload-Part-Id': randomUUID() } });
    expect(rest.status, await rest.text()).toBe(204);
    const committed = await fetch(`${survivors[1]!.url}/api/v1/uploads/${session}/commit`, { method: 'POST' });
    const status = await json(committed);
    expect(committed.status, JSON.stringify(status)).toBe(200);
    expect(status.committedBlob).toBe(contentId(sessionBytes));
    acknowledged.set(status.committedBlob, { id: status.committedBlob, bytes: sessionBytes });

    for (const { id, bytes } of acknowledged.values()) {
      for (const s of survivors) {
        if (deleted.has(id)) {
          expect((await fetch(`${s.url}/api/v1/blobs/${id}`)).status).toBe(404);
          continue;
        }
        const verify = await fetch(`${s.url}/api/v1/blobs/${id}/verify`, { method: 'POST' });
        expect(verify.status).toBe(200);
        expect((await json(verify)).verified, id).toBe(true);
        const got = await fetch(`${s.url}/api/v1/blobs/${id}`);
        expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true);
      }
    }

    // Nothing unreferenced was published: the inventory and the holdings are the acknowledged,
    // not deleted blobs (the killed upload, never complete, is not among them).
    const expected = new Set([...acknowledged.keys()].filter((id) => !deleted.has(id)));
    for (const s of survivors) expect(await inventory(s)).toEqual(expected);
    // The journal reaches the bucket one flush after the catalog (any node flushes what a dead
    // one left, within a second or so).
    let journaled = new Set<string>();
    for (let i = 0; i < 50; i++) {
      journaled = await heldByJournal();
      if (sameSet(journaled, expected)) break;
      await sleep(200);
    }
    expect(journaled).toEqual(expected);

    // A GC through one survivor (quarantine age 0): a run quarantines, the next purges what the
    // first moved (S3 times are whole seconds, hence the pause); then no block object is left
    // that no manifest references.
    await gc(survivors[0]!, 'run');
    await sleep(1100);
    await gc(survivors[1]!, 'purge');
    const referenced = new Set<string>();
    for (const id of expected) for (const b of await blockNames(survivors[0]!.url, id)) referenced.add(b);
    const stored = await objects('blocks/');
    expect(stored.filter((name) => !referenced.has(name))).toEqual([]);
    expect(await objects('quarantine/')).toEqual([]);
    // And every acknowledged blob still verifies after the purge.
    for (const id of expected) {
      const verify = await fetch(`${survivors[1]!.url}/api/v1/blobs/${id}/verify`, { method: 'POST' });
      expect((await json(verify)).verified, id).toBe(true);
    }
  });
});
