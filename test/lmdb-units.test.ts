// The LMDB units store's own choices (engine/store/lmdb/unit-store.ts, env.ts): records stored as
// plain msgpack maps, records of the older form (msgpackr's records, their definition inline)
// still read and updated; and the environment's commit policy (CatalogEnv.commitsAtOnce): a small
// commit runs synchronously only under relaxed durability, while small commits are sparse and no
// asynchronous one is in flight; mixed synchronous and batched commits keep every unit's
// preconditions.
import { afterEach, describe, expect, it } from 'vitest';
import { CatalogEnv, LmdbUnitStore, table } from '../dist/engine/store/index.js';
import { tempRoot } from './helpers/server.js';

const opened: CatalogEnv[] = [];
afterEach(async () => {
  for (const env of opened.splice(0)) await env.close();
});

function open(durability: 'strict' | 'relaxed'): { env: CatalogEnv; units: LmdbUnitStore } {
  const env = CatalogEnv.open(tempRoot('svc-lmdb-units-'), durability);
  opened.push(env);
  return { env, units: new LmdbUnitStore(env) };
}

const RECORDS = table<{ name: string; owner: { tenant: string }; n: number }, [string, string]>('test_records');
const COUNTERS = table<{ count: number }, string>('test_counters');
const waitMs = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('LMDB units: how records are stored', () => {
  it('as plain msgpack maps, not msgpackr records with their definition inline', async () => {
    const { env, units } = open('relaxed');
    await units.run((unit) => unit.put(RECORDS, ['a', 'b'], { name: 'x', owner: { tenant: 't' }, n: 1 }));
    const bytes = env.database('test_records', { encoding: 'binary' }).getBinary(['a', 'b'])!;
    // 0xd4 0x72: msgpackr's record definition; 0xde: a map16.
    expect(bytes[0]).toBe(0xde);
    expect(await units.get(RECORDS, ['a', 'b'])).toEqual({ name: 'x', owner: { tenant: 't' }, n: 1 });
  });

  it('reads and updates records written in the older form (msgpackr records)', async () => {
    const { env, units } = open('relaxed');
    const older = env.database<unknown, [string, string]>('test_records');
    await older.put(['a', 'b'], { name: 'old', owner: { tenant: 't' }, n: 1 });
    expect(env.database('test_records', { encoding: 'binary' }).getBinary(['a', 'b'])!.subarray(0, 2)).toEqual(Buffer.from([0xd4, 0x72]));
    expect(await units.get(RECORDS, ['a', 'b'])).toEqual({ name: 'old', owner: { tenant: 't' }, n: 1 });
    const seen = await units.run(async (unit) => {
      const record = (await unit.get(RECORDS, ['a', 'b']))!;
      unit.put(RECORDS, ['a', 'b'], { ...record, n: record.n + 1 });
      return record.n;
    });
    expect(seen).toBe(1);
    expect(await units.get(RECORDS, ['a', 'b'])).toEqual({ name: 'old', owner: { tenant: 't' }, n: 2 });
  });
});

describe('CatalogEnv.commitsAtOnce', () => {
  it('never under strict durability, nor for a commit that is not small', async () => {
    const strict = open('strict').env;
    await waitMs(2);
    expect(strict.commitsAtOnce(true)).toBe(false);
    const relaxed = open('relaxed').env;
    await waitMs(2);
    expect(relaxed.commitsAtOnce(false)).toBe(false);
  });

  it('under relaxed durability: a small commit when commits are sparse and none is in flight', async () => {
    const { env } = open('relaxed');
    await waitMs(2);
    expect(env.commitsAtOnce(true)).toBe(true);
    // Asked for again at once (within 0.1 ms: most of 100 calls in a row, however loaded the host): not sparse, they join the batch.
    const again = Array.from({ length: 100 }, () => env.commitsAtOnce(true));
    expect(again.filter((atOnce) => !atOnce).length).toBeGreaterThan(50);
    await waitMs(2);
    let release!: () => void;
    const inFlight = env.batched(() => new Promise<void>((resolve) => (release = resolve)));
    await waitMs(2);
    expect(env.commitsAtOnce(true)).toBe(false);
    release();
    await inFlight;
    await waitMs(2);
    expect(env.commitsAtOnce(true)).toBe(true);
  });

  it('concurrent units on one record, committed synchronously and batched, each commit once', async () => {
    const { units } = open('relaxed');
    const increment = () =>
      units.run(async (unit) => {
        const current = (await unit.get(COUNTERS, 'c'))?.count ?? 0;
        unit.put(COUNTERS, 'c', { count: current + 1 });
      });
    for (let wave = 0; wave < 10; wave++) {
      // A lone one (sparse: synchronous), then a burst (batched, conflicting, run again).
      await waitMs(1);
      await increment();
      await Promise.all(Array.from({ length: 20 }, increment));
    }
    expect(await units.get(COUNTERS, 'c')).toEqual({ count: 210 });
  });
});
