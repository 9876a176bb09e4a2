import type { Database } from 'lmdb';
import type { KeyedCatalog } from '../keyed-catalog.js';
import type { CatalogEnv } from './env.js';

/** A KeyedCatalog in one named LMDB database. */
export class LmdbKeyedCatalog<R> implements KeyedCatalog<R> {
  private readonly db: Database<R, string>;

  constructor(env: CatalogEnv, name: string) {
    this.db = env.database<R, string>(name);
  }

  get(key: string): R | undefined {
    return this.db.get(key);
  }

  *entries(after?: string): Iterable<{ key: string; record: R }> {
    for (const { key, value } of this.db.getRange(after === undefined ? {} : { start: after })) {
      if (key !== after) yield { key, record: value };
    }
  }

  keys(): Iterable<string> {
    return this.db.getKeys() as Iterable<string>;
  }

  putIfAbsent(key: string, record: R): Promise<{ record: R; created: boolean }> {
    return this.db.transaction(() => {
      const existing = this.db.get(key);
      if (existing !== undefined) return { record: existing, created: false };
      this.db.put(key, record);
      return { record, created: true };
    });
  }

  async put(key: string, record: R): Promise<void> {
    await this.db.put(key, record);
  }

  async remove(key: string): Promise<void> {
    await this.db.remove(key);
  }
}
