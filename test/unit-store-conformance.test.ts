// One suite for every UnitStore: the node's LMDB (fs, and the embedded state of the other
// backends) and PostgreSQL (pg-s3, a database in a cluster of the test's own) must answer the same
// calls the same way. "Two nodes" are two store instances on one database where the store is
// shared, the one instance where it is embedded. Ranges are pinned twice: by the answers LMDB
// gives (literal expectations run on both) and by comparing both stores on one data set.
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogEnv, LmdbUnitStore, type Table, type Unit, type UnitKey, type UnitRange, type UnitStore, table } from '../dist/engine/store/index.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { type PgPool, openPool } from '../dist/engine/store/pg/pool.js';
import { PgUnitStore, UNITS_CHANNEL } from '../dist/engine/store/pg/unit-store.js';
import { startPostgres } from './helpers/postgres.js';
import { tempRoot } from './helpers/server.js';

interface Opened {
  nodes: [UnitStore, UnitStore];
  /** Cuts every LISTEN connection of a shared store (a network loss). */
  cutListeners?: () => Promise<void>;
  /** Statements the nodes of a shared store have sent to PostgreSQL so far. */
  statements?: () => number;
  /** The blob catalog's block records among `hexes` (hex → size), and its totals: where units record blocks (UnitStore.recordsBlocks). */
  blockRecords?: (hexes: string[]) => Promise<{ records: Map<string, number>; blocks: number; storedBytes: number }>;
  close(): Promise<void>;
}

interface Backend {
  name: string;
  open(): Promise<Opened | { skip: string }>;
}

const backends: Backend[] = [
  {
    name: 'lmdb',
    async open() {
      const root = tempRoot('svc-units-');
      const env = CatalogEnv.open(root, 'relaxed');
      const store = new LmdbUnitStore(env);
      return {
        nodes: [store, store],
        async close() {
          await store.close();
          await env.close();
          fs.rmSync(root, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: 'postgres',
    async open() {
      const server = await startPostgres();
      if ('skip' in server) return server;
      const catalogs: PgBlobCatalog[] = [];
      const pools: PgPool[] = [];
      const stores: PgUnitStore[] = [];
      let sql: PgPool | undefined;
      const close = async () => {
        await Promise.all(stores.map((s) => s.close()));
        await Promise.all(catalogs.map((c) => c.close()));
        await Promise.all(pools.map((p) => p.end()));
        await sql?.end();
        await server.stop();
      };
      try {
        const url = await server.createDatabase('units');
        // Two nodes: each its own pool (and LISTEN connection) on the one database; each statement
        // of a node's store is counted (its pool's tagged template, as the store calls it).
        catalogs.push(await PgBlobCatalog.open(url, { poolSize: 1 })); // migrates
        let statements = 0;
        const counted = (pool: PgPool): PgPool =>
          Object.assign((strings: TemplateStringsArray, ...values: unknown[]) => {
            statements++;
            return (pool as unknown as (s: TemplateStringsArray, ...v: unknown[]) => unknown)(strings, ...values);
          }, pool) as unknown as PgPool;
        pools.push(openPool(url, 8), openPool(url, 8));
        stores.push(new PgUnitStore(counted(pools[0]!)), new PgUnitStore(counted(pools[1]!)));
        sql = openPool(url, 1);
        const cutListeners = async () => {
          await sql!`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ${`svc-listen:${UNITS_CHANNEL}`}`;
        };
        const blockRecords = async (hexes: string[]) => {
          const rows = await sql!<Array<{ hex: string; size: number }>>`SELECT encode(key, 'hex') AS hex, size FROM blocks WHERE key = ANY(${hexes.map((h) => Buffer.from(h, 'hex'))}::bytea[])`;
          const { blocks, storedBytes } = await catalogs[0]!.totals();
          return { records: new Map(rows.map((r) => [r.hex, Number(r.size)])), blocks: Number(blocks), storedBytes: Number(storedBytes) };
        };
        return { nodes: [stores[0]!, stores[1]!], cutListeners, statements: () => statements, blockRecords, close };
      } catch (err) {
        await close();
        throw err;
      }
    },
  },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `done` every 10 ms until it holds or `ms` have passed; answers whether it held. */
async function eventually(done: () => boolean | Promise<boolean>, ms = 10_000): Promise<boolean> {
  for (const deadline = Date.now() + ms; !(await done()); await sleep(10)) if (Date.now() > deadline) return false;
  return true;
}

/**
 * Resolves once `store` hears of the commits of `other` (a shared store's LISTEN is in place): a
 * commit made before that is heard too, since a store calls every listener once it listens.
 */
async function listening(store: UnitStore, other: UnitStore): Promise<void> {
  const t = watchedTable<number, string>();
  let heard = 0;
  const stop = store.watch(t.name, () => heard++);
  try {
    await other.run((u) => u.put(t, 'ready', 1));
    expect(await eventually(() => heard > 0)).toBe(true);
  } finally {
    stop();
  }
}

/** A table no other case uses. */
const fresh = <V, K extends UnitKey = UnitKey>() => table<V, K>(`t-${randomUUID()}`);
/** A table no other case uses, whose commits are announced (UnitStore.watch follows it). */
const watchedTable = <V, K extends UnitKey = UnitKey>() => table<V, K>(`w-${randomUUID()}`, { watched: true });

/** Resolves once `parties` callers have arrived: steps that must all read before any commits. */
function barrier(parties: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return () => {
    if (++arrived >= parties) open();
    return opened;
  };
}

/** Writes `entries` in units of 100. */
async function fill<V>(store: UnitStore, t: Table<V>, entries: Array<[UnitKey, V]>): Promise<void> {
  for (let i = 0; i < entries.length; i += 100) {
    await store.run((u) => {
      for (const [key, value] of entries.slice(i, i + 100)) u.put(t, key, value);
    });
  }
}

const keysOf = (entries: Array<{ key: unknown }>) => entries.map((e) => e.key);

// Mixed numbers, strings and arrays, with neighbours of the bounds below: what the parity and the
// literal expectations read.
const MIXED_KEYS: UnitKey[] = [
  -5, 0, 1, 1.5, 2, 3, 10, 1e9,
  '', 'a', 'a\u0000', 'ab', 'b', 'z', 'é', '\uffff',
  ['a', 1], ['a', 2], ['a', 'x'], ['a', 'x', 1], ['a', '\uffff'], ['b', -1], ['b', 2], [1, 'a'], [2, 'b'], ['\uffff', 1],
];
const mixedValue = (key: UnitKey) => ({ key, n: JSON.stringify(key).length, at: new Date(Date.UTC(2026, 0, 1)), tags: ['x', 1, null, true] });
const BOUNDS: Array<UnitKey | undefined> = [undefined, -10, 0, 1.5, 2.5, 1e10, '', 'a', ['a'], ['a', 1], ['a', '\uffff'], 'ab', 'b', ['b'], 'é', '\uffff', ['\uffff'], ['\uffff', '\uffff']];
const LIMITS = [undefined, 0, 1, 3];

describe.each(backends)('UnitStore conformance: $name', (backend) => {
  let opened: Opened | { skip: string };
  beforeAll(async () => {
    opened = await backend.open();
  }, 120_000);
  afterAll(async () => {
    if ('nodes' in opened) await opened.close();
  });
  function nodes(skip: (note: string) => never): [UnitStore, UnitStore] {
    if ('skip' in opened) skip(opened.skip);
    return opened.nodes;
  }
  /** Statements a shared store's nodes sent so far (undefined: not a PostgreSQL store). */
  const counted = () => ('statements' in opened ? opened.statements?.() : undefined);

  it('put, get, has and remove, in units and outside, on either node', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<{ name: string; at: Date; list: unknown[] }, string>();
    const value = { name: 'one', at: new Date('2026-11-27T10:00:00.000Z'), list: [1, 'two', null, { three: 3 }] };
    expect(await a.get(t, 'k')).toBeUndefined();
    expect(await a.has(t, 'k')).toBe(false);
    expect(await a.run((u) => u.put(t, 'k', value))).toBeUndefined();
    expect(await b.get(t, 'k')).toEqual(value);
    expect(await b.has(t, 'k')).toBe(true);
    expect(await b.run(async (u) => [await u.get(t, 'k'), await u.has(t, 'k'), await u.has(t, 'other')])).toEqual([value, true, false]);
    await b.run((u) => u.remove(t, 'k'));
    expect(await a.get(t, 'k')).toBeUndefined();
    expect(await a.has(t, 'k')).toBe(false);
    // Removing what is absent is no error; a unit that writes nothing returns its result.
    expect(await a.run((u) => u.remove(t, 'k'))).toBeUndefined();
    expect(await a.run(async (u) => (await u.get(t, 'k')) ?? 'absent')).toBe('absent');
    await expect(a.run((u) => u.put(t, 'k', undefined as never))).rejects.toThrow(/undefined/);
    await a.probe();
    await b.probe();
  });

  it('array keys: a prefix range answers the keys under it, in key order', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<number, [string, string | number, ...number[]]>();
    const keys: Array<[string, string | number, ...number[]]> = [['doc', 'b', 1], ['doc', 'a', 2], ['doc', 10], ['doc', 9], ['doca', 1], ['do', 'c'], ['doc', 'a', 1], ['dod', 0]];
    await a.run((u) => keys.forEach((key, i) => u.put(t, key, i)));
    const under = (prefix: UnitKey[]) => b.range(t, { start: prefix, end: [...prefix, '\uffff'] } as UnitRange);
    // Numbers sort before strings; within an array, element by element; a shorter key first.
    expect(keysOf(await under(['doc']))).toEqual([['doc', 9], ['doc', 10], ['doc', 'a', 1], ['doc', 'a', 2], ['doc', 'b', 1]]);
    expect(keysOf(await under(['doc', 'a']))).toEqual([['doc', 'a', 1], ['doc', 'a', 2]]);
    expect((await under(['doc', 'a'])).map((e) => e.value)).toEqual([6, 1]);
    expect(keysOf(await b.range(t, { start: ['doc', '\uffff'], end: ['doc', 0], reverse: true } as UnitRange))).toEqual([['doc', 'b', 1], ['doc', 'a', 2], ['doc', 'a', 1], ['doc', 10], ['doc', 9]]);
    expect(await b.count(t, { start: ['doc'], end: ['doc', '\uffff'] } as UnitRange)).toBe(5);
  });

  it('ranges: start inclusive, end exclusive; reversed from start (the high end) down to end; limit', async ({ skip }) => {
    const [a] = nodes(skip);
    const t = fresh<number>();
    await fill(a, t, [1, 2, 3, 'a', 'b', ['a', 1], ['a', 'x'], ['b', 2]].map((k, i) => [k, i] as [UnitKey, number]));
    const r = async (options: UnitRange) => keysOf(await a.range(t, options));
    // What lmdb-js's getRange answers with ordered-binary keys.
    expect(await r({})).toEqual([1, 2, 3, 'a', ['a', 1], ['a', 'x'], 'b', ['b', 2]]);
    expect(await r({ limit: 0 })).toEqual([]);
    expect(await r({ start: 2, end: 'a' })).toEqual([2, 3]);
    expect(await r({ start: 'a', end: 'b' })).toEqual(['a', ['a', 1], ['a', 'x']]);
    expect(await r({ start: ['a'], end: ['a', '\uffff'] })).toEqual(['a', ['a', 1], ['a', 'x']]);
    expect(await r({ start: 3, end: 1 })).toEqual([]);
    expect(await r({ reverse: true, start: 3, end: 1 })).toEqual([3, 2]);
    expect(await r({ reverse: true, start: 2.5 })).toEqual([2, 1]);
    expect(await r({ reverse: true, end: 'a' })).toEqual([['b', 2], 'b', ['a', 'x'], ['a', 1]]);
    expect(await r({ reverse: true, start: 1, end: 3 })).toEqual([]);
    expect(await r({ reverse: true, limit: 2 })).toEqual([['b', 2], 'b']);
    expect(await r({ start: 1.5, limit: 3 })).toEqual([2, 3, 'a']);
    expect(await a.count(t, {})).toBe(8);
    expect(await a.count(t, { start: 2, end: 'b' })).toBe(5);
    expect(await a.count(t, { reverse: true, start: 'b', end: 2 })).toBe(5);
  });

  it('a step reads its own writes with get (not with range), and a unit reads them after commit', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<string, string>();
    await a.run((u) => u.put(t, 'kept', 'before'));
    const seen = await a.run(async (u) => {
      u.put(t, 'new', 'written');
      u.put(t, 'kept', 'changed');
      u.remove(t, 'kept');
      u.put(t, 'kept', 'again');
      u.put(t, 'gone', 'x');
      u.remove(t, 'gone');
      return { fresh: await u.get(t, 'new'), kept: await u.get(t, 'kept'), gone: await u.has(t, 'gone'), range: keysOf(await u.range(t)) };
    });
    expect(seen).toEqual({ fresh: 'written', kept: 'again', gone: false, range: ['kept'] });
    expect(keysOf(await b.range(t))).toEqual(['kept', 'new']);
    expect(await b.get(t, 'kept')).toBe('again');
  });

  it('a step that throws commits nothing and runs no afterCommit; its error propagates', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<number, string>();
    let after = 0;
    let runs = 0;
    await expect(
      a.run(async (u) => {
        runs++;
        u.put(t, 'x', 1);
        u.put(t, 'y', 2);
        u.afterCommit(() => after++);
        throw new Error('no, thanks');
      }),
    ).rejects.toThrow('no, thanks');
    expect(runs).toBe(1);
    expect(after).toBe(0);
    expect(await b.count(t)).toBe(0);
    expect(await b.get(t, 'x')).toBeUndefined();
  });

  it('50 concurrent read-modify-write increments of one counter (on two nodes) end at exactly 50', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<number, string>();
    let attempts = 0;
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        (i % 2 ? a : b).run(async (u) => {
          attempts++;
          const n = ((await u.get(t, 'counter')) ?? 0) + 1;
          u.put(t, 'counter', n);
          return n;
        }),
      ),
    );
    expect(await a.get(t, 'counter')).toBe(50);
    // Each committed unit saw its own value: every count from 1 to 50 once.
    expect([...results].sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(attempts).toBeGreaterThanOrEqual(50);
  });

  it('50 concurrent additions to one counter (on two nodes) end at exactly 50 without running any step again', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<number, string>();
    const marks = fresh<boolean, number>();
    let attempts = 0;
    const statementsBefore = counted();
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        (i % 2 ? a : b).run(async (u) => {
          attempts++;
          // A read of its own key: a precondition no other unit touches.
          if (await u.has(marks, i)) return;
          u.put(marks, i, true);
          u.add(t, 'counter', 1);
        }),
      ),
    );
    const statements = statementsBefore === undefined ? undefined : counted()! - statementsBefore;
    expect(await a.get(t, 'counter')).toBe(50);
    expect(await b.count(marks)).toBe(50);
    // Both stores add in the commit itself: no step runs twice, and on PostgreSQL each unit sends
    // two statements, its read and its commit (no read of the counter, no commit that failed).
    expect(attempts).toBe(50);
    if (statements !== undefined) expect(statements).toBe(100);
    // Added to twice in one unit: the sum of both.
    await a.run((u) => {
      u.add(t, 'counter', 5);
      u.add(t, 'counter', -2);
    });
    expect(await b.get(t, 'counter')).toBe(53);
  });

  it('200 concurrent units that only add to one counter (on two nodes): the exact sum across 2^32, each committed at its first attempt', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<number, string>();
    // Large and negative deltas: the sum crosses 2^32 (msgpack's float64 form) and back.
    const deltas = Array.from({ length: 200 }, (_, i) => (i % 4 === 3 ? -1_500_000_007 : 2_000_000_011 + i));
    let attempts = 0;
    const statementsBefore = counted();
    await Promise.all(
      deltas.map((delta, i) =>
        (i % 2 ? a : b).run((u) => {
          attempts++;
          u.add(t, 'counter', delta);
        }),
      ),
    );
    const statements = statementsBefore === undefined ? undefined : counted()! - statementsBefore;
    const sum = deltas.reduce((x, y) => x + y, 0);
    expect(sum).toBeGreaterThan(2 ** 32);
    expect(await b.get(t, 'counter')).toBe(sum);
    expect(attempts).toBe(200);
    // On PostgreSQL one statement a unit: its commit, which adds on the server.
    if (statements !== undefined) expect(statements).toBe(200);
    // Back below 2^32 and below 0: the compact integer forms again.
    await a.run((u) => u.add(t, 'counter', -sum - 5));
    expect(await a.get(t, 'counter')).toBe(-5);
    await b.run((u) => u.add(t, 'counter', 5 + 2 ** 31));
    expect(await a.get(t, 'counter')).toBe(2 ** 31);
  });

  it('two units that both see a key absent and insert it: one write wins, the other runs again and sees it', async ({ skip }) => {
    const [a, b] = nodes(skip);
    for (let round = 0; round < 10; round++) {
      const t = fresh<string, string>();
      const bothRead = barrier(2);
      const runs = { A: 0, B: 0 };
      const insert = (name: 'A' | 'B') => async (u: Unit) => {
        runs[name]++;
        const seen = await u.get(t, 'only');
        if (runs[name] === 1) await bothRead();
        if (seen === undefined) u.put(t, 'only', name);
        return seen;
      };
      const [seenA, seenB] = await Promise.all([a.run(insert('A')), b.run(insert('B'))]);
      const stored = await a.get(t, 'only');
      expect(['A', 'B']).toContain(stored);
      const loser = stored === 'A' ? 'B' : 'A';
      // The winner saw the key absent; the loser ran again and saw the winner's write.
      expect(stored === 'A' ? [seenA, seenB] : [seenB, seenA]).toEqual([undefined, stored]);
      expect(runs[stored as 'A' | 'B']).toBe(1);
      expect(runs[loser]).toBeGreaterThanOrEqual(2);
    }
  });

  it('getKnown: the known record is a precondition; a record that changed makes the unit run again and read it', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<{ v: number; tag: string }, string>();
    const out = fresh<number, string>();
    const first = { v: 1, tag: 'claim' };
    expect(await a.insertIfAbsent(t, 'k', first)).toBe(true);
    // Unchanged: what it knew is what it gets, and the unit commits on it.
    expect(await b.run(async (u) => {
      const seen = await u.getKnown(t, 'k', first);
      u.put(out, 'k', seen!.v);
      return seen;
    })).toEqual(first);
    expect(await a.get(out, 'k')).toBe(1);
    // Changed by another unit since: the step runs again (where it was not read) and sees the change.
    await a.run((u) => u.put(t, 'k', { v: 2, tag: 'moved' }));
    const seen: Array<{ v: number } | undefined> = [];
    await b.run(async (u) => {
      const now = await u.getKnown(t, 'k', first);
      seen.push(now);
      u.put(out, 'k', now!.v);
    });
    expect(seen.at(-1)).toEqual({ v: 2, tag: 'moved' });
    expect(await a.get(out, 'k')).toBe(2);
  });

  it('prefetch: records read at once (one statement on PostgreSQL), then answered by get and has; each a precondition', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<{ v: number }, string>();
    const u = fresh<number, [string, number]>();
    const out = fresh<number, string>();
    await a.run((unit) => {
      unit.put(t, 'present', { v: 1 });
      unit.put(u, ['x', 2], 7);
    });
    const before = counted();
    let runs = 0;
    const seen = await b.run(async (unit) => {
      runs++;
      unit.put(t, 'mine', { v: 9 });
      await unit.prefetch([{ table: t, key: 'present' }, { table: t, key: 'absent' }, { table: u, key: ['x', 2] }, { table: t, key: 'mine' }]);
      const got = [await unit.get(t, 'present'), await unit.has(t, 'absent'), await unit.get(u, ['x', 2]), await unit.get(t, 'mine')];
      unit.put(out, 'k', runs);
      return got;
    });
    expect(seen).toEqual([{ v: 1 }, false, 7, { v: 9 }]);
    expect(runs).toBe(1);
    // On PostgreSQL: the prefetch and the commit, no read of each key.
    if (before !== undefined) expect(counted()! - before).toBe(2);
    // A prefetched record changed before the commit: the step runs again and sees the change.
    let read!: () => void;
    let moved!: () => void;
    const wasRead = new Promise<void>((resolve) => (read = resolve));
    const wasMoved = new Promise<void>((resolve) => (moved = resolve));
    const values: Array<{ v: number } | undefined> = [];
    const running = b.run(async (unit) => {
      await unit.prefetch([{ table: t, key: 'present' }]);
      values.push(await unit.get(t, 'present'));
      if (values.length === 1) {
        read();
        await wasMoved;
      }
      unit.put(out, 'k', values.length);
    });
    await wasRead;
    await a.run((w) => w.put(t, 'present', { v: 2 }));
    moved();
    await running;
    expect(values).toEqual([{ v: 1 }, { v: 2 }]);
    expect(await a.get(out, 'k')).toBe(2);
  });

  it('getMany: the latest committed records of several keys in order, absent ones undefined (one statement on PostgreSQL)', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<{ v: number }, string>();
    const u = fresh<number, [string, number]>();
    await a.run((unit) => {
      unit.put(t, 'present', { v: 1 });
      unit.put(u, ['x', 2], 7);
    });
    const before = counted();
    expect(await b.getMany([{ table: u, key: ['x', 2] }, { table: t, key: 'absent' }, { table: t, key: 'present' }, { table: u, key: ['x', 2] }])).toEqual([7, undefined, { v: 1 }, 7]);
    if (before !== undefined) expect(counted()! - before).toBe(1);
    expect(await b.getMany([])).toEqual([]);
    await a.run((unit) => unit.remove(t, 'present'));
    expect(await b.getMany([{ table: t, key: 'present' }])).toEqual([undefined]);
  });

  it('remembered tables: a node\'s copy answers a unit\'s first read; a copy another node made stale never decides an answer', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = table<{ v: number; open: boolean }, string>(`r-${randomUUID()}`, { remembered: true });
    const out = fresh<number, string>();
    await a.run((unit) => unit.put(t, 'k', { v: 1, open: true }));
    // Node a committed it: on PostgreSQL a's next unit reads nothing before its commit.
    const before = counted();
    await a.run(async (unit) => {
      const r = (await unit.get(t, 'k'))!;
      unit.put(t, 'k', { ...r, v: r.v + 1 });
    });
    if (before !== undefined) expect(counted()! - before).toBe(1);
    // b changes it: a's copy is stale. A write on it fails its commit and runs again on a fresh read.
    await b.run(async (unit) => unit.put(t, 'k', { v: 10, open: true }));
    const seen: number[] = [];
    await a.run(async (unit) => {
      const r = (await unit.get(t, 'k'))!;
      seen.push(r.v);
      unit.put(t, 'k', { ...r, v: r.v + 1 });
    });
    expect(seen.at(-1)).toBe(10);
    expect(await b.get(t, 'k')).toEqual({ v: 11, open: true });
    // A step that throws on a stale copy runs again on a fresh read: the answer is the fresh one's.
    await a.get(t, 'k');
    await b.run(async (unit) => unit.put(t, 'k', { v: 20, open: false }));
    await expect(
      a.run(async (unit) => {
        const r = (await unit.get(t, 'k'))!;
        if (r.open) throw new Error(`open at ${r.v}`);
        unit.put(out, 'closed', r.v);
      }),
    ).resolves.toBeUndefined();
    expect(await a.get(out, 'closed')).toBe(20);
    // A step that writes nothing after taking a copy: answered from a fresh read.
    await a.get(t, 'k');
    await b.run(async (unit) => unit.put(t, 'k', { v: 30, open: true }));
    expect(await a.run(async (unit) => (await unit.get(t, 'k'))!.v)).toBe(30);
    // Removed on another node: the copy does not bring it back.
    await a.get(t, 'k');
    await b.run((unit) => unit.remove(t, 'k'));
    expect(await a.run(async (unit) => (await unit.get(t, 'k')) ?? 'gone')).toBe('gone');
  });

  it('insertIfAbsent: written with what goes with it only where the key is absent; 20 at once on two nodes write once', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<{ by: string }, [string, string]>();
    const beside = fresh<number, [number, string]>();
    const also = (n: number, by: string) => [{ table: beside as never, key: [n, by], value: 1 }];
    expect(await a.insertIfAbsent(t, ['x', 'k'], { by: 'first' }, also(1, 'first'))).toBe(true);
    expect(await b.get(t, ['x', 'k'])).toEqual({ by: 'first' });
    expect(await b.insertIfAbsent(t, ['x', 'k'], { by: 'second' }, also(2, 'second'))).toBe(false);
    expect(await a.get(t, ['x', 'k'])).toEqual({ by: 'first' });
    expect(keysOf(await a.range(beside))).toEqual([[1, 'first']]);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).insertIfAbsent(t, ['y', 'k'], { by: `n${i}` }, also(10 + i, `n${i}`))));
    expect(results.filter(Boolean)).toHaveLength(1);
    const winner = results.indexOf(true);
    expect(await b.get(t, ['y', 'k'])).toEqual({ by: `n${winner}` });
    expect(keysOf(await b.range(beside, { start: [10], end: [100] }))).toEqual([[10 + winner, `n${winner}`]]);
  });

  it('insertIfAbsent against a unit that read the key absent: one of them writes it, the unit runs again and sees it if it lost', async ({ skip }) => {
    const [a, b] = nodes(skip);
    for (let round = 0; round < 10; round++) {
      const t = fresh<string, string>();
      const read = barrier(1);
      let runs = 0;
      let inserted: Promise<boolean> | undefined;
      const seen = await a.run(async (u) => {
        runs++;
        const found = await u.get(t, 'only');
        if (runs === 1) {
          await read();
          // Written between the unit's read and its commit.
          inserted = b.insertIfAbsent(t, 'only', 'outside');
          if (round % 2 === 0) await inserted;
        }
        if (found === undefined) u.put(t, 'only', 'unit');
        return found;
      });
      const outside = await inserted!;
      const stored = await b.get(t, 'only');
      if (outside) {
        // The insert landed first: the unit ran again and saw it.
        expect(stored).toBe('outside');
        expect(seen).toBe('outside');
        expect(runs).toBeGreaterThanOrEqual(2);
      } else {
        expect(stored).toBe('unit');
        expect(seen).toBeUndefined();
      }
    }
  });

  it('putIfAbsent: written where the key is absent, its counter added to only then; 40 units at once on two nodes write once, count once, each at its first attempt', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<{ by: number }, [string, string]>();
    const totals = fresh<number, string>();
    await a.run((u) => u.put(t, ['x', 'held'], { by: -1 }));
    await b.run((u) => u.putIfAbsent(t, ['x', 'held'], { by: 0 }, { table: totals, key: 'x', delta: 7 }));
    expect(await a.get(t, ['x', 'held'])).toEqual({ by: -1 });
    expect(await a.get(totals, 'x')).toBeUndefined();
    let attempts = 0;
    const statementsBefore = counted();
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 ? a : b).run((u) => {
          attempts++;
          u.putIfAbsent(t, ['y', String(i % 4)], { by: i }, { table: totals, key: 'y', delta: 10 + (i % 4) });
        }),
      ),
    );
    const statements = statementsBefore === undefined ? undefined : counted()! - statementsBefore;
    // Four keys, each written once (by one of its units), each counted once.
    expect((await b.range(t, { start: ['y'], end: ['z'] })).map((e) => (e.value.by % 4))).toEqual([0, 1, 2, 3]);
    expect(await a.get(totals, 'y')).toBe(10 + 11 + 12 + 13);
    expect(attempts).toBe(40);
    // On PostgreSQL one statement a unit: its commit.
    if (statements !== undefined) expect(statements).toBe(40);
    // Two in one unit counted to one counter, one of them present: the sum of the written one's.
    await a.run((u) => {
      u.putIfAbsent(t, ['y', '0'], { by: 100 }, { table: totals, key: 'y', delta: 1000 });
      u.putIfAbsent(t, ['y', '9'], { by: 101 }, { table: totals, key: 'y', delta: 5 });
      u.add(totals, 'y', 2);
    });
    expect(await b.get(t, ['y', '9'])).toEqual({ by: 101 });
    expect(await b.get(totals, 'y')).toBe(46 + 5 + 2);
  });

  it('putIfAbsent on a key the unit read or wrote is decided on that; an unread one cannot be read after', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<string, string>();
    const totals = fresh<number, string>();
    await a.run((u) => u.put(t, 'held', 'before'));
    await b.run(async (u) => {
      expect(await u.get(t, 'held')).toBe('before');
      u.putIfAbsent(t, 'held', 'not written', { table: totals, key: 'n', delta: 1 });
      await u.prefetch([{ table: t, key: 'free' }]);
      u.putIfAbsent(t, 'free', 'written', { table: totals, key: 'n', delta: 2 });
      u.remove(t, 'gone');
      u.putIfAbsent(t, 'gone', 'back', { table: totals, key: 'n', delta: 4 });
    });
    expect([await a.get(t, 'held'), await a.get(t, 'free'), await a.get(t, 'gone'), await a.get(totals, 'n')]).toEqual(['before', 'written', 'back', 6]);
    await expect(a.run(async (u) => {
      u.putIfAbsent(t, 'unread', 'x');
      await u.get(t, 'unread');
    })).rejects.toThrow(/put if absent/);
    await expect(a.run((u) => {
      u.add(totals, 'n', 1);
      u.putIfAbsent(totals, 'n', 1);
    })).rejects.toThrow(/put if absent/);
    expect([await b.has(t, 'unread'), await b.get(totals, 'n')]).toEqual([false, 6]);
  });

  it('putIfAbsent against a unit that read the key absent: the unit that commits second runs again if it read, and writes nothing if it did not', async ({ skip }) => {
    const [a, b] = nodes(skip);
    for (let round = 0; round < 10; round++) {
      const t = fresh<string, string>();
      const totals = fresh<number, string>();
      let runs = 0;
      let other: Promise<void> | undefined;
      const seen = await a.run(async (u) => {
        runs++;
        const found = await u.get(t, 'only');
        if (runs === 1) {
          // Committed between the unit's read and its commit.
          other = b.run((v) => v.putIfAbsent(t, 'only', 'absent-put', { table: totals, key: 'n', delta: 1 }));
          if (round % 2 === 0) await other;
        }
        if (found === undefined) {
          u.put(t, 'only', 'unit');
          u.add(totals, 'n', 10);
        }
        return found;
      });
      await other;
      const stored = await b.get(t, 'only');
      if (seen === undefined) {
        // The unit committed first: the put if absent found the key and counted nothing.
        expect([stored, await b.get(totals, 'n')]).toEqual(['unit', 10]);
      } else {
        expect([seen, stored, await b.get(totals, 'n')]).toEqual(['absent-put', 'absent-put', 1]);
        expect(runs).toBeGreaterThanOrEqual(2);
      }
    }
  });

  it('recordBlocks: the blob catalog\'s block records written by the commit, once, and only if it commits; a store whose commits cannot refuses', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<string, string>();
    const hex = (n: number) => randomUUID().replace(/-/g, '').padEnd(62, '0') + n.toString(16).padStart(2, '0');
    const blocks = [1, 2, 3].map((n) => ({ hex: hex(n), size: 1000 * n, checksum: 0n, fresh: true }));
    if (!a.recordsBlocks) {
      await expect(a.run((u) => u.recordBlocks(blocks))).rejects.toThrow(/blob catalog/);
      return;
    }
    const recorded = 'blockRecords' in opened ? opened.blockRecords! : skip('no block records to read');
    const hexes = blocks.map((x) => x.hex);
    const before = await recorded(hexes);
    // A unit that throws records nothing.
    await expect(a.run((u) => {
      u.recordBlocks(blocks);
      throw new Error('refused');
    })).rejects.toThrow('refused');
    expect((await recorded(hexes)).records.size).toBe(0);
    // A unit whose read changed before its commit runs again: the blocks are recorded once, with it.
    let runs = 0;
    await a.run(async (u) => {
      runs++;
      await u.get(t, 'k');
      if (runs === 1) await b.run((v) => v.put(t, 'k', 'changed'));
      u.put(t, 'named', 'by the unit');
      u.recordBlocks([blocks[0]!, blocks[1]!, blocks[0]!]);
    });
    expect(runs).toBe(2);
    const once = await recorded(hexes);
    expect([...once.records.entries()].sort()).toEqual([[blocks[0]!.hex, 1000], [blocks[1]!.hex, 2000]].sort());
    expect([once.blocks - before.blocks, once.storedBytes - before.storedBytes]).toEqual([2, 3000]);
    // Recorded again by other units at once (a reused block is touched, not counted again): the new one counted once.
    await Promise.all([a, b, a, b].map((s) => s.run((u) => u.recordBlocks(blocks))));
    const all = await recorded(hexes);
    expect(all.records.size).toBe(3);
    expect([all.blocks - before.blocks, all.storedBytes - before.storedBytes]).toEqual([3, 6000]);
  });

  it('no write skew: two units that each read two keys and write one of them cannot both commit on what they read', async ({ skip }) => {
    const [a, b] = nodes(skip);
    for (let round = 0; round < 5; round++) {
      const t = fresh<string, string>();
      await a.run((u) => {
        u.put(t, 'one', 'on');
        u.put(t, 'two', 'on');
      });
      const bothRead = barrier(2);
      // Each goes off only if the other stays on: at most one may go off. Both first read both on.
      const offIfOtherOn = (mine: string, other: string) => {
        let runs = 0;
        return async (u: Unit) => {
          runs++;
          const [me, them] = [await u.get(t, mine), await u.get(t, other)];
          if (runs === 1) await bothRead();
          if (me === 'on' && them === 'on') u.put(t, mine, 'off');
        };
      };
      await Promise.all([a.run(offIfOtherOn('one', 'two')), b.run(offIfOtherOn('two', 'one'))]);
      const states = [await a.get(t, 'one'), await a.get(t, 'two')];
      expect(states.filter((s) => s === 'off')).toHaveLength(1);
    }
  });

  const appendAt: Array<[string, (u: Unit, t: Table<string, number>) => Promise<number>]> = [
    ['the whole range', (u, t) => u.range(t).then((e) => e.length)],
    ['the last entry (reverse, limit 1)', (u, t) => u.range(t, { reverse: true, limit: 1 }).then((e) => (e[0] ? e[0].key + 1 : 0))],
    ['a bounded range', (u, t) => u.range(t, { start: 0, end: 1000 }).then((e) => e.length)],
  ];
  for (const [what, next] of appendAt) it(`a range is a precondition (${what}): 20 concurrent appends at index = length give keys 0..19, none twice`, async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<string, number>();
    const ids = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 ? a : b).run(async (u) => {
          const at = await next(u, t);
          u.put(t, at, `unit-${i}`);
          return `unit-${i}`;
        }),
      ),
    );
    const entries = await a.range(t);
    expect(keysOf(entries)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(new Set(entries.map((e) => e.value))).toEqual(new Set(ids));
  });

  it('a range is a precondition against inserts under other keys: units that each claim an empty table leave one claim', async ({ skip }) => {
    const [a, b] = nodes(skip);
    for (let round = 0; round < 10; round++) {
      const t = fresh<string, string>();
      const allRead = barrier(4);
      const claim = (name: string) => {
        let runs = 0;
        return async (u: Unit) => {
          runs++;
          const claims = await u.range(t);
          if (runs === 1) await allRead();
          if (claims.length === 0) u.put(t, name, name);
        };
      };
      await Promise.all(['w', 'x', 'y', 'z'].map((name, i) => (i % 2 ? a : b).run(claim(name))));
      expect(await a.count(t)).toBe(1);
    }
  });

  it('a range read without a precondition does not make the unit run again', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<string, string>();
    let runs = 0;
    await a.run(async (u) => {
      runs++;
      await u.range(t, { precondition: false });
      if (runs === 1) await b.run((other) => other.put(t, 'meanwhile', 'x'));
      u.put(t, 'mine', 'y');
    });
    expect(runs).toBe(1);
    expect(keysOf(await a.range(t))).toEqual(['meanwhile', 'mine']);
  });

  it('afterCommit runs once, after the commit, however often the step ran', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<number, string>();
    let runs = 0;
    const calls: Array<Promise<number | undefined>> = [];
    const result = await a.run(async (u) => {
      runs++;
      const n = (await u.get(t, 'n')) ?? 0;
      // Another unit changes what this one read: its first commit fails.
      if (runs === 1) await b.run((other) => other.put(t, 'n', 100));
      u.put(t, 'n', n + 1);
      // What the callback sees is the committed state, on any node.
      u.afterCommit(() => calls.push(b.get(t, 'n')));
      return n + 1;
    });
    expect(runs).toBe(2);
    expect(result).toBe(101);
    expect(calls).toHaveLength(1);
    expect(await calls[0]).toBe(101);
    // A unit that writes nothing runs its afterCommit too.
    let read = 0;
    await a.run((u) => u.afterCommit(() => read++));
    expect(read).toBe(1);
  });

  it('watch: a listener runs after a commit that wrote its table, on this node and on another', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = watchedTable<number, string>();
    const other = watchedTable<number, string>();
    const calls = { a: 0, b: 0 };
    const stopA = a.watch(t.name, () => calls.a++);
    const stopB = b.watch(t.name, () => calls.b++);
    try {
      // Both nodes listening, so that the commit below cannot come before.
      if (a.shared) await Promise.all([listening(a, b), listening(b, a)]);
      const before = { ...calls };
      await a.run((u) => u.put(t, 'k', 1));
      // This node's listeners before run() resolves.
      expect(calls.a).toBeGreaterThan(before.a);
      expect(await eventually(() => calls.b > before.b)).toBe(true);
      // Another table's commit calls neither (this node's listeners at least not at once).
      const then = { ...calls };
      await b.run((u) => u.put(other, 'k', 1));
      expect(calls.b).toBe(then.b);
      // A unit that reads only calls nobody.
      await b.run((u) => u.get(t, 'k'));
      expect(calls.b).toBe(then.b);
      // The other direction, and after stopping one.
      stopA();
      const now = { ...calls };
      await b.run((u) => u.put(t, 'k', 2));
      expect(calls.b).toBeGreaterThan(now.b);
      if (a !== b) {
        // The notifications of one connection arrive in commit order: once a hears of a later
        // commit, it has heard of the one above (and called nobody for it).
        const sentinel = watchedTable<number, string>();
        let arrived = 0;
        const stopSentinel = a.watch(sentinel.name, () => arrived++);
        await b.run((u) => u.put(sentinel, 'k', 1));
        expect(await eventually(() => arrived > 0)).toBe(true);
        stopSentinel();
      }
      expect(calls.a).toBe(now.a);
    } finally {
      stopA();
      stopB();
    }
  });

  it('watch: only a table declared watched can be watched (the others are not announced); insertIfAbsent announces a watched one', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const quiet = fresh<number, string>();
    expect(() => a.watch(quiet.name, () => {})).toThrow(/not declared watched/);
    expect(() => b.watch(quiet.name, () => {})).toThrow(/not declared watched/);
    const t = watchedTable<number, string>();
    let heard = 0;
    const stop = b.watch(t.name, () => heard++);
    try {
      if (a.shared) await listening(b, a);
      const before = heard;
      expect(await a.insertIfAbsent(t, 'k', 1)).toBe(true);
      expect(await eventually(() => heard > before)).toBe(true);
    } finally {
      stop();
    }
  });

  it('watch: after its connection was lost and is back, a shared store calls every listener (a commit may have been missed)', async ({ skip }) => {
    const [a, b] = nodes(skip);
    if ('skip' in opened || !opened.cutListeners) return skip('an embedded store has no connection to lose: every commit is its own');
    const t = watchedTable<number, string>();
    let calls = 0;
    const stop = b.watch(t.name, () => calls++);
    try {
      await listening(b, a);
      await opened.cutListeners();
      const before = calls;
      // Called again once LISTEN is back (reopened a second after the loss), with nothing committed.
      expect(await eventually(() => calls > before, 20_000)).toBe(true);
      // And notified again after it.
      const back = calls;
      await a.run((u) => u.put(t, 'k', 1));
      expect(await eventually(() => calls > back)).toBe(true);
    } finally {
      stop();
    }
  });

  it('scan returns every entry of 1200, in order, forward and reverse, within bounds; count agrees', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<{ i: number }, [string, number]>();
    const entries = Array.from({ length: 1200 }, (_, i) => [['row', i], { i }] as [UnitKey, { i: number }]);
    await fill(a, t, entries.reverse());
    const scanned: Array<{ key: unknown; value: { i: number } }> = [];
    for await (const entry of b.scan(t)) scanned.push(entry);
    expect(scanned.map((e) => e.value.i)).toEqual(Array.from({ length: 1200 }, (_, i) => i));
    expect(keysOf(scanned)).toEqual(Array.from({ length: 1200 }, (_, i) => ['row', i]));
    const reversed: number[] = [];
    for await (const entry of b.scan(t, { reverse: true })) reversed.push(entry.value.i);
    expect(reversed).toEqual(Array.from({ length: 1200 }, (_, i) => 1199 - i));
    const bounded: number[] = [];
    for await (const entry of a.scan(t, { start: ['row', 100], end: ['row', 1150] })) bounded.push(entry.value.i);
    expect(bounded).toEqual(Array.from({ length: 1050 }, (_, i) => 100 + i));
    const boundedReverse: number[] = [];
    for await (const entry of a.scan(t, { start: ['row', 1150], end: ['row', 100], reverse: true })) boundedReverse.push(entry.value.i);
    expect(boundedReverse).toEqual(Array.from({ length: 1050 }, (_, i) => 1150 - i));
    expect(await a.count(t)).toBe(1200);
    expect(await b.count(t, { start: ['row', 100], end: ['row', 1150] })).toBe(1050);
    expect(await b.count(t, { start: ['row', 1150], end: ['row', 100], reverse: true })).toBe(1050);
    expect(await b.count(fresh())).toBe(0);
  });

  it('ranges over mixed keys answer what LMDB answers (the literal expectations)', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const t = fresh<ReturnType<typeof mixedValue>>();
    await fill(a, t, MIXED_KEYS.map((k) => [k, mixedValue(k)]));
    const r = async (options: UnitRange) => keysOf(await b.range(t, options));
    // Numbers, then strings; an array after its first element alone; '\u0000' escaped (4, 0) sorts
    // after every array that continues the same string (separator 0).
    expect(await r({})).toEqual([-5, 0, 1, [1, 'a'], 1.5, 2, [2, 'b'], 3, 10, 1e9, '', 'a', ['a', 1], ['a', 2], ['a', 'x'], ['a', 'x', 1], ['a', '\uffff'], 'a\u0000', 'ab', 'b', ['b', -1], ['b', 2], 'z', 'é', '\uffff', ['\uffff', 1]]);
    expect(await r({ start: ['a'], end: ['a', '\uffff'] })).toEqual(['a', ['a', 1], ['a', 2], ['a', 'x'], ['a', 'x', 1]]);
    expect(await r({ start: ['a', '\uffff'], end: 1.5, reverse: true, limit: 4 })).toEqual([['a', '\uffff'], ['a', 'x', 1], ['a', 'x'], ['a', 2]]);
    expect(await r({ start: 'é', end: ['\uffff', '\uffff'] })).toEqual(['é', '\uffff', ['\uffff', 1]]);
    expect(await r({ start: 2.5, end: '' })).toEqual([3, 10, 1e9]);
    expect((await b.range(t, { start: 'z', limit: 1 }))[0]!.value).toEqual(mixedValue('z'));
  });
});

describe('UnitStore range parity: PostgreSQL answers every range as LMDB does', () => {
  let stores: { lmdb: UnitStore; pg: UnitStore; close(): Promise<void> } | { skip: string };
  beforeAll(async () => {
    const [lmdb, pg] = await Promise.all(backends.map((b) => b.open()));
    if ('skip' in pg!) {
      if ('nodes' in lmdb!) await lmdb.close();
      stores = pg;
      return;
    }
    const [l, p] = [lmdb as Opened, pg as Opened];
    stores = {
      lmdb: l.nodes[0],
      pg: p.nodes[0],
      async close() {
        await l.close();
        await p.close();
      },
    };
  }, 120_000);
  afterAll(async () => {
    if ('lmdb' in stores) await stores.close();
  });
  function both(skip: (note: string) => never): { lmdb: UnitStore; pg: UnitStore } {
    if ('skip' in stores) skip(stores.skip);
    return stores;
  }

  it('on mixed string, number and array keys, every combination of bounds, direction and limit', async ({ skip }) => {
    const { lmdb, pg } = both(skip);
    const t = fresh<ReturnType<typeof mixedValue>>();
    for (const store of [lmdb, pg]) await fill(store, t, MIXED_KEYS.map((k) => [k, mixedValue(k)]));
    const all = await lmdb.range(t);
    expect(await pg.range(t)).toEqual(all);
    expect(all.length).toBeGreaterThan(20);
    let nonEmpty = 0;
    for (const start of BOUNDS) {
      for (const end of BOUNDS) {
        for (const reverse of [false, true]) {
          const base: UnitRange = { ...(start === undefined ? {} : { start }), ...(end === undefined ? {} : { end }), ...(reverse ? { reverse } : {}) };
          for (const limit of LIMITS) {
            const options = { ...base, ...(limit === undefined ? {} : { limit }) };
            const expected = await lmdb.range(t, options);
            expect({ options, got: await pg.range(t, options) }).toEqual({ options, got: expected });
            if (expected.length > 0) nonEmpty++;
          }
          const expectedCount = await lmdb.count(t, base);
          expect({ base, count: await pg.count(t, base) }).toEqual({ base, count: expectedCount });
          const scanned = [];
          for await (const entry of pg.scan(t, base)) scanned.push(entry);
          expect({ base, scanned }).toEqual({ base, scanned: await lmdb.range(t, base) });
        }
      }
    }
    // The combinations are not all empty ranges.
    expect(nonEmpty).toBeGreaterThan(200);
  });

  it('a unit that reads a range and writes commits alike on both (the precondition compares the same entries)', async ({ skip }) => {
    const { lmdb, pg } = both(skip);
    const t = fresh<ReturnType<typeof mixedValue>>();
    const marks = fresh<number, string>();
    for (const store of [lmdb, pg]) await fill(store, t, MIXED_KEYS.map((k) => [k, mixedValue(k)]));
    for (const store of [lmdb, pg]) {
      for (const start of BOUNDS) {
        let runs = 0;
        await store.run(async (u) => {
          runs++;
          const seen = await u.range(t, { ...(start === undefined ? {} : { start }), reverse: true, limit: 5 });
          u.put(marks, JSON.stringify(start ?? null), seen.length);
        });
        // Nothing changed the ranges meanwhile: each commits on its first run.
        expect(runs).toBe(1);
      }
    }
    expect(await pg.range(marks)).toEqual(await lmdb.range(marks));
  });
});
