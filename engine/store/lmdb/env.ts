import fs from 'node:fs';
import path from 'node:path';
import { type Database, type Key, open, type RootDatabase } from 'lmdb';
import type { Durability } from '../../base/config.js';

/**
 * The LMDB environment under `<root>/catalog`. This module opens it and hands each named
 * database to the one module that owns it; nobody else opens databases.
 */
export class CatalogEnv {
  readonly root: RootDatabase;

  private constructor(
    root: RootDatabase,
    /** Commits are not fsync'd (SVC_DURABILITY=relaxed): a synchronous transaction waits for no disk. */
    readonly relaxed: boolean,
  ) {
    this.root = root;
  }

  static open(fsRoot: string, durability: Durability): CatalogEnv {
    const dir = path.join(fsRoot, 'catalog');
    fs.mkdirSync(dir, { recursive: true });
    const root = open({
      path: dir,
      noSubdir: false,
      // relaxed: commits are not fsync'd; the OS page cache is trusted.
      noSync: durability === 'relaxed',
      mapSize: 2 ** 34,
      // Each module owns its named databases; lmdb-js's default of 12 is too few.
      maxDbs: 128,
      encoding: 'msgpack',
      useVersions: false,
    });
    return new CatalogEnv(root, durability === 'relaxed');
  }

  database<V = unknown, K extends Key = Key>(
    name: string,
    options: { keyEncoding?: 'uint32' | 'binary' | 'ordered-binary'; encoding?: 'msgpack' | 'binary' | 'string' } = {},
  ): Database<V, K> {
    return this.root.openDB<V, K>({ name, ...options });
  }

  /** A cheap read and write round trip for readiness checks. */
  async probe(): Promise<void> {
    const health = this.database<number, string>('health');
    await health.put('probe', Date.now());
    if (typeof health.get('probe') !== 'number') throw new Error('catalog probe read back nothing');
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}
