// Two pg-s3 catalogs (two nodes) on one PostgreSQL database and one bucket, each with its own
// journal flusher: a tenant's publications and removals of the same blobs race on both nodes,
// and afterwards the bucket's journal (for each tenant's blob, the entry with the largest number)
// says exactly what the catalog holds. The journal is written in each mutation's transaction and
// numbered after the tenant's row lock, so no interleaving of nodes can reorder it.
import { createHash, randomUUID } from 'node:crypto';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { S3Journal } from '../dist/engine/store/s3/journal.js';
import { type PgServer, startPostgres } from './helpers/postgres.js';
import { type S3Endpoint, s3ClientFor, startS3rver } from './helpers/s3-servers.js';

const SIZE = 4096;

function blob(seed: number) {
  const unit = createHash('sha512').update(`blob ${seed}`).digest();
  const bytes = Buffer.concat(Array.from({ length: SIZE / unit.length }, () => unit));
  const hex = createHash('sha256').update(bytes).digest('hex');
  return { hex, bytes, id: `sha-256:${hex}:${SIZE}` };
}

describe('the journal of two nodes on one database', () => {
  let pg: PgServer | { skip: string };
  let s3: S3Endpoint;
  beforeAll(async () => {
    pg = await startPostgres();
    if (!('skip' in pg)) s3 = await startS3rver();
  });
  afterAll(async () => {
    await s3?.stop();
    if (pg && 'stop' in pg) await pg.stop();
  });

  it('racing publications and removals of the same blobs on both nodes: the journal says what the catalog holds', async ({ skip }) => {
    if ('skip' in pg) return skip(pg.skip);
    const client = s3ClientFor(s3);
    await client.send(new CreateBucketCommand({ Bucket: 'journal-nodes' }));
    const journal = new S3Journal(client, { kind: 's3', endpoint: s3.endpoint, region: s3.region, bucket: 'journal-nodes', prefix: '', forcePathStyle: true });
    const url = await pg.createDatabase('journal_nodes');
    const [a, b] = await Promise.all([PgBlobCatalog.open(url, { poolSize: 4, journal }), PgBlobCatalog.open(url, { poolSize: 4, journal })]);
    const tenants = [randomUUID(), randomUUID()];
    const blobs = [1, 2, 3, 4].map(blob);
    let x = 12345;
    const random = (n: number) => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return (x >>> 0) % n;
    };
    try {
      await Promise.all([a, b, a, b].map(async (node) => {
        for (let i = 0; i < 60; i++) {
          const { hex, bytes, id } = blobs[random(blobs.length)]!;
          const tenant = tenants[random(tenants.length)]!;
          if (random(2)) await node.publish(hex, SIZE, 'application/octet-stream', 'fixed', [], bytes, { tenant });
          else await node.remove(id, tenant);
        }
      }));
    } finally {
      // Closing flushes what is waiting.
      await Promise.all([a.close(), b.close()]);
    }
    const last = new Map<string, { seq: number; put: boolean }>();
    for await (const records of journal.listRecords()) {
      for (const { seq, entry } of records) {
        const key = entry.op === 'put' ? `${entry.holding.tenant} ${entry.holding.id}` : `${entry.tenant} ${entry.id}`;
        if ((last.get(key)?.seq ?? -1) < seq) last.set(key, { seq, put: entry.op === 'put' });
      }
    }
    const reader = await PgBlobCatalog.open(url, { poolSize: 1 });
    try {
      let held = 0;
      for (const tenant of tenants) {
        for (const { id } of blobs) {
          const inCatalog = (await reader.get(id, tenant)) !== undefined;
          held += Number(inCatalog);
          expect(last.get(`${tenant} ${id}`)?.put ?? false, `${tenant} ${id}`).toBe(inCatalog);
        }
      }
      // Both outcomes occurred (a race that left nothing held, or everything, would prove less).
      expect(held).toBeGreaterThan(0);
      expect(held).toBeLessThan(tenants.length * blobs.length);
    } finally {
      await reader.close();
      client.destroy();
    }
  });
});
