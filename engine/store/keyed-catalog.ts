// Records under string keys, read in key order: metadata schemas and migrations. Small tables
// whose records never change once registered and are read on every metadata write, so each
// node keeps those it has read in memory (a record registered on another node is read from the
// store on first use). Only the most recently used are kept: any tenant with schema.write may
// register schemas, and each may carry a large JSON Schema.

import { LRUCache } from 'lru-cache';
import { type Table, type Unit, type UnitStore, table } from './unit-store.js';

/** Records kept in memory, and their characters together (as JSON). */
const KEPT_RECORDS = 10_000;
const KEPT_CHARS = 64 * 1024 * 1024;

export class KeyedCatalog<R extends object> {
  private readonly known = new LRUCache<string, R>({ max: KEPT_RECORDS, maxSize: KEPT_CHARS, sizeCalculation: (record, key) => key.length + JSON.stringify(record).length });
  private readonly table: Table<R, string>;

  constructor(
    private readonly store: UnitStore,
    name: string,
  ) {
    this.table = table<R, string>(name);
  }

  async get(key: string): Promise<R | undefined> {
    const cached = this.known.get(key);
    if (cached !== undefined) return cached;
    const record = await this.store.get(this.table, key);
    if (record !== undefined) this.known.set(key, record);
    return record;
  }

  /** Whether the key holds a record, read in `unit` (a precondition: a registration meanwhile runs the unit again). */
  async hasIn(unit: Unit, key: string): Promise<boolean> {
    return this.known.has(key) || unit.has(this.table, key);
  }

  /** Up to `limit` records whose key sorts after `after` (all when undefined) that `keep`, in key order; `more` when the scan stopped early. */
  async page(after: string | undefined, limit: number, keep: (record: R) => boolean): Promise<{ records: R[]; more: boolean }> {
    const records: R[] = [];
    for await (const { key, value } of this.store.scan(this.table, after === undefined ? {} : { start: after })) {
      if (key === after || !keep(value)) continue;
      if (records.length === limit) return { records, more: true };
      records.push(value);
    }
    return { records, more: false };
  }

  /** Stores `record` unless the key holds one, atomically (with `alsoWhenCreated`'s writes); returns what the key holds afterwards. */
  async putIfAbsent(key: string, record: R, alsoWhenCreated?: (unit: Unit) => Promise<void>): Promise<{ record: R; created: boolean }> {
    const outcome = await this.store.run(async (unit) => {
      const existing = await unit.get(this.table, key);
      if (existing !== undefined) return { record: existing, created: false };
      unit.put(this.table, key, record);
      await alsoWhenCreated?.(unit);
      return { record, created: true };
    });
    this.known.set(key, outcome.record);
    return outcome;
  }
}
