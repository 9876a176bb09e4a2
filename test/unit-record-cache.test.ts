// Cached tables on the node's LMDB (engine/store/unit-store.ts CACHED): records read outside units
// are kept decoded and frozen, at most UNIT_RECORDS_CACHED of them, and a read after a commit of
// this node answers what it wrote, whether the commit was synchronous (a small unit) or batched.

import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNIT_RECORDS_CACHED } from '../dist/engine/base/limits.js';
import { CatalogEnv, LmdbUnitStore, table } from '../dist/engine/store/index.js';
import { tempRoot } from './helpers/server.js';

const root = tempRoot('svc-unit-cache-');
let env: CatalogEnv;
let store: LmdbUnitStore;

beforeAll(() => {
  env = CatalogEnv.open(root, 'relaxed');
  store = new LmdbUnitStore(env);
});

afterAll(async () => {
  await store.close();
  await env.close();
  fs.rmSync(root, { recursive: true, force: true });
});

interface Rec {
  n: number;
  tags: Record<string, string>;
  sizes: number[];
}

const fresh = (cached: boolean) => table<Rec, [string, string]>(`test_${cached ? 'cached' : 'plain'}_${randomUUID().slice(0, 8)}`, { cached });
const rec = (n: number): Rec => ({ n, tags: { n: String(n) }, sizes: [n] });

describe('cached tables on LMDB', () => {
  it(`holds at most UNIT_RECORDS_CACHED (${UNIT_RECORDS_CACHED}) records, the most recently read`, async () => {
    const t = fresh(true);
    const n = UNIT_RECORDS_CACHED + 300;
    for (let from = 0; from < n; from += 1000) {
      await store.run((unit) => {
        for (let i = from; i < Math.min(n, from + 1000); i++) unit.put(t, ['k', String(i)], rec(i));
      });
    }
    const before = store.cachedRecords;
    let largest = 0;
    for (let i = 0; i < n; i++) {
      expect(store.getNow(t, ['k', String(i)])?.n).toBe(i);
      largest = Math.max(largest, store.cachedRecords);
    }
    expect(largest).toBeLessThanOrEqual(UNIT_RECORDS_CACHED);
    expect(store.cachedRecords).toBe(UNIT_RECORDS_CACHED);
    expect(before).toBeLessThanOrEqual(UNIT_RECORDS_CACHED);
    // The first ones read went first; the last ones read are answered as before.
    expect(store.getNow(t, ['k', String(n - 1)])?.n).toBe(n - 1);
    expect(store.getNow(t, ['k', '0'])?.n).toBe(0);
    expect(store.cachedRecords).toBe(UNIT_RECORDS_CACHED);
  });

  it('answers a commit of this node at once: a small (synchronous) unit, a batched one, a removal, insertIfAbsent', async () => {
    const t = fresh(true);
    const key: [string, string] = ['b', 'x'];
    await store.run((unit) => unit.put(t, key, rec(1)));
    expect(store.getNow(t, key)?.n).toBe(1);
    expect((await store.get(t, key))?.n).toBe(1);
    await store.run((unit) => unit.put(t, key, rec(2)));
    expect(store.getNow(t, key)?.n).toBe(2);
    // More writes than a synchronous commit takes: lmdb-js's batched transaction.
    await store.run((unit) => {
      unit.put(t, key, rec(3));
      for (let i = 0; i < 8; i++) unit.put(t, ['b', `other-${i}`], rec(i));
    });
    expect(store.getNow(t, key)?.n).toBe(3);
    // Read while the commit is under way: the old record or the new, never the old after it.
    const writing = store.run((unit) => {
      unit.put(t, key, rec(4));
      for (let i = 0; i < 8; i++) unit.put(t, ['b', `other-${i}`], rec(10 + i));
    });
    expect([3, 4]).toContain(store.getNow(t, key)?.n);
    await writing;
    expect(store.getNow(t, key)?.n).toBe(4);
    expect(store.getNow(t, ['b', 'other-7'])?.n).toBe(17);
    await store.run((unit) => unit.remove(t, key));
    expect(store.getNow(t, key)).toBeUndefined();
    expect(await store.insertIfAbsent(t, key, rec(5))).toBe(true);
    expect(store.getNow(t, key)?.n).toBe(5);
  });

  it('shares cached records frozen; a table not declared cached is read anew each time', async () => {
    const cached = fresh(true);
    const plain = fresh(false);
    await store.run((unit) => {
      unit.put(cached, ['c', 'k'], rec(1));
      unit.put(plain, ['c', 'k'], rec(1));
    });
    const one = store.getNow(cached, ['c', 'k'])!;
    expect(store.getNow(cached, ['c', 'k'])).toBe(one);
    expect(Object.isFrozen(one) && Object.isFrozen(one.tags) && Object.isFrozen(one.sizes)).toBe(true);
    expect(() => {
      one.tags.n = 'changed';
    }).toThrow(TypeError);
    const counted = store.cachedRecords;
    const p = store.getNow(plain, ['c', 'k'])!;
    expect(store.getNow(plain, ['c', 'k'])).not.toBe(p);
    expect(Object.isFrozen(p)).toBe(false);
    expect(store.cachedRecords).toBe(counted);
    // Units read the stored bytes, not the copy: a precondition on what is stored.
    expect(await store.run((unit) => unit.get(cached, ['c', 'k']))).toEqual(rec(1));
  });
});
