// The LMDB units store's own choices (engine/store/lmdb/unit-store.ts, env.ts): records stored as
// plain msgpack maps, records of the older form (msgpackr's records, their definition inline)
// still read and updated; and the environment's commit policy (CatalogEnv.commitsAtOnce, grouped):
// a small commit runs synchronously only under relaxed durability and while no asynchronous one is
// in flight, grouped with the other small commits of its turn of the event loop, each in a child
// transaction (one that throws is undone alone); mixed grouped and batched commits keep every
// unit's preconditions.
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

  it('under relaxed durability: a small commit unless an asynchronous one is in flight', async () => {
    const { env } = open('relaxed');
    expect(env.commitsAtOnce(true)).toBe(true);
    let release!: () => void;
    const inFlight = env.batched(() => new Promise<void>((resolve) => (release = resolve)));
    await waitMs(2);
    expect(env.commitsAtOnce(true)).toBe(false);
    release();
    await inFlight;
    expect(env.commitsAtOnce(true)).toBe(true);
  });

  it('the small commits of one turn are one transaction; one that throws is undone alone and rejects alone', async () => {
    const { env } = open('relaxed');
    const db = env.database<number, string>('test_grouped');
    let transactions = 0;
    const counting = (write: () => unknown) => () => {
      transactions++;
      return write();
    };
    // Count the top-level transactions (a nested call is a child transaction of the group's).
    const transactionSync = env.root.transactionSync.bind(env.root);
    let outer = 0;
    let depth = 0;
    env.root.transactionSync = ((action: () => unknown, flags?: number) => {
      if (depth++ === 0) outer++;
      try {
        return transactionSync(action as () => never, flags as never);
      } finally {
        depth--;
      }
    }) as typeof env.root.transactionSync;
    const refused = new Error('refused');
    const results = await Promise.allSettled([
      env.grouped(counting(() => { void db.put('a', 1); return 'a'; })),
      env.grouped(counting(() => { void db.put('b', 2); throw refused; })),
      env.grouped(counting(() => { void db.put('c', 3); return 'c'; })),
    ]);
    expect(results).toEqual([{ status: 'fulfilled', value: 'a' }, { status: 'rejected', reason: refused }, { status: 'fulfilled', value: 'c' }]);
    expect([db.get('a'), db.get('b'), db.get('c')]).toEqual([1, undefined, 3]);
    expect([transactions, outer]).toEqual([3, 1]);
    // A lone commit in a later turn: a transaction of its own.
    expect(await env.grouped(() => { void db.put('d', 4); return 'd'; })).toBe('d');
    expect([db.get('d'), outer]).toEqual([4, 2]);
  });

  it('a group whose turn ends while an asynchronous commit is in flight joins the batch instead of waiting for its lock', async () => {
    const { env } = open('relaxed');
    const db = env.database<number, string>('test_grouped');
    const transactionSync = env.root.transactionSync.bind(env.root);
    let synchronous = 0;
    env.root.transactionSync = ((action: () => unknown, flags?: number) => {
      synchronous++;
      return transactionSync(action as () => never, flags as never);
    }) as typeof env.root.transactionSync;
    const grouped = [env.grouped(() => { void db.put('x', 1); return 'x'; }), env.grouped(() => { void db.put('y', 2); return 'y'; })];
    let release!: () => void;
    const inFlight = env.batched(() => new Promise<void>((resolve) => (release = resolve)));
    expect(await Promise.all(grouped)).toEqual(['x', 'y']);
    expect([db.get('x'), db.get('y')]).toEqual([1, 2]);
    // The members' child transactions only: no top-level synchronous one.
    expect(synchronous).toBe(2);
    release();
    await inFlight;
  });

  it('concurrent units on one record, grouped and batched, each commit once', async () => {
    const { units } = open('relaxed');
    const increment = () =>
      units.run(async (unit) => {
        const current = (await unit.get(COUNTERS, 'c'))?.count ?? 0;
        unit.put(COUNTERS, 'c', { count: current + 1 });
      });
    for (let wave = 0; wave < 10; wave++) {
      // A lone one, then a burst (grouped in one turn: conflicting, run again).
      await waitMs(1);
      await increment();
      await Promise.all(Array.from({ length: 20 }, increment));
    }
    expect(await units.get(COUNTERS, 'c')).toEqual({ count: 210 });
  });
});
