// Issue 37: a tenant's cluster share never leaves a request waiting without end. Two, then three
// pg-s3 nodes on one PostgreSQL and one bucket (s3rver), security on, a tenant policy of
// `maxConcurrent: 1, maxQueued: 4` and a short SVC_TENANT_QUEUE_WAIT: an idle tenant's download
// answers on every node (each node has a slot, however small its share); a download queued
// behind a held upload is 503 tenant_queue_timeout with Retry-After once the wait is over; queued
// downloads whose clients leave are out of the queue at once and the next one takes their place;
// a node that joins refills no principal's budget. Then two s3 nodes on radosgw (several s3 nodes
// need conditional writes): the documents node enforces the whole figures for /v1, its share for
// the rest (engine/tenancy/cluster-share.ts, docs/security.md "Tenant policy on several nodes").
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devToken } from './helpers/docs-client.js';
import { type PgServer, startPostgres } from './helpers/postgres.js';
import { type S3Endpoint, type S3Skip, s3ClientFor, startRadosgw, startS3rver } from './helpers/s3-servers.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const QUEUE_WAIT_S = 3;
const SLOTS = { maxConcurrent: 1, maxQueued: 4 };
const POLICY = {
  default: SLOTS,
  tenants: {
    // 60 requests a minute: 30 per node of two.
    rate: { requestsPerMinute: 60 },
    // s3: 6 requests a minute for the cluster (3 per node of two); 2 slots (1 per node of two).
    docs: { requestsPerMinute: 6 },
    'docs-slots': { maxConcurrent: 2, maxQueued: 0 },
  },
};
const SCOPE = 'blob.read blob.write doc.create doc.read';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function policyFile(): string {
  const file = path.join(tempRoot('svc-share-policy-'), 'policy.json');
  fs.writeFileSync(file, JSON.stringify(POLICY));
  return file;
}

const token = (s: TestServer, org: string, sub = 'alice') => devToken(s.url, { org_id: org, sub, scope: SCOPE });
const bearer = (t: string) => ({ Authorization: `Bearer ${t}` });

async function usage(s: TestServer, t: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${s.url}/api/v1/usage`, { headers: bearer(t) });
  return { status: res.status, body: await res.json() };
}

/** Until every node lists `count` live nodes, and then long enough for each share tracker (every 2 s) to read them. */
async function settled(nodes: TestServer[], count: number): Promise<void> {
  const ops = await devToken(nodes[0]!.url, { org_id: 'ops', scope: 'observability.read' });
  for (const until = Date.now() + 30_000; ; await sleep(100)) {
    const seen = await Promise.all(nodes.map(async (s) => ((await (await fetch(`${s.url}/api/ops/v1/snapshot`, { headers: bearer(ops) })).json()) as any).placement.nodes.length));
    if (seen.every((n) => n === count)) break;
    if (Date.now() > until) throw new Error(`the nodes see ${seen.join(', ')} live nodes, not ${count}`);
  }
  await sleep(3000);
}

/** Until `read` of the node's usage for `t` is `value` (10 s at most). */
async function usageReaches(s: TestServer, t: string, read: (u: any) => unknown, value: unknown): Promise<void> {
  let last: unknown;
  for (const until = Date.now() + 10_000; Date.now() < until; await sleep(20)) {
    last = read((await usage(s, t)).body);
    if (last === value) return;
  }
  throw new Error(`usage reads ${JSON.stringify(last)}, not ${JSON.stringify(value)}, after 10 s`);
}

/** A request whose body is still being sent (an upload holds its tenant's slot): `finish` sends the rest, `done` is the status (0: the connection broke). */
function heldUpload(s: TestServer, t: string, urlPath: string, method: string, length: number): { finish: () => void; done: Promise<number> } {
  const req = http.request(`${s.url}${urlPath}`, { method, headers: { ...bearer(t), 'Content-Length': String(length), 'Content-Type': 'application/octet-stream' } });
  const done = new Promise<number>((resolve) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', () => resolve(0));
  });
  req.write(randomBytes(1024));
  return { finish: () => req.end(randomBytes(length - 1024)), done };
}

/** A download whose client can leave (`leave`: the connection closes); `done` is the status, 0 once it left. */
function download(s: TestServer, t: string, id: string): { leave: () => void; done: Promise<number> } {
  const req = http.get(`${s.url}/api/v1/blobs/${id}`, { headers: bearer(t) });
  let left = false;
  const done = new Promise<number>((resolve) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', () => resolve(0));
    req.on('close', () => left && resolve(0));
  });
  return {
    leave: () => {
      left = true;
      req.destroy();
    },
    done,
  };
}

/** A blob of tenant `t`, stored through `s`. */
async function blobOf(s: TestServer, t: string): Promise<string> {
  // A node without a slot would hold it for nothing (the code this replaces): not longer than 15 s.
  const res = await fetch(`${s.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), body: randomBytes(20_000), signal: AbortSignal.timeout(15_000) });
  expect(res.status).toBe(201);
  return ((await res.json()) as { blob: { id: string } }).blob.id;
}

/**
 * Requests until the first 429 (at most 100): how many passed, and the most a bucket of
 * `perMinute` (this node's share) lets through in the time they took (it refills while they run).
 */
async function spend(send: () => Promise<number>, perMinute: number): Promise<{ allowed: number; most: number }> {
  const started = Date.now();
  let allowed = 0;
  while (allowed < 100 && (await send()) !== 429) allowed++;
  return { allowed, most: perMinute + Math.ceil(((Date.now() - started) / 60_000) * perMinute) + 1 };
}

/** A download of an idle tenant through every node: each answers 200 (admitted at once: a node without a slot held it for nothing). */
async function idleDownloads(nodes: TestServer[], tenant: string): Promise<void> {
  const t = await token(nodes[0]!, tenant);
  const id = await blobOf(nodes[0]!, t);
  for (const s of nodes) {
    const status = await fetch(`${s.url}/api/v1/blobs/${id}`, { headers: bearer(t), signal: AbortSignal.timeout((QUEUE_WAIT_S + 5) * 1000) }).then(
      async (res) => (await res.arrayBuffer(), res.status),
      (err: Error) => err.name,
    );
    expect({ node: s.url, status }).toEqual({ node: s.url, status: 200 });
  }
}

/** On node `s`: a download queued behind a held upload of its tenant is 503 tenant_queue_timeout once the queue wait is over. */
async function queueTimeout(s: TestServer, tenant: string): Promise<void> {
  const t = await token(s, tenant);
  const id = await blobOf(s, t);
  const held = heldUpload(s, t, '/api/v1/blobs', 'POST', 64 * 1024);
  await usageReaches(s, t, (u) => u.concurrency.inUse, 1);
  const started = Date.now();
  const res = await fetch(`${s.url}/api/v1/blobs/${id}`, { headers: bearer(t), signal: AbortSignal.timeout((QUEUE_WAIT_S + 10) * 1000) }).catch((err: Error) => err.name);
  expect(typeof res === 'string' ? res : res.status).toBe(503);
  const refused = res as Response;
  expect(refused.headers.get('retry-after')).toBe(String(QUEUE_WAIT_S));
  expect(((await refused.json()) as { error: string }).error).toBe('tenant_queue_timeout');
  expect(Date.now() - started).toBeGreaterThanOrEqual(QUEUE_WAIT_S * 1000 - 100);
  held.finish();
  expect(await held.done).toBe(201);
  await usageReaches(s, t, (u) => `${u.concurrency.inUse} ${u.concurrency.queued}`, '0 0');
}

describe('a tenant\'s share on two and three pg-s3 nodes (maxConcurrent 1, maxQueued 4)', () => {
  let pg: PgServer | { skip: string };
  let s3: S3Endpoint;
  let env: Record<string, string>;
  const nodes: TestServer[] = [];
  const skipReason = () => ('skip' in pg ? pg.skip : undefined);
  let rateToken: string;
  let spentAt: number;

  beforeAll(async () => {
    [pg, s3] = await Promise.all([startPostgres(), startS3rver()]);
    if ('skip' in pg) return;
    const client = s3ClientFor(s3);
    await client.send(new CreateBucketCommand({ Bucket: 'svc-share' }));
    client.destroy();
    env = {
      SVC_BLOB_BACKEND: 'pg-s3',
      SVC_PG_URL: await pg.createDatabase('svc_share'),
      SVC_PG_POOL: '4',
      SVC_S3_ENDPOINT: s3.endpoint,
      SVC_S3_BUCKET: 'svc-share',
      AWS_ACCESS_KEY_ID: s3.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
      SVC_DURABILITY: 'relaxed',
      SVC_SECURITY_ENABLED: 'true',
      SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'),
      SVC_TENANT_POLICY_FILE: policyFile(),
      SVC_TENANT_QUEUE_WAIT: `${QUEUE_WAIT_S}s`,
    };
    // One at a time: the first migrates the schema. node-a sorts first (rank 0).
    for (const id of ['node-a', 'node-b']) nodes.push(await startServer({ ...env, SVC_NODE_ID: id }));
    await settled(nodes, 2);
  }, 180_000);

  afterAll(async () => {
    await Promise.all(nodes.map((s) => s.stop()));
    await s3?.stop();
    if (pg && 'stop' in pg) await pg.stop();
  }, 120_000);

  it('two nodes: an idle tenant\'s download answers on every node', async ({ skip }) => {
    if (skipReason()) return skip(skipReason());
    await idleDownloads(nodes, 'idle-2');
  });

  it('two nodes: a download queued past SVC_TENANT_QUEUE_WAIT is 503 tenant_queue_timeout with Retry-After, on each node', async ({ skip }) => {
    if (skipReason()) return skip(skipReason());
    for (const [i, s] of nodes.entries()) await queueTimeout(s, `wait-2-${i}`);
  });

  it('two nodes: queued downloads whose clients leave are out of the queue; the next one is admitted', async ({ skip }) => {
    if (skipReason()) return skip(skipReason());
    const s = nodes[0]!;
    const t = await token(s, 'leave');
    const id = await blobOf(s, t);
    const held = heldUpload(s, t, '/api/v1/blobs', 'POST', 64 * 1024);
    await usageReaches(s, t, (u) => u.concurrency.inUse, 1);
    // This node's queue share of 4 on two nodes is 2: both wait, a third is refused.
    const leaving = [download(s, t, id), download(s, t, id)];
    await usageReaches(s, t, (u) => u.concurrency.queued, 2);
    const full = await fetch(`${s.url}/api/v1/blobs/${id}`, { headers: bearer(t) });
    expect(full.status).toBe(429);
    await full.arrayBuffer();
    for (const d of leaving) d.leave();
    expect(await Promise.all(leaving.map((d) => d.done))).toEqual([0, 0]);
    await usageReaches(s, t, (u) => u.concurrency.queued, 0);
    // Their places are free: two more wait, and the upload's end admits them one after the other.
    const next = [download(s, t, id), download(s, t, id)];
    await usageReaches(s, t, (u) => u.concurrency.queued, 2);
    held.finish();
    expect(await held.done).toBe(201);
    expect(await Promise.all(next.map((d) => d.done))).toEqual([200, 200]);
    await usageReaches(s, t, (u) => `${u.concurrency.inUse} ${u.concurrency.queued}`, '0 0');
  });

  it('two nodes: a principal spends its share of requests per minute on one node (30 of 60)', async ({ skip }) => {
    if (skipReason()) return skip(skipReason());
    rateToken = await token(nodes[0]!, 'rate');
    const { allowed, most } = await spend(async () => (await usage(nodes[0]!, rateToken)).status, 30);
    expect(allowed).toBeGreaterThanOrEqual(30);
    expect(allowed).toBeLessThanOrEqual(most);
    spentAt = Date.now();
  });

  it('a third node joins: no budget is refilled; an idle tenant\'s download answers on every node; the queue wait holds', async ({ skip }) => {
    if (skipReason()) return skip(skipReason());
    nodes.push(await startServer({ ...env, SVC_NODE_ID: 'node-c' }));
    await settled(nodes, 3);
    // node-a's bucket keeps its level: spent, refilled by the seconds since (a whole bucket a
    // minute), less this request (1 of its 20); a bucket made anew would say 57.
    const after = await usage(nodes[0]!, rateToken);
    expect(after.status).toBe(200);
    expect(after.body.budgets.requests.remaining).toBeLessThanOrEqual(Math.ceil(((Date.now() - spentAt) / 60_000) * 60));
    await idleDownloads(nodes, 'idle-3');
    await queueTimeout(nodes[2]!, 'wait-3');
  });
});

describe('two s3 nodes: the documents node enforces the whole figures for /v1', () => {
  let s3: S3Endpoint | S3Skip;
  const nodes: TestServer[] = [];
  const skipReason = () => ('skip' in s3 ? s3.skip : undefined);

  beforeAll(async () => {
    s3 = await startRadosgw({ memstoreBytes: 512 * 1024 * 1024 });
    if ('skip' in s3) return;
    const client = s3ClientFor(s3);
    await client.send(new CreateBucketCommand({ Bucket: 'svc-share-s3' }));
    client.destroy();
    const env = {
      SVC_BLOB_BACKEND: 's3',
      SVC_S3_ENDPOINT: s3.endpoint,
      SVC_S3_BUCKET: 'svc-share-s3',
      AWS_ACCESS_KEY_ID: s3.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
      SVC_SECURITY_ENABLED: 'true',
      SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'),
      SVC_TENANT_POLICY_FILE: policyFile(),
      SVC_TENANT_QUEUE_WAIT: `${QUEUE_WAIT_S}s`,
    };
    // s3-a starts first: it claims the document platform.
    for (const id of ['s3-a', 's3-b']) nodes.push(await startServer({ ...env, SVC_NODE_ID: id }));
    await settled(nodes, 2);
  }, 240_000);

  afterAll(async () => {
    await Promise.all(nodes.map((s) => s.stop()));
    if (s3 && 'stop' in s3) await s3.stop();
  }, 120_000);

  it('/v1 requests and operations get the whole figure there; /api/v1 its share', async ({ skip }) => {
    if (skipReason()) return skip(skipReason());
    const [a] = nodes as [TestServer];
    // /api/v1 on s3-a: its share, 3 of 6 requests a minute (the share is settled at two nodes).
    const x = await token(a, 'docs', 'x');
    const api = await spend(async () => (await usage(a, x)).status, 3);
    expect(api.allowed).toBeGreaterThanOrEqual(3);
    expect(api.allowed).toBeLessThanOrEqual(api.most);
    // /v1 on s3-a: the whole figure, 6 requests a minute.
    const y = await token(a, 'docs', 'y');
    const v1 = await spend(async () => {
      const res = await fetch(`${a.url}/v1/schemas`, { headers: bearer(y) });
      await res.arrayBuffer();
      return res.status;
    }, 6);
    expect(v1.allowed).toBeGreaterThanOrEqual(6);
    expect(v1.allowed).toBeLessThanOrEqual(v1.most);
    // Two document uploads at once: the whole maxConcurrent of 2, not s3-a's share of 1.
    const z = await token(a, 'docs-slots', 'z');
    const uploads = [];
    for (let i = 0; i < 2; i++) {
      const created = await fetch(`${a.url}/v1/documents`, { method: 'POST', headers: { ...bearer(z), 'Content-Type': 'application/json' }, body: '{}' });
      expect(created.status).toBe(201);
      const { uploadId } = (await created.json()) as { uploadId: string };
      uploads.push(heldUpload(a, z, `/v1/uploads/${uploadId}/bytes`, 'PUT', 64 * 1024));
    }
    // Both hold a slot: a refused one would have answered 429 at once.
    await usageReaches(a, z, (u) => `${u.concurrency.inUse} ${u.concurrency.queued}`, '2 0');
    for (const u of uploads) u.finish();
    expect(await Promise.all(uploads.map((u) => u.done))).toEqual([204, 204]);
  });
});
