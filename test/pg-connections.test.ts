// Issue 37: connections to PostgreSQL that cannot hang a node or the cluster (the pg-s3 project
// runs it; fs skips it). A PostgreSQL that stops answering (a relay that stops forwarding, as a
// paused server or a network that drops packets looks) makes a request fail within the statement
// timeout instead of hanging; a node stopped with SIGSTOP (its LISTEN connection no longer reads)
// has its LISTEN connections ended by the live node once its heartbeat expires, so PostgreSQL's
// notification queue does not grow while the others commit, and once it runs again it listens again.
import { afterAll, describe, expect, it } from 'vitest';
import { type PgPool, openPool } from '../dist/engine/store/pg/pool.js';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { Api, devToken } from './helpers/docs-client.js';
import { seededBytes } from './helpers/http.js';
import { Relay } from './helpers/relay.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const shared = TEST_BACKEND === 'pg-s3';
if (!shared) console.warn('pg-connections test skipped: it needs PostgreSQL (the pg-s3 project runs it)');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `promise`, or a failure naming `what` after `ms`. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function until(ms: number, what: string, ok: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(100);
  }
}

const ready = async (server: TestServer) => (await fetch(`${server.url}/api/health/ready`)).status === 200;

describe.skipIf(!shared)('connections to PostgreSQL', () => {
  const servers: TestServer[] = [];
  const relays: Relay[] = [];
  const pools: PgPool[] = [];
  afterAll(async () => {
    for (const s of servers) if (s.proc.exitCode === null) s.proc.kill('SIGCONT');
    for (const r of relays) r.resume();
    await Promise.all(servers.map((s) => s.stop()));
    for (const r of relays) await r.cut().catch(() => {});
    await Promise.all(pools.map((p) => p.end()));
  });

  it('a PostgreSQL that stops answering: a request is a 503 catalog_unavailable within the statement timeout, not a hang; served again once it answers', async () => {
    const root = tempRoot();
    const env = await backendEnv(root);
    const target = new URL(env.SVC_PG_URL!);
    const relay = new Relay({ host: target.hostname, port: Number(target.port) });
    await relay.open();
    relays.push(relay);
    target.hostname = '127.0.0.1';
    target.port = String(relay.port);
    const server = await startServer({ ...env, SVC_PG_URL: target.toString(), SVC_PG_STATEMENT_TIMEOUT: '3s', SVC_HEALTH_TIMEOUT: '2s' }, root);
    servers.push(server);
    const api = new Api(server.url, await devToken(server.url, { scope: 'doc.create doc.read' }));
    const doc = await api.newDocument(seededBytes(5000, 1), { contentType: 'application/octet-stream' });

    relay.pause();
    // The server's statement timeout cannot act (nothing reaches it): the client's, 3 s + 5 s, does.
    const started = Date.now();
    const read = await within(30_000, 'GET /v1/documents/{id} with PostgreSQL paused', api.get(`/v1/documents/${doc.documentId}`));
    expect([read.status, read.json?.error]).toEqual([503, 'catalog_unavailable']);
    // 3 s + 5 s, and slack for a loaded machine; unbounded before.
    expect(Date.now() - started).toBeLessThan(20_000);
    const blob = await within(30_000, 'POST /api/v1/blobs with PostgreSQL paused', fetch(`${server.url}/api/v1/blobs`, { method: 'POST', body: seededBytes(4000, 3) as Uint8Array<ArrayBuffer> }));
    expect([blob.status, ((await blob.json()) as { error: string }).error]).toEqual([503, 'catalog_unavailable']);

    relay.resume();
    await until(20_000, 'ready once PostgreSQL answers again', () => ready(server));
    const again = await api.get(`/v1/documents/${doc.documentId}`);
    expect([again.status, again.json.currentVersionId]).toEqual([200, doc.versionId]);
  });

  it('a SIGSTOPped node: its LISTEN connections are ended once its heartbeat expires and the notification queue does not grow; it listens again when it runs on', async () => {
    const rootA = tempRoot();
    const env = await backendEnv(rootA);
    const admin = openPool(env.SVC_PG_URL!, 1);
    pools.push(admin);
    const listeners = async () =>
      (await admin<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'svc-listen:%'`).map((r) => r.pid);
    const cluster = { ...env, SVC_NODE_TTL: '3s' };
    const a = await startServer({ ...cluster, SVC_NODE_ID: 'node-a' }, rootA);
    servers.push(a);
    await until(15_000, 'node A listens', async () => (await listeners()).length > 0);
    await sleep(500);
    const ofA = new Set(await listeners());
    const b = await startServer({ ...cluster, SVC_NODE_ID: 'node-b' }, tempRoot());
    servers.push(b);
    let ofB: number[] = [];
    await until(15_000, 'node B listens', async () => (ofB = (await listeners()).filter((pid) => !ofA.has(pid))).length > 0);
    await sleep(500);
    ofB = (await listeners()).filter((pid) => !ofA.has(pid));

    process.kill(b.proc.pid!, 'SIGSTOP');
    const stopped = Date.now();
    // The others commit many notifications meanwhile (distinct payloads: PostgreSQL folds equal ones).
    for (let round = 0; round < 5; round++) {
      await admin.unsafe(`SELECT pg_notify('svc_units', 'load-${round}-' || g) FROM generate_series(1, 20000) g`);
    }
    const api = new Api(a.url, await devToken(a.url, { scope: 'doc.create doc.read' }));
    await api.newDocument(seededBytes(3000, 5), { contentType: 'application/octet-stream' });
    let usage = 1;
    await until(30_000, "node B's LISTEN connections ended and the notification queue back below 1e-4", async () => {
      const live = new Set(await listeners());
      [{ usage }] = await admin<{ usage: number }[]>`SELECT pg_notification_queue_usage() AS usage`;
      return ofB.every((pid) => !live.has(pid)) && usage < 1e-4;
    });
    // The TTL (3 s), a heartbeat (1 s), and slack for a loaded machine; never before.
    expect(Date.now() - stopped).toBeLessThan(16_000);
    // A stays served throughout.
    expect(await ready(a)).toBe(true);

    process.kill(b.proc.pid!, 'SIGCONT');
    await until(20_000, 'node B listens again', async () => (await listeners()).some((pid) => !ofA.has(pid) && !ofB.includes(pid)));
    await until(20_000, 'node B ready again', () => ready(b));
  });
});
