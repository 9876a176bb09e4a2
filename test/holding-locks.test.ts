// Two pg-s3 catalogs (two nodes) on one PostgreSQL database and one bucket: a tenant's
// publication and removal of one blob write the holding (S3) and the row (SQL) in two steps, and
// the advisory lock per (tenant, blob) keeps another node's steps from falling in between. The
// classic loss: a removal's late DELETE of the holding after another node published the blob
// again (the bucket would no longer know a blob the catalog holds).
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogJournal, Holding } from '../dist/engine/store/catalog-journal.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { openPool } from '../dist/engine/store/pg/pool.js';
import { S3Holdings } from '../dist/engine/store/s3/holdings.js';
import { type PgServer, startPostgres } from './helpers/postgres.js';
import { type S3Endpoint, s3ClientFor, startS3rver } from './helpers/s3-servers.js';

const SIZE = 4096;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The real journal, with a pause before each DELETE: a node slow between its commit and its S3 call. */
class SlowDeletes implements CatalogJournal {
  constructor(
    private readonly inner: S3Holdings,
    private readonly pauseMs: number,
  ) {}
  putHolding(h: Holding) {
    return this.inner.putHolding(h);
  }
  async deleteHolding(tenant: string, id: string) {
    await sleep(this.pauseMs);
    return this.inner.deleteHolding(tenant, id);
  }
  listHoldings(unreadable?: (key: string, err: unknown) => void) {
    return this.inner.listHoldings(unreadable);
  }
}

function blob(seed: number) {
  const bytes = createHash('sha512').update(`blob ${seed}`).digest();
  const full = Buffer.concat(Array.from({ length: SIZE / bytes.length }, () => bytes));
  return { hex: createHash('sha256').update(full).digest('hex'), bytes: full, id: `sha-256:${createHash('sha256').update(full).digest('hex')}:${SIZE}` };
}

function publish(catalog: PgBlobCatalog, b: ReturnType<typeof blob>, tenant: string) {
  return catalog.publish(b.hex, SIZE, 'application/octet-stream', 'fixed', [], b.bytes, { tenant });
}

describe('holdings of two nodes on one database', () => {
  let pg: PgServer | { skip: string };
  let s3: S3Endpoint;
  let journal: S3Holdings;
  let url: string;
  const catalogs: PgBlobCatalog[] = [];

  beforeAll(async () => {
    pg = await startPostgres();
    if ('skip' in pg) return;
    s3 = await startS3rver();
    const client = s3ClientFor(s3);
    await client.send(new CreateBucketCommand({ Bucket: 'holdings' }));
    journal = new S3Holdings(client, { kind: 's3', endpoint: s3.endpoint, region: s3.region, bucket: 'holdings', prefix: '', forcePathStyle: true });
    url = await pg.createDatabase('two_nodes');
  });
  afterAll(async () => {
    await Promise.all(catalogs.map((c) => c.close()));
    await s3?.stop();
    if (pg && 'stop' in pg) await pg.stop();
  });

  async function holdings(): Promise<Set<string>> {
    const keys = new Set<string>();
    for await (const page of journal.listHoldings()) for (const h of page) keys.add(`${h.tenant} ${h.id}`);
    return keys;
  }

  it("a removal's late DELETE does not take the holding of the publication another node made after it", async ({ skip }) => {
    if ('skip' in pg) return skip(pg.skip);
    const a = await PgBlobCatalog.open(url, { poolSize: 4, journal: new SlowDeletes(journal, 600) });
    const b = await PgBlobCatalog.open(url, { poolSize: 4, journal });
    catalogs.push(a, b);
    const tenant = randomUUID();
    const x = blob(1);
    await publish(a, x, tenant);
    expect(await holdings()).toContain(`${tenant} ${x.id}`);

    const removal = a.remove(x.id, tenant);
    // Node A's removal has committed (the row is gone) and its DELETE is on its way.
    while (await b.get(x.id, tenant)) await sleep(5);
    const started = Date.now();
    const again = await publish(b, x, tenant);
    expect(again.existed).toBe(false);
    expect(await removal).toBe(true);
    // B waited for A's DELETE (the lock), then wrote its holding.
    expect(Date.now() - started).toBeGreaterThan(300);
    expect(await b.get(x.id, tenant)).toBeDefined();
    expect(await holdings()).toContain(`${tenant} ${x.id}`);
  });

  it("a node whose lock connection dies mid-removal makes the holding agree with the catalog again", async ({ skip }) => {
    if ('skip' in pg) return skip(pg.skip);
    const a = await PgBlobCatalog.open(url, { poolSize: 4, journal: new SlowDeletes(journal, 800) });
    const b = await PgBlobCatalog.open(url, { poolSize: 4, journal });
    catalogs.push(a, b);
    const admin = openPool(url, 1);
    try {
      const tenant = randomUUID();
      const x = blob(2);
      await publish(a, x, tenant);
      const removal = a.remove(x.id, tenant);
      while (await b.get(x.id, tenant)) await sleep(5);
      // Node A's kept lock connection dies (an idle timeout, a proxy) while its DELETE is pending:
      // its lock goes, and node B publishes the blob again before A's DELETE lands.
      const [holder] = await admin<{ pid: number }[]>`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = ${0x7376_6368} AND objsubid = 2 AND granted`;
      expect(holder).toBeDefined();
      await admin`SELECT pg_terminate_backend(${holder!.pid})`;
      expect((await publish(b, x, tenant)).existed).toBe(false);
      expect(await removal).toBe(true);
      // A found its lock lost and wrote the holding again as the catalog has it.
      expect(await b.get(x.id, tenant)).toBeDefined();
      expect(await holdings()).toContain(`${tenant} ${x.id}`);
      // And A goes on with a new lock connection.
      await a.remove(x.id, tenant);
      expect(await holdings()).not.toContain(`${tenant} ${x.id}`);
    } finally {
      await admin.end();
    }
  });

  it('racing publications and removals of the same blobs on both nodes leave the bucket holding exactly what the catalog holds', async ({ skip }) => {
    if ('skip' in pg) return skip(pg.skip);
    const a = await PgBlobCatalog.open(url, { poolSize: 4, journal: new SlowDeletes(journal, 3) });
    const b = await PgBlobCatalog.open(url, { poolSize: 4, journal: new SlowDeletes(journal, 1) });
    catalogs.push(a, b);
    // A tenant per blob: s3rver removes a key's emptied directory, which races with a PUT of
    // another key into it (its bug, not the catalog's); one blob per directory avoids it.
    const blobs = [10, 11, 12, 13].map((seed) => ({ ...blob(seed), tenant: randomUUID() }));
    let seed = 0;
    const random = () => randomBytes(1)[0]! + seed++;
    await Promise.all([a, b, a, b].map(async (node) => {
      for (let i = 0; i < 40; i++) {
        const x = blobs[random() % blobs.length]!;
        if (random() % 2) await publish(node, x, x.tenant);
        else await node.remove(x.id, x.tenant);
      }
    }));
    const bucket = await holdings();
    for (const x of blobs) {
      const held = (await a.get(x.id, x.tenant)) !== undefined;
      expect(bucket.has(`${x.tenant} ${x.id}`), x.id).toBe(held);
    }
  });
});
