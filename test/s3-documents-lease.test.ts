// The s3 documents node's claim is a lease in the bucket (engine/store/s3-only/documents-node.ts,
// docs/backends.md "s3"): renewed by its holder, taken over by another node once it lapses (by
// the bucket's clock), kept by a holder stopped cleanly, handed on by `svc nodes
// release-documents` when its holder is gone for good. Several S3-only nodes need a server that
// honours conditional writes: Ceph radosgw (scripts/ceph/start.sh); where Ceph cannot run the
// suite is skipped with the reason. SVC_TEST_REPEATS=n runs each case n more times (the timing
// cases must pass 20 runs in a row).
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from './helpers/backends.js';
import { Api, hsToken } from './helpers/docs-client.js';
import { type S3Endpoint, s3ClientFor, startRadosgw } from './helpers/s3-servers.js';
import { type TestServer, startServer } from './helpers/server.js';

const run = TEST_BACKEND === 's3';
if (!run) console.warn('s3-documents-lease test skipped: the s3 project runs it (several S3-only nodes on radosgw)');

const MAIN = fileURLToPath(new URL('../dist/server/main.js', import.meta.url));
const SECRET = 'a-development-secret-of-at-least-32-bytes';
const WHERE = '(docs/backends.md, "s3")';
const repeats = Number(process.env.SVC_TEST_REPEATS ?? 0);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let radosgw: S3Endpoint | undefined;
let skipReason: string | undefined;
let client: S3Client;
let token: string;
const running: TestServer[] = [];

/** Two nodes on a new bucket; the first to start holds the claim. */
async function cluster(extra: Record<string, string>): Promise<{ a: TestServer; b: TestServer; bucket: string }> {
  const bucket = `svc-lease-${randomUUID().slice(0, 8)}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  const env = {
    SVC_BLOB_BACKEND: 's3',
    SVC_S3_ENDPOINT: radosgw!.endpoint,
    SVC_S3_BUCKET: bucket,
    AWS_ACCESS_KEY_ID: radosgw!.accessKeyId,
    AWS_SECRET_ACCESS_KEY: radosgw!.secretAccessKey,
    SVC_DURABILITY: 'relaxed',
    SVC_DEV_SHARED_SECRET: SECRET,
    ...extra,
  };
  // Minted per case: a run of many repeats outlasts a token's 10 minutes.
  token = await hsToken(SECRET, { scope: 'doc.create doc.read' });
  const a = await startServer(env);
  running.push(a);
  const b = await startServer(env);
  running.push(b);
  return { a, b, bucket };
}

async function nodeId(s: TestServer): Promise<string> {
  return ((await (await fetch(`${s.url}/api/ops/v1/snapshot`)).json()) as { placement: { nodeId: string } }).placement.nodeId;
}

/** GET /v1/documents on `s`: 200 where it serves the document platform, 503 documents_single_node where it does not. */
async function documents(s: TestServer): Promise<{ status: number; error?: string; message?: string }> {
  const r = await new Api(s.url, token).get('/v1/documents?limit=1');
  return { status: r.status, error: r.json?.error, message: r.json?.message };
}

const heldBy = (id: string) => ({ status: 503, error: 'documents_single_node', message: `On the s3 backend the document platform is served by one node, ${id}; send /v1 requests to it ${WHERE}` });

/** Polls until `s` serves /v1, checking that every answer before is a 503; the time it took. */
async function servesWithin(s: TestServer, ms: number): Promise<number> {
  const from = Date.now();
  for (;;) {
    const r = await documents(s);
    if (r.status === 200) return Date.now() - from;
    expect([r.status, r.error]).toEqual([503, 'documents_single_node']);
    if (Date.now() - from > ms) throw new Error(`not serving /v1 within ${ms} ms: ${r.message}`);
    await sleep(100);
  }
}

async function claimOf(bucket: string): Promise<{ v: number; nodeId: string; stoppedAt?: string }> {
  const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'documents-node' }));
  return JSON.parse(Buffer.from(await got.Body!.transformToByteArray()).toString('utf8'));
}

/** `svc nodes release-documents` against `s`. */
function release(s: TestServer, ...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [MAIN, 'nodes', 'release-documents', '--server', s.url, ...args], { env: { ...process.env, SVC_SERVER: '', SVC_TOKEN: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout!.on('data', (d) => (stdout += d));
  proc.stderr!.on('data', (d) => (stderr += d));
  return new Promise((resolve) => proc.once('close', (code) => resolve({ code, stdout, stderr })));
}

describe.skipIf(!run)('the s3 documents node\'s claim: a lease, taken over, handed on (radosgw)', () => {
  beforeAll(async () => {
    const started = await startRadosgw();
    if ('skip' in started) {
      skipReason = started.skip;
      console.warn(`s3-documents-lease test skipped: ${skipReason}`);
      return;
    }
    radosgw = started;
    client = s3ClientFor(started);
  }, 150_000);
  afterEach(async () => {
    for (const s of running.splice(0)) {
      if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGCONT');
      await s.stop();
    }
  });
  afterAll(async () => {
    client?.destroy();
    await radosgw?.stop();
  }, 60_000);
  beforeEach(({ skip }) => {
    if (skipReason) skip(skipReason);
  });

  it('a holder killed with -9: once its lease lapses another node serves /v1, with no edit of the bucket', { repeats }, async () => {
    const { a, b, bucket } = await cluster({ SVC_NODE_TTL: '3s', SVC_DOCUMENTS_LEASE_TTL: '3s' });
    const [aId, bId] = [await nodeId(a), await nodeId(b)];
    const onA = await new Api(a.url, token).newDocument(Buffer.from('written on the first holder'));
    expect(await documents(b)).toEqual(heldBy(aId));
    await a.kill9();
    // Not before the lease (3 s after a's last renewal, at most 1 s before the kill), and soon after.
    const took = await servesWithin(b, 15_000);
    expect(took).toBeGreaterThan(1500);
    expect((await claimOf(bucket)).nodeId).toBe(bId);
    const created = await new Api(b.url, token).post('/v1/documents', {});
    expect(created.status).toBe(201);
    // The documents stay in the data directory of the node that wrote them.
    expect((await new Api(b.url, token).get(`/v1/documents/${onA.documentId}`)).status).toBe(404);
  });

  it('a holder paused (SIGSTOP) past its lease is taken over; resumed, it no longer serves /v1 (never two holders)', { repeats }, async () => {
    const { a, b, bucket } = await cluster({ SVC_NODE_TTL: '3s', SVC_DOCUMENTS_LEASE_TTL: '3s' });
    const [aId, bId] = [await nodeId(a), await nodeId(b)];
    expect((await documents(a)).status).toBe(200);
    expect(await documents(b)).toEqual(heldBy(aId));
    a.proc.kill('SIGSTOP');
    await servesWithin(b, 15_000);
    expect((await claimOf(bucket)).nodeId).toBe(bId);
    a.proc.kill('SIGCONT');
    // From its first request after the pause a answers 503, first for its lapsed lease, then naming b.
    const from = Date.now();
    let last = await documents(a);
    for (;;) {
      expect([last.status, last.error], last.message).toEqual([503, 'documents_single_node']);
      const write = await new Api(a.url, token).post('/v1/documents', {});
      expect(write.status).toBe(503);
      if (last.message === heldBy(bId).message || Date.now() - from > 10_000) break;
      await sleep(100);
      last = await documents(a);
    }
    expect(last).toEqual(heldBy(bId));
    // Still: a never serves again while b holds the claim; b serves.
    await sleep(1500);
    expect(await documents(a)).toEqual(heldBy(bId));
    expect((await documents(b)).status).toBe(200);
    expect((await fetch(`${a.url}/api/health/live`)).status).toBe(200);
  });

  it('svc nodes release-documents hands on the claim of a holder that is gone at once, long before its lease lapses', { repeats }, async () => {
    const { a, b, bucket } = await cluster({ SVC_DOCUMENTS_LEASE_TTL: '60s' });
    const [aId, bId] = [await nodeId(a), await nodeId(b)];
    expect(await documents(b)).toEqual(heldBy(aId));
    await a.kill9();
    const killedAt = Date.now();
    const done = await release(b);
    expect([done.code, done.stderr]).toEqual([0, '']);
    expect(done.stdout).toBe(
      `The document platform (/v1) is now served by node ${bId}, from its own data directory. ` +
        `It was held by node ${aId} (nothing answers at 127.0.0.1:${a.port}), whose documents stay in its data directory.\n`,
    );
    expect((await documents(b)).status).toBe(200);
    expect(Date.now() - killedAt).toBeLessThan(10_000);
    expect((await claimOf(bucket)).nodeId).toBe(bId);
    // Again: the claim is the answering node's already, nothing is handed on.
    const again = await release(b);
    expect([again.code, again.stdout]).toEqual([0, `The document platform (/v1) is served by node ${bId}, the node that answered, already: nothing was handed on (send this to the node that should take it over).\n`]);
  });

  it('release-documents is refused while the holder is live; --force hands it on, and the old holder stops at its next renewal', { repeats }, async () => {
    const { a, b } = await cluster({ SVC_DOCUMENTS_LEASE_TTL: '6s' });
    const [aId, bId] = [await nodeId(a), await nodeId(b)];
    const refused = await release(b);
    expect([refused.code, refused.stdout]).toEqual([1, '']);
    expect(refused.stderr).toBe(
      `svc: 409 documents_holder_live: Node ${aId} holds the document platform and is live (its heartbeat is within SVC_NODE_TTL and 127.0.0.1:${a.port} accepts connections): ` +
        'only the claim of a node that is gone is released; stop it first, or force it (svc nodes release-documents --force)\n',
    );
    expect((await documents(a)).status).toBe(200);
    expect(await documents(b)).toEqual(heldBy(aId));
    const forced = await release(b, '--force');
    expect([forced.code, forced.stdout]).toEqual([0,
      `The document platform (/v1) is now served by node ${bId}, from its own data directory. ` +
        `It was held by node ${aId} (live, forced: it stops serving /v1 at its next renewal, within 2 s), whose documents stay in its data directory.\n`]);
    expect((await documents(b)).status).toBe(200);
    const from = Date.now();
    while ((await documents(a)).status === 200 && Date.now() - from < 10_000) await sleep(100);
    expect(Date.now() - from).toBeLessThan(4000);
    expect(await documents(a)).toEqual(heldBy(bId));
  });

  it('a holder stopped cleanly keeps its claim past the lease (its documents wait for it); release-documents hands it on', { repeats }, async () => {
    const { a, b, bucket } = await cluster({ SVC_NODE_TTL: '3s', SVC_DOCUMENTS_LEASE_TTL: '3s' });
    const [aId, bId] = [await nodeId(a), await nodeId(b)];
    await a.stop();
    const { stoppedAt } = await claimOf(bucket);
    expect(stoppedAt).toBeDefined();
    await sleep(5500);
    expect(await documents(b)).toEqual({
      status: 503, error: 'documents_single_node',
      message: `On the s3 backend the document platform is served by one node, ${aId}, which stopped cleanly at ${stoppedAt}: start it again on its data directory, or hand the document platform on with svc nodes release-documents ${WHERE}`,
    });
    const done = await release(b);
    expect([done.code, done.stdout]).toEqual([0,
      `The document platform (/v1) is now served by node ${bId}, from its own data directory. It was held by node ${aId} (stopped cleanly at ${stoppedAt}), whose documents stay in its data directory.\n`]);
    expect((await documents(b)).status).toBe(200);
  });
});
