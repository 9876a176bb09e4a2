/**
 * Units of work on LMDB and on PostgreSQL, timed roughly: 2000 single-key units (each reads its
 * key, then writes it: one precondition, one write) one after another, then 2000 with 16 in
 * flight. Keys are distinct, so no unit conflicts: this is the cost of a unit, not of contention.
 * PostgreSQL is a throwaway local cluster (bench/postgres-server.ts: fsync and synchronous_commit
 * off), so compare it with LMDB `relaxed`.
 *
 *   npm run build && node dist/bench/units.js
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CatalogEnv } from '../engine/store/lmdb/env.js';
import { LmdbUnitStore } from '../engine/store/lmdb/unit-store.js';
import { PgBlobCatalog } from '../engine/store/pg/blob-catalog.js';
import { type UnitStore, table } from '../engine/store/unit-store.js';
import { requirePostgres } from './postgres-server.js';

const UNITS = 2000;

async function timed(store: UnitStore, name: string, inFlight: number): Promise<string> {
  const t = table<{ n: number; note: string }, [string, number]>(name);
  let next = 0;
  const started = process.hrtime.bigint();
  const worker = async () => {
    for (let i = next++; i < UNITS; i = next++) {
      await store.run(async (u) => {
        const seen = await u.get(t, ['k', i]);
        u.put(t, ['k', i], { n: (seen?.n ?? 0) + 1, note: 'a small record' });
      });
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if ((await store.count(t)) !== UNITS) throw new Error(`${name}: ${await store.count(t)} keys, not ${UNITS}`);
  return `${String(inFlight).padStart(2)} in flight: ${(ms / 1000).toFixed(2)} s, ${Math.round((UNITS * 1000) / ms)} units/s, ${((ms * inFlight) / UNITS).toFixed(2)} ms per unit`;
}

async function measure(label: string, store: UnitStore): Promise<void> {
  await timed(store, 'warmup', 16);
  console.log(`${label.padEnd(16)} ${await timed(store, 'sequential', 1)}`);
  console.log(`${label.padEnd(16)} ${await timed(store, 'concurrent', 16)}`);
}

for (const durability of ['relaxed', 'strict'] as const) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-units-'));
  const env = CatalogEnv.open(root, durability);
  try {
    await measure(`lmdb ${durability}`, new LmdbUnitStore(env));
  } finally {
    await env.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

const server = await requirePostgres();
try {
  const catalog = await PgBlobCatalog.open(await server.createDatabase('units'), { poolSize: 10 });
  try {
    await measure('postgres', catalog.unitStore());
  } finally {
    await catalog.close();
  }
} finally {
  await server.stop();
}
