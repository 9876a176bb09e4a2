// What the PostgreSQL catalog keeps beyond the BlobCatalog contract (that is the conformance
// suite's): its schema, created and migrated by svc, and the block records a GC will read.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoredBlock } from '../dist/engine/store/index.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { type PgPool, openPool } from '../dist/engine/store/pg/pool.js';
import { MIGRATIONS, SchemaTooNew, migrate } from '../dist/engine/store/pg/schema.js';
import { type PgServer, startPostgres } from './helpers/postgres.js';

function block(size: number): StoredBlock {
  return { hex: randomBytes(32).toString('hex'), size, checksum: 1n, fresh: true };
}

function publish(catalog: PgBlobCatalog, blocks: StoredBlock[]) {
  const size = blocks.reduce((sum, b) => sum + b.size, 0);
  const hex = createHash('sha256').update(randomBytes(16)).digest('hex');
  return catalog.publish(hex, size, 'application/octet-stream', 'fastcdc', blocks, undefined, { tenant: randomUUID() });
}

describe('PostgreSQL catalog', () => {
  let server: PgServer | { skip: string };
  const pools: PgPool[] = [];
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end({ timeout: 5 })));
    if ('stop' in server) await server.stop();
  });

  it('is migrated once by nodes starting together, is idempotent, and refuses a newer version', async ({ skip }) => {
    if ('skip' in server) return skip(server.skip);
    const url = await server.createDatabase('schema_race');
    const nodes = Array.from({ length: 6 }, () => openPool(url, 2));
    pools.push(...nodes);
    const outcomes = await Promise.all(nodes.map((pool) => migrate(pool)));
    expect(outcomes.filter((o) => o.from === 0)).toHaveLength(1);
    for (const o of outcomes) expect(o.to).toBe(MIGRATIONS.length);
    expect(outcomes.filter((o) => o.from === MIGRATIONS.length)).toHaveLength(nodes.length - 1);

    expect(await migrate(nodes[0])).toEqual({ from: MIGRATIONS.length, to: MIGRATIONS.length });
    expect(await nodes[1]`SELECT version FROM svc_schema`).toEqual([{ version: MIGRATIONS.length }]);

    await nodes[0]`UPDATE svc_schema SET version = ${MIGRATIONS.length + 1}`;
    await expect(migrate(nodes[2])).rejects.toBeInstanceOf(SchemaTooNew);
  });

  it('statement timeouts: a statement past it and a transaction left idle past it fail as catalog_unavailable, the process goes on and the pool serves again', async ({ skip }) => {
    if ('skip' in server) return skip(server.skip);
    const pool = openPool(await server.createDatabase('timeouts'), 2, { statementTimeoutMs: 1000 });
    pools.push(pool);
    await expect(pool`SELECT pg_sleep(3)`).rejects.toMatchObject({ code: 'catalog_unavailable' });
    // The server ends the session while the work awaits something else (a journal flush's S3 write):
    // the connection's error must not end the process (an 'error' event without a listener).
    const idle = pool.begin(async (tx) => {
      await tx`SELECT 1`;
      await new Promise((resolve) => setTimeout(resolve, 2500));
      await tx`SELECT 2`;
    });
    await expect(idle).rejects.toMatchObject({ code: 'catalog_unavailable' });
    expect(await pool`SELECT 3 AS n`).toEqual([{ n: 3 }]);
    // Migrations are not bounded.
    await pool.begin(async (tx) => tx`SELECT pg_sleep(1.5)`, { unbounded: true });
  });

  it('records blocks with their times, touches a reused one at most once a minute, and brings a quarantined one back', async ({ skip }) => {
    if ('skip' in server) return skip(server.skip);
    const url = await server.createDatabase('block_records');
    const catalog = await PgBlobCatalog.open(url, { poolSize: 2 });
    const sql = openPool(url, 1);
    pools.push(sql);
    try {
      const recent = block(100);
      const old = block(200);
      const quarantined = block(300);
      const before = Date.now();
      await publish(catalog, [recent, old, quarantined]);
      const rows = await sql<{ size: number; createdAt: number; touchedAt: number; state: string }[]>`
        SELECT size, created_at AS "createdAt", touched_at AS "touchedAt", state FROM blocks ORDER BY size`;
      expect(rows.map((r) => [r.size, r.state])).toEqual([[100, 'live'], [200, 'live'], [300, 'live']]);
      for (const r of rows) {
        expect(r.createdAt).toBeGreaterThanOrEqual(before - 1);
        expect(r.touchedAt).toBe(r.createdAt);
      }

      // As a GC would leave them: one block referenced 30 s ago, one 2 min ago, one in quarantine.
      const key = (b: StoredBlock) => Buffer.from(b.hex, 'hex');
      await sql`UPDATE blocks SET touched_at = touched_at - 30000 WHERE key = ${key(recent)}`;
      await sql`UPDATE blocks SET touched_at = touched_at - 120000 WHERE key = ${key(old)}`;
      await sql`UPDATE blocks SET state = 'quarantined', quarantined_at = touched_at WHERE key = ${key(quarantined)}`;
      await sql`UPDATE catalog_totals SET blocks = blocks - 1, stored_bytes = stored_bytes - 300 WHERE slot = 0`;
      const [touched] = await sql<{ recent: number; old: number }[]>`SELECT
        (SELECT touched_at FROM blocks WHERE key = ${key(recent)}) AS recent,
        (SELECT touched_at FROM blocks WHERE key = ${key(old)}) AS old`;
      expect(await catalog.totals()).toEqual({ blobs: 1, blocks: 2, storedBytes: 300 });

      const republished = Date.now();
      await publish(catalog, [recent, old, quarantined, block(1)]);
      const after = await sql<{ size: number; touchedAt: number; state: string; quarantinedAt: number | null }[]>`
        SELECT size, touched_at AS "touchedAt", state, quarantined_at AS "quarantinedAt" FROM blocks ORDER BY size`;
      expect(after.map((r) => r.size)).toEqual([1, 100, 200, 300]);
      expect(after[1].touchedAt).toBe(touched.recent);
      expect(after[2].touchedAt).toBeGreaterThanOrEqual(republished - 1);
      expect(after[2].touchedAt).toBeGreaterThan(touched.old);
      expect(after[3]).toMatchObject({ state: 'live', quarantinedAt: null });
      expect(after[3].touchedAt).toBeGreaterThanOrEqual(republished - 1);
      expect(await catalog.totals()).toEqual({ blobs: 2, blocks: 4, storedBytes: 601 });
    } finally {
      await catalog.close();
    }
  });
});
