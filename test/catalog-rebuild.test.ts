// `svc catalog rebuild` over real parts: a pg-s3 server (PostgreSQL of the test's own, s3rver)
// with security on and two tenants; its database dropped; the catalog rebuilt from the bucket
// alone by the command; the server started again on the new database serves the same blobs.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { openPool } from '../dist/engine/store/pg/pool.js';
import { S3Journal } from '../dist/engine/store/s3/journal.js';
import { type PgServer, startPostgres } from './helpers/postgres.js';
import { Relay } from './helpers/relay.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const run = promisify(execFile);
const MAIN = fileURLToPath(new URL('../dist/server/main.js', import.meta.url));
const DATABASE = 'rebuild';

interface Blob {
  id: string;
  bytes: Buffer;
  /** Tenant → the media type it published the blob with. */
  holders: Record<string, string>;
}

describe('svc catalog rebuild (pg-s3)', () => {
  let pg: PgServer | { skip: string };
  let s3: S3rver;
  let client: S3Client;
  let env: Record<string, string>;
  const root = tempRoot('svc-rebuild-');
  const servers: TestServer[] = [];

  beforeAll(async () => {
    pg = await startPostgres();
    if ('skip' in pg) return;
    s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: join(mkdtempSync(join(os.tmpdir(), 'svc-rebuild-s3-')), 's3') });
    const { port } = (await s3.run()) as { port: number };
    const endpoint = `http://127.0.0.1:${port}`;
    client = new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
    await client.send(new CreateBucketCommand({ Bucket: 'rebuild' }));
    env = {
      SVC_BLOB_BACKEND: 'pg-s3',
      SVC_PG_URL: await pg.createDatabase(DATABASE),
      SVC_PG_POOL: '4',
      SVC_S3_ENDPOINT: endpoint,
      SVC_S3_BUCKET: 'rebuild',
      SVC_S3_PREFIX: 'svc/',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      SVC_SECURITY_ENABLED: 'true',
      SVC_DEV_SHARED_SECRET: 'catalog-rebuild-test-secret-0123456789',
    };
  });

  afterAll(async () => {
    for (const server of servers) await server.stop();
    client?.destroy();
    await s3?.close();
    if (pg && 'stop' in pg) await pg.stop();
  });

  async function serve(more: Record<string, string> = {}, dir = root): Promise<TestServer> {
    const server = await startServer({ ...env, ...more }, dir);
    servers.push(server);
    return server;
  }

  async function stop(server: TestServer): Promise<void> {
    await server.stop();
    servers.splice(servers.indexOf(server), 1);
  }

  async function tokenFor(server: TestServer, tenant: string): Promise<Record<string, string>> {
    const res = await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: tenant, scope: 'blob.* observability.read' }) });
    expect(res.status).toBe(200);
    return { Authorization: `Bearer ${((await res.json()) as { access_token: string }).access_token}` };
  }

  async function upload(server: TestServer, tenant: string, bytes: Buffer, mediaType: string): Promise<string> {
    const res = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { ...(await tokenFor(server, tenant)), 'Content-Type': mediaType }, body: new Uint8Array(bytes) });
    expect([200, 201]).toContain(res.status);
    return ((await res.json()) as { blob: { id: string } }).blob.id;
  }

  async function listing(server: TestServer, tenant: string): Promise<{ id: string; mediaType: string; size: number }[]> {
    const res = await fetch(`${server.url}/api/v1/blobs?limit=100`, { headers: await tokenFor(server, tenant) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { blobs: { id: string; mediaType: string; size: number }[] }).blobs;
  }

  async function counts(server: TestServer): Promise<{ blobs: number; blocks: number; usedBytes: number }> {
    const res = await fetch(`${server.url}/api/ops/v1/snapshot`, { headers: await tokenFor(server, 'ops') });
    const { storage } = (await res.json()) as { storage: { blobs: number; blocks: number; usedBytes: number } };
    return { blobs: storage.blobs, blocks: storage.blocks, usedBytes: storage.usedBytes };
  }

  async function retained(tenants: string[]): Promise<number[]> {
    const catalog = await PgBlobCatalog.open(env.SVC_PG_URL, { poolSize: 1 });
    try {
      return await Promise.all(tenants.map((t) => catalog.retainedBytes(t)));
    } finally {
      await catalog.close();
    }
  }

  /** The journal under `prefix`: its entries, and the (tenant, blob) pairs whose last entry is a put. */
  async function journal(prefix: string): Promise<{ entries: number; puts: number; removes: number; held: Set<string> }> {
    const last = new Map<string, boolean>();
    let puts = 0;
    let removes = 0;
    const location = { kind: 's3' as const, endpoint: env.SVC_S3_ENDPOINT, region: 'us-east-1', bucket: 'rebuild', prefix, forcePathStyle: true };
    for await (const records of new S3Journal(client, location).listRecords((key: string, err: unknown) => { throw new Error(`${key}: ${String(err)}`); })) {
      for (const { entry } of records) {
        const key = entry.op === 'put' ? `${entry.holding.tenant} ${entry.holding.id}` : `${entry.tenant} ${entry.id}`;
        last.set(key, entry.op === 'put');
        if (entry.op === 'put') puts++;
        else removes++;
      }
    }
    return { entries: puts + removes, puts, removes, held: new Set([...last].filter(([, put]) => put).map(([key]) => key)) };
  }

  function rebuild(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return run(process.execPath, [MAIN, 'catalog', 'rebuild', ...args], { env: { ...process.env, SVC_FS_ROOT: root, ...env } })
      .then(({ stdout, stderr }) => ({ code: 0, stdout, stderr }))
      .catch((err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }));
  }

  it('recreates every tenant\'s blobs from the bucket alone, and refuses a catalog that is not empty', async ({ skip }) => {
    if ('skip' in pg) return skip(pg.skip);
    const tenants = ['acme', 'globex'];
    const idOf = (bytes: Buffer) => `sha-256:${createHash('sha256').update(bytes).digest('hex')}:${bytes.length}`;
    const large: Blob = { id: '', bytes: randomBytes(3 * 1024 * 1024 + 17), holders: { acme: 'application/x-large' } };
    const shared: Blob = { id: '', bytes: randomBytes(200 * 1024), holders: { acme: 'image/png', globex: 'application/octet-stream' } };
    const inline: Blob = { id: '', bytes: randomBytes(4096), holders: { globex: 'text/plain' } };
    const sharedInline: Blob = { id: '', bytes: randomBytes(1000), holders: { globex: 'text/csv', acme: 'text/x-acme' } };
    const deleted: Blob = { id: '', bytes: randomBytes(150 * 1024), holders: { acme: 'application/x-gone' } };
    const kept = [large, shared, inline, sharedInline];

    let server = await serve();
    for (const blob of [...kept, deleted]) {
      for (const [tenant, mediaType] of Object.entries(blob.holders)) blob.id = await upload(server, tenant, blob.bytes, mediaType);
      expect(blob.id).toBe(idOf(blob.bytes));
    }
    // A repeat keeps the first publication's media type (and writes no holding).
    await upload(server, 'acme', shared.bytes, 'text/x-repeat');
    const del = await fetch(`${server.url}/api/v1/blobs/${deleted.id}`, { method: 'DELETE', headers: await tokenFor(server, 'acme') });
    expect(del.status).toBe(204);

    const before = { counts: await counts(server), acme: await listing(server, 'acme'), globex: await listing(server, 'globex') };
    expect(before.counts.blobs).toBe(kept.length);
    await stop(server);
    const retainedBefore = await retained(tenants);
    expect(retainedBefore).toEqual(tenants.map((t) => kept.filter((b) => t in b.holders).reduce((n, b) => n + b.bytes.length, 0)));
    // Every first publication by a tenant journaled a put (the repeat none), the removal a remove.
    const journaled = await journal('svc/');
    const holders = kept.reduce((n, b) => n + Object.keys(b.holders).length, 0);
    expect({ puts: journaled.puts, removes: journaled.removes, held: journaled.held.size }).toEqual({ puts: holders + 1, removes: 1, held: holders });

    // The database is lost: a new empty one under the same name.
    const admin = openPool(pg.url, 1);
    try {
      await admin.unsafe(`DROP DATABASE ${DATABASE} WITH (FORCE)`);
      await admin.unsafe(`CREATE DATABASE ${DATABASE}`);
    } finally {
      await admin.end();
    }
    const rebuilt = await rebuild();
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    const summary = JSON.parse(rebuilt.stdout.trim().split('\n').at(-1)!) as Record<string, number>;
    // The deleted blob's block (one: 150 KiB) kept its record until a GC; rebuilt, it has none
    // (GC's listing finds the object no record names). Nothing else differs.
    const after = { blobs: before.counts.blobs, blocks: before.counts.blocks - 1, usedBytes: before.counts.usedBytes - deleted.bytes.length };
    expect(summary).toEqual({ blobs: kept.length, holdings: holders, entries: journaled.entries, blocks: after.blocks, bytes: after.usedBytes, tenants: 2, restoredBlocks: 0, missingBlocks: 0, unreadableSegments: 0 });

    // A second run finds the catalog full: one line, exit 1; --force empties it and rebuilds the same.
    const refused = await rebuild();
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(/not empty.*--force/);
    const forced = await rebuild('--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(JSON.parse(forced.stdout.trim().split('\n').at(-1)!)).toEqual(summary);

    server = await serve();
    expect(await counts(server)).toEqual(after);
    expect(await retained(tenants)).toEqual(retainedBefore);
    for (const tenant of tenants) {
      const listed = await listing(server, tenant);
      const was = before[tenant as 'acme' | 'globex'];
      expect(listed.map(({ id, mediaType, size }) => ({ id, mediaType, size }))).toEqual(was.map(({ id, mediaType, size }) => ({ id, mediaType, size })));
      const auth = await tokenFor(server, tenant);
      for (const blob of [...kept, deleted]) {
        const got = await fetch(`${server.url}/api/v1/blobs/${blob.id}`, { headers: auth });
        if (blob === deleted || !(tenant in blob.holders)) {
          expect(got.status, `${tenant} ${blob.id}`).toBe(404);
          continue;
        }
        expect(got.status).toBe(200);
        expect(got.headers.get('content-type')).toBe(blob.holders[tenant]);
        expect(Buffer.from(await got.arrayBuffer()).equals(blob.bytes)).toBe(true);
        const verified = await fetch(`${server.url}/api/v1/blobs/${blob.id}/verify`, { method: 'POST', headers: auth });
        expect(((await verified.json()) as { verified: boolean }).verified).toBe(true);
      }
    }
    // Publication goes on after a rebuild: a new blob lists first, the deleted one can come back.
    const again = await upload(server, 'acme', deleted.bytes, 'application/x-again');
    expect((await listing(server, 'acme'))[0]!.id).toBe(again);
    await stop(server);
  });

  it('entries a node journaled but had not flushed when it was killed reach the bucket with the next node', async ({ skip }) => {
    if ('skip' in pg) return skip(pg.skip);
    const more = { SVC_PG_URL: await pg.createDatabase('crash'), SVC_S3_PREFIX: 'crash/' };
    const dir = tempRoot('svc-rebuild-crash-');
    // The first node loses S3 once started (a relay cut: a bucket that cannot be reached at start
    // stops the start): its inline blobs publish, its journal waits.
    const s3Url = new URL(env.SVC_S3_ENDPOINT!);
    const relay = new Relay({ host: s3Url.hostname, port: Number(s3Url.port) });
    await relay.open();
    const first = await serve({ ...more, SVC_S3_ENDPOINT: `http://127.0.0.1:${relay.port}` }, dir);
    await relay.cut();
    const ids = await Promise.all(Array.from({ length: 40 }, (_, i) => upload(first, `t${i % 3}`, randomBytes(2000 + i), 'application/octet-stream')));
    expect((await journal('crash/')).entries).toBe(0);
    await first.kill9();
    servers.splice(servers.indexOf(first), 1);
    // Whatever the killed node had not written is still in the catalog: the next node writes it.
    const second = await serve(more, dir);
    const deadline = Date.now() + 10_000;
    let journaled = await journal('crash/');
    while (journaled.held.size < ids.length && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      journaled = await journal('crash/');
    }
    expect(journaled.held).toEqual(new Set(ids.map((id, i) => `t${i % 3} ${id}`)));
    await stop(second);
  });

  it('a publication the quota refuses journals nothing', async ({ skip }) => {
    if ('skip' in pg) return skip(pg.skip);
    const dir = tempRoot('svc-rebuild-quota-');
    const policy = join(dir, 'policy.json');
    writeFileSync(policy, JSON.stringify({ tenants: { tight: { quotaBytes: 6000 } } }));
    const server = await serve({ SVC_PG_URL: await pg.createDatabase('quota'), SVC_S3_PREFIX: 'quota/', SVC_TENANT_POLICY_FILE: policy }, dir);
    await upload(server, 'tight', randomBytes(4096), 'application/octet-stream');
    const refused = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: await tokenFor(server, 'tight'), body: new Uint8Array(randomBytes(4096)) });
    expect(refused.status).toBe(507);
    await stop(server);
    const journaled = await journal('quota/');
    expect({ puts: journaled.puts, removes: journaled.removes, held: journaled.held.size }).toEqual({ puts: 1, removes: 0, held: 1 });
  });
});
