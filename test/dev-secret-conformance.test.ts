// One suite for every DevSecretStore: the file in the data directory (fs, s3) and the PostgreSQL
// row (pg-s3) keep the first secret offered, for every later caller and every node at once; so do
// the units of work (the cursor key: the node's LMDB on fs, PostgreSQL shared on pg-s3).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogEnv, type DevSecretStore, FileDevSecretStore, LmdbUnitStore, UnitSecretStore } from '../dist/engine/store/index.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { startPostgres } from './helpers/postgres.js';
import { tempRoot } from './helpers/server.js';

interface Opened {
  /** A fresh store on empty storage, as many instances ("nodes", or restarts) as asked. */
  stores: (count: number) => DevSecretStore[];
  close(): Promise<void>;
}

interface Backend {
  name: string;
  open(): Promise<Opened | { skip: string }>;
}

const backends: Backend[] = [
  {
    name: 'file',
    async open() {
      const roots: string[] = [];
      return {
        stores(count) {
          const root = tempRoot('svc-secret-');
          roots.push(root);
          return Array.from({ length: count }, () => new FileDevSecretStore(root));
        },
        async close() {
          for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
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
      let databases = 0;
      const urls: string[] = [];
      try {
        // Databases made up front: stores() is synchronous.
        for (let i = 0; i < 3; i++) urls.push(await server.createDatabase(`secret_${i}`));
        const opened = await Promise.all(urls.flatMap((url) => [0, 1, 2].map(() => PgBlobCatalog.open(url, { poolSize: 2 }))));
        catalogs.push(...opened);
      } catch (err) {
        await Promise.all(catalogs.map((c) => c.close()));
        await server.stop();
        throw err;
      }
      return {
        stores(count) {
          const database = databases++;
          return catalogs.slice(database * 3, database * 3 + count).map((c) => c.devSecret());
        },
        async close() {
          await Promise.all(catalogs.map((c) => c.close()));
          await server.stop();
        },
      };
    },
  },
  {
    name: 'units on LMDB',
    async open() {
      const opened: Array<{ root: string; env: CatalogEnv; units: LmdbUnitStore }> = [];
      return {
        stores(count) {
          const root = tempRoot('svc-secret-units-');
          const env = CatalogEnv.open(root, 'relaxed');
          const units = new LmdbUnitStore(env);
          opened.push({ root, env, units });
          return Array.from({ length: count }, () => new UnitSecretStore(units, 'cursor-key'));
        },
        async close() {
          for (const { root, env, units } of opened) {
            await units.close();
            await env.close();
            fs.rmSync(root, { recursive: true, force: true });
          }
        },
      };
    },
  },
  {
    name: 'units on PostgreSQL',
    async open() {
      const server = await startPostgres();
      if ('skip' in server) return server;
      const catalogs: PgBlobCatalog[] = [];
      const urls: string[] = [];
      let databases = 0;
      try {
        for (let i = 0; i < 3; i++) urls.push(await server.createDatabase(`units_secret_${i}`));
        catalogs.push(...(await Promise.all(urls.flatMap((url) => [0, 1, 2].map(() => PgBlobCatalog.open(url, { poolSize: 2 }))))));
      } catch (err) {
        await Promise.all(catalogs.map((c) => c.close()));
        await server.stop();
        throw err;
      }
      return {
        stores(count) {
          const database = databases++;
          // One "node" per catalog: each its own pool on the same database.
          return catalogs.slice(database * 3, database * 3 + count).map((c) => new UnitSecretStore(c.unitStore(), 'cursor-key'));
        },
        async close() {
          await Promise.all(catalogs.map((c) => c.close()));
          await server.stop();
        },
      };
    },
  },
];

describe.each(backends)('DevSecretStore conformance: $name', (backend) => {
  let opened: Opened | { skip: string };
  beforeAll(async () => {
    opened = await backend.open();
  }, 120_000);
  afterAll(async () => {
    if ('stores' in opened) await opened.close();
  });
  const stores = (count: number, skip: (note: string) => never) => {
    if ('skip' in opened) skip(opened.skip);
    return opened.stores(count);
  };

  it('keeps the first secret offered; later callers, on any instance, get it back', async ({ skip }) => {
    const [a, b] = stores(2, skip);
    expect(await a!.keep('first-secret')).toEqual({ secret: 'first-secret', created: true });
    expect(await a!.keep('second-secret')).toEqual({ secret: 'first-secret', created: false });
    expect(await b!.keep('third-secret')).toEqual({ secret: 'first-secret', created: false });
  });

  it('instances offering at once all get one secret, created once', async ({ skip }) => {
    const nodes = stores(3, skip);
    const outcomes = await Promise.all(nodes.map((s, i) => s.keep(`secret-of-${i}`)));
    expect(new Set(outcomes.map((o) => o.secret)).size).toBe(1);
    expect(outcomes.filter((o) => o.created)).toHaveLength(1);
    expect(outcomes.find((o) => o.created)!.secret).toBe(outcomes[0]!.secret);
  });
});

describe('the file store', () => {
  it('is <SVC_FS_ROOT>/secrets/dev-shared-secret, mode 0600 in a 0700 directory, and leaves no temporary file', async () => {
    const root = tempRoot('svc-secret-file-');
    try {
      const store = new FileDevSecretStore(root);
      await store.keep('kept');
      const file = path.join(root, 'secrets', 'dev-shared-secret');
      expect(store.location).toBe(file);
      expect(fs.readFileSync(file, 'utf8')).toBe('kept\n');
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
      expect(fs.readdirSync(path.dirname(file))).toEqual(['dev-shared-secret']);
      // A file written by an earlier version (no temporary name, same content) is read as it is.
      fs.writeFileSync(file, 'older\n');
      expect(await new FileDevSecretStore(root).keep('new')).toEqual({ secret: 'older', created: false });
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
