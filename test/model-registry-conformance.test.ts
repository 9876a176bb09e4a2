// One suite for every ModelRegistry store: the node's LMDB (fs) and PostgreSQL (pg-s3, a database
// in a cluster of the test's own) must answer the same calls the same way. "Two nodes" are two
// store instances on one database where the store is shared, the one instance where it is embedded.
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogEnv, LmdbModelRegistry, type ModelRegistration, type ModelRegistry } from '../dist/engine/store/index.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { MODELS_CHANNEL, RESYNC_MS } from '../dist/engine/store/pg/model-registry.js';
import { type PgPool, openPool } from '../dist/engine/store/pg/pool.js';
import { startPostgres } from './helpers/postgres.js';
import { tempRoot } from './helpers/server.js';

interface OpenRegistry {
  nodes: [ModelRegistry, ModelRegistry];
  /** A store opened afresh on the same data (a restarted node). */
  reopen(): Promise<ModelRegistry>;
  /** Statements on the database behind a shared store (PostgreSQL), for what no store call does. */
  sql?: PgPool;
  /** A shared store whose watches resync every RESYNC_MS (the nodes' resync is off, so that their watches show notifications alone). */
  resyncing?: ModelRegistry;
  close(): Promise<void>;
}

interface Backend {
  name: string;
  open(): Promise<OpenRegistry | { skip: string }>;
  /** Why the store tells its watchers nothing (one node: every change goes through the node's own service). */
  silentWatch?: string;
}

const backends: Backend[] = [
  {
    name: 'lmdb',
    silentWatch: 'an embedded registry has one owner (its node\'s ModelService), which knows every change it makes',
    async open() {
      const root = tempRoot('svc-models-');
      let env = CatalogEnv.open(root, 'relaxed');
      const registry = new LmdbModelRegistry(env);
      const opened: OpenRegistry = {
        nodes: [registry, registry],
        // One process opens an environment once: the reopened store is the node's from now on.
        async reopen() {
          await env.close();
          env = CatalogEnv.open(root, 'relaxed');
          const reopened = new LmdbModelRegistry(env);
          opened.nodes = [reopened, reopened];
          return reopened;
        },
        async close() {
          await env.close();
          fs.rmSync(root, { recursive: true, force: true });
        },
      };
      return opened;
    },
  },
  {
    name: 'postgres',
    async open() {
      const server = await startPostgres();
      if ('skip' in server) return server;
      const catalogs: PgBlobCatalog[] = [];
      let sql: PgPool | undefined;
      try {
        const url = await server.createDatabase('models');
        catalogs.push(...(await Promise.all([PgBlobCatalog.open(url, { poolSize: 4 }), PgBlobCatalog.open(url, { poolSize: 4 })])));
        sql = openPool(url, 2);
        const notifiedOnly = { resyncMs: 3_600_000 };
        return {
          nodes: [catalogs[0]!.modelRegistry(notifiedOnly), catalogs[1]!.modelRegistry(notifiedOnly)],
          resyncing: catalogs[0]!.modelRegistry(),
          async reopen() {
            const catalog = await PgBlobCatalog.open(url, { poolSize: 2 });
            catalogs.push(catalog);
            return catalog.modelRegistry();
          },
          sql,
          async close() {
            await Promise.all(catalogs.map((c) => c.close()));
            await sql?.end();
            await server.stop();
          },
        };
      } catch (err) {
        await Promise.all(catalogs.map((c) => c.close()));
        await sql?.end();
        await server.stop();
        throw err;
      }
    },
  },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A name no other case uses. */
const fresh = () => `model-${randomUUID()}`;

const find = async (registry: ModelRegistry, name: string) => (await registry.list()).find((r) => r.modelName === name);

/** Polls `done` every 10 ms until it holds or `ms` have passed; answers whether it held. */
async function eventually(done: () => boolean, ms: number): Promise<boolean> {
  for (const deadline = Date.now() + ms; !done(); await sleep(10)) if (Date.now() > deadline) return false;
  return true;
}

/**
 * Whether a watch of a shared `registry` is called after `change` (within `ms`). The watch's first
 * call (LISTEN in place) comes before the change.
 */
async function calledAfter(registry: ModelRegistry, change: () => Promise<unknown>, ms: number): Promise<boolean> {
  let calls = 0;
  const watch = registry.watch(() => calls++);
  try {
    expect(await eventually(() => calls > 0, 5000)).toBe(true);
    const before = calls;
    await change();
    return await eventually(() => calls > before, ms);
  } finally {
    await watch.close();
  }
}

describe.each(backends)('ModelRegistry conformance: $name', (backend) => {
  let opened: OpenRegistry | { skip: string };
  beforeAll(async () => {
    opened = await backend.open();
  }, 120_000);
  afterAll(async () => {
    if ('nodes' in opened) await opened.close();
  });
  function nodes(skip: (note: string) => never): [ModelRegistry, ModelRegistry] {
    if ('skip' in opened) skip(opened.skip);
    return opened.nodes;
  }

  it('put registers (created), a second put replaces (not created, a new generation), on either node', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const name = fresh();
    const first = await a.put(name, 'file:///bundles/one.zip', '2026-11-27T10:00:00.000Z');
    expect(first).toEqual({ created: true, registration: { modelName: name, uri: 'file:///bundles/one.zip', registeredAt: '2026-11-27T10:00:00.000Z', generation: expect.any(Number) } });
    expect(first.registration.generation).toBeGreaterThan(0);
    expect(await find(b, name)).toEqual(first.registration);
    const second = await b.put(name, 's3://bucket/two.zip', '2026-11-27T10:00:01.000Z');
    expect(second.created).toBe(false);
    expect(second.registration).toMatchObject({ modelName: name, uri: 's3://bucket/two.zip', registeredAt: '2026-11-27T10:00:01.000Z' });
    expect(second.registration.generation).not.toBe(first.registration.generation);
    expect(await find(a, name)).toEqual(second.registration);
    // The same URI again is a new generation too: the bundle behind it may have changed.
    const third = await a.put(name, 's3://bucket/two.zip', '2026-11-27T10:00:02.000Z');
    expect(third.created).toBe(false);
    expect(new Set([first, second, third].map((p) => p.registration.generation)).size).toBe(3);
    expect((await a.list()).filter((r) => r.modelName === name)).toEqual([third.registration]);
  });

  it('list answers every registration in name order', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const prefix = `order-${randomUUID()}`;
    const names = [`${prefix}-b`, `${prefix}-a`, `${prefix}-C`, `${prefix}-é`, `${prefix}-a b`];
    for (const [i, name] of names.entries()) await (i % 2 ? a : b).put(name, `file:///m/${i}.zip`, '2026-11-27T10:00:00.000Z');
    const listed = (await a.list()).map((r) => r.modelName);
    // Code-point order (what LMDB's keys give and what PostgreSQL's "C" collation gives).
    expect(listed.filter((n) => n.startsWith(prefix))).toEqual([`${prefix}-C`, `${prefix}-a`, `${prefix}-a b`, `${prefix}-b`, `${prefix}-é`]);
    expect([...listed].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))).toEqual(listed);
  });

  it('remove under the current generation removes; under another it removes nothing and answers what is there', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const name = fresh();
    const old = (await a.put(name, 'file:///m/old.zip', '2026-11-27T10:00:00.000Z')).registration;
    const now = (await b.put(name, 'file:///m/new.zip', '2026-11-27T10:00:01.000Z')).registration;
    expect(await a.remove(name, old.generation)).toEqual({ current: now });
    expect(await find(b, name)).toEqual(now);
    expect(await a.remove(name, now.generation)).toEqual({ removed: now });
    expect(await find(a, name)).toBeUndefined();
    expect(await find(b, name)).toBeUndefined();
    expect(await b.remove(name, now.generation)).toEqual({ current: undefined });
    // Registered again after the removal: created, under a generation never used for the name.
    const again = await b.put(name, 'file:///m/new.zip', '2026-11-27T10:00:02.000Z');
    expect(again.created).toBe(true);
    expect([old.generation, now.generation]).not.toContain(again.registration.generation);
  });

  it('concurrent puts of one new name on two nodes: one created, the last committed is what both list', async ({ skip }) => {
    const [a, b] = nodes(skip);
    for (let round = 0; round < 10; round++) {
      const name = fresh();
      const outcomes = await Promise.all([a.put(name, 'file:///m/a.zip', '2026-11-27T10:00:00.000Z'), b.put(name, 'file:///m/b.zip', '2026-11-27T10:00:00.000Z')]);
      expect(outcomes.filter((o) => o.created)).toHaveLength(1);
      const listed = await find(a, name);
      expect(await find(b, name)).toEqual(listed);
      // Exactly one of the two writes, whole (its URI with its own generation).
      expect(outcomes.map((o) => o.registration)).toContainEqual(listed);
      expect(outcomes[0]!.registration.generation).not.toBe(outcomes[1]!.registration.generation);
    }
  });

  it('concurrent removes and puts of one name: each remove that succeeds removed the generation it named', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const name = fresh();
    let current = (await a.put(name, 'file:///m/0.zip', '2026-11-27T10:00:00.000Z')).registration;
    for (let round = 1; round <= 10; round++) {
      const [removed, put] = await Promise.all([a.remove(name, current.generation), b.put(name, `file:///m/${round}.zip`, '2026-11-27T10:00:00.000Z')]);
      const listed = await find(a, name);
      if ('removed' in removed) {
        expect(removed.removed).toEqual(current);
        // The put came after the removal (created again) or before it (then it was what got removed: impossible, its generation is new).
        expect(put.created).toBe(true);
        expect(listed).toEqual(put.registration);
      } else {
        // The put committed first: the removal's precondition failed on the put's generation.
        expect(put.created).toBe(false);
        expect(removed.current).toEqual(put.registration);
        expect(listed).toEqual(put.registration);
      }
      current = listed!;
    }
  });

  it('registrations outlive the store: a store opened afresh lists them', async ({ skip }) => {
    const [a] = nodes(skip);
    const name = fresh();
    const { registration } = await a.put(name, 'gs://bucket/m.zip', '2026-11-27T10:00:00.000Z');
    const reopened = await (opened as OpenRegistry).reopen();
    expect(await find(reopened, name)).toEqual(registration);
    const next = await reopened.put(name, 'gs://bucket/m2.zip', '2026-11-27T10:00:01.000Z');
    expect(next.created).toBe(false);
    // Generations keep their promise across restarts: never one the name had before.
    expect(next.registration.generation).not.toBe(registration.generation);
  });

  it('a change through one node is told to the other node\'s watchers', async ({ skip }) => {
    const [a, b] = nodes(skip);
    if (backend.silentWatch) return skip(backend.silentWatch);
    const name = fresh();
    expect(await calledAfter(a, () => b.put(name, 'file:///m/w.zip', '2026-11-27T10:00:00.000Z'), 5000)).toBe(true);
    const { generation } = (await find(b, name))!;
    expect(await calledAfter(a, () => b.remove(name, generation), 5000)).toBe(true);
  });

  it(`a change made without a notification reaches a watcher by the resync (every ${RESYNC_MS} ms)`, async ({ skip }) => {
    const [a] = nodes(skip);
    const { sql, resyncing } = opened as OpenRegistry;
    if (!sql) return skip(backend.silentWatch!);
    // Written behind the store's back: no NOTIFY, as if the notification had been lost.
    const silently = async () => {
      await sql!`INSERT INTO model_registrations (model_name, uri, registered_at, generation) VALUES (${fresh()}, 'file:///m/s.zip', now(), nextval('model_generations'))`;
    };
    // The nodes' own watches resync rarely: this one says nothing.
    expect(await calledAfter(a, silently, RESYNC_MS + 1000)).toBe(false);
    expect(await calledAfter(resyncing!, silently, RESYNC_MS + 1000)).toBe(true);
  });

  it('a watcher whose connection is cut listens again (and is told to read again when it does)', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const { sql } = opened as OpenRegistry;
    if (!sql) return skip(backend.silentWatch!);
    let calls = 0;
    const watch = a.watch(() => calls++);
    try {
      const listeners = async () => sql!<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE application_name = ${`svc-listen:${MODELS_CHANNEL}`} AND query LIKE 'LISTEN%'`;
      let before: { pid: number }[] = [];
      for (const deadline = Date.now() + 5000; before.length === 0 && Date.now() < deadline; await sleep(50)) before = await listeners();
      expect(before).toHaveLength(1);
      const beforeLoss = calls;
      await sql!`SELECT pg_terminate_backend(${before[0]!.pid})`;
      let after: { pid: number }[] = [];
      for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(50)) {
        after = await listeners();
        if (after.length === 1 && after[0]!.pid !== before[0]!.pid) break;
      }
      expect(after).toHaveLength(1);
      expect(after[0]!.pid).not.toBe(before[0]!.pid);
      // Told to read again: what was notified while it was down is lost.
      expect(await eventually(() => calls > beforeLoss, 1000)).toBe(true);
      // Listening again: a notified change arrives (this node's resync is off).
      const seen = calls;
      await b.put(fresh(), 'file:///m/r.zip', '2026-11-27T10:00:00.000Z');
      expect(await eventually(() => calls > seen, 2000)).toBe(true);
    } finally {
      await watch.close();
    }
  });
});

describe('LMDB registry: records of earlier versions', () => {
  it('a registration stored before generations existed reads as generation 0 and is replaced and removed like any other', async () => {
    const root = tempRoot('svc-models-old-');
    const env = CatalogEnv.open(root, 'relaxed');
    try {
      await env.database('models').put('old', { modelName: 'old', uri: 'file:///m/old.zip', registeredAt: '2026-01-01T00:00:00.000Z' });
      const registry = new LmdbModelRegistry(env);
      const stored: ModelRegistration = { modelName: 'old', uri: 'file:///m/old.zip', registeredAt: '2026-01-01T00:00:00.000Z', generation: 0 };
      expect(await registry.list()).toEqual([stored]);
      const replaced = await registry.put('old', 'file:///m/new.zip', '2026-11-27T10:00:00.000Z');
      expect(replaced.created).toBe(false);
      expect(replaced.registration.generation).toBeGreaterThan(0);
      expect(await registry.remove('old', 0)).toEqual({ current: replaced.registration });
      expect(await registry.remove('old', replaced.registration.generation)).toEqual({ removed: replaced.registration });
      expect(await registry.list()).toEqual([]);
    } finally {
      await env.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
