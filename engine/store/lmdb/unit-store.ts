import type { Database, Key } from 'lmdb';
import { UNIT_RECORDS_CACHED } from '../../base/limits.js';
import type { CatalogEnv } from './env.js';
import { type BufferedWrite, type PointRead, type RangeRead, type StoredEntry, type UnitBackend, runUnit, sameBytes, sameEntries } from '../unit-runner.js';
import { type AlsoWrite, type Entry, type PointKey, type Table, type Unit, type UnitKey, type UnitRange, type UnitStore, isCached, isWatched, unwatchedTable } from '../unit-store.js';

/** Most writes a unit may have to commit synchronously, grouped (CatalogEnv.commit). */
const SYNC_COMMIT_MAX_WRITES = 4;

const rangeOptions = (options: UnitRange) => ({
  ...(options.start === undefined ? {} : { start: options.start as Key }),
  ...(options.end === undefined ? {} : { end: options.end as Key }),
  ...(options.reverse ? { reverse: true } : {}),
  ...(options.limit === undefined ? {} : { limit: options.limit }),
});

/** A cached record's place: its table and key, each part with its length or type before it (no two keys meet). */
function recordSlot(tableName: string, key: UnitKey): string {
  if (!Array.isArray(key)) return `${tableName}\u0000${part(key)}`;
  let slot = `${tableName}\u0000${key.length}`;
  for (const element of key) slot += part(element);
  return slot;
}

const part = (element: string | number) => (typeof element === 'string' ? `s${element.length}:${element}` : `n${element};`);

/** A decoded record as a cached table's readers share it: frozen through (byte arrays excepted: they cannot be). */
function frozen<V>(value: V): V {
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value) || Object.isFrozen(value)) return value;
  for (const inner of Object.values(value)) frozen(inner);
  return Object.freeze(value);
}

/**
 * Units of work on the node's LMDB catalog (`fs`, and the embedded state of the other backends'
 * single node). Each table is a named database of the catalog (the names and encodings the
 * tables have always had, so existing data directories read as before). A unit's commit runs
 * in lmdb-js's batched asynchronous write transaction (or, a small one under relaxed durability,
 * a synchronous one grouped with its turn's: CatalogEnv.commit), which checks the
 * preconditions against the stored bytes before writing: only this process writes the catalog
 * (the data directory lock), so nothing can change between the check and the writes.
 */
export class LmdbUnitStore implements UnitStore, UnitBackend {
  readonly shared = false;
  /** The LMDB blob catalog records an ingest's blocks itself (a write of this node's, as cheap as the unit's). */
  readonly recordsBlocks = false;
  private readonly databases = new Map<string, Database<unknown, Key>>();
  private readonly listeners = new Map<string, Set<() => void>>();
  /**
   * Records of cached tables (unit-store.ts CACHED) as last read outside units, most recently read
   * last, at most UNIT_RECORDS_CACHED. Only this process writes the catalog: a record is forgotten
   * once a commit that wrote it has landed (and lmdb-js has renewed its read snapshot), before the
   * writer's unit returns, so no read after that write answers the old record.
   */
  private readonly records = new Map<string, unknown>();

  constructor(private readonly env: CatalogEnv) {}

  /** How many records of cached tables this store holds decoded (at most UNIT_RECORDS_CACHED). */
  get cachedRecords(): number {
    return this.records.size;
  }

  private db(name: string): Database<unknown, Key> {
    let db = this.databases.get(name);
    if (!db) {
      // Records as plain msgpack maps: without shared structures, msgpackr's records carry their
      // definition inline and each read defines it again (a 4 KiB GetObject's record read cost
      // about as much as its SigV4 HMAC); maps decode in ~0.6x the time. Either form reads back.
      db = this.env.database<unknown, Key>(name, { useRecords: false });
      this.databases.set(name, db);
    }
    return db;
  }

  async readPoint(tableName: string, key: UnitKey): Promise<{ value: unknown; bytes: Buffer | undefined }> {
    const db = this.db(tableName);
    const bytes = db.getBinary(key as Key);
    return { value: bytes === undefined ? undefined : db.get(key as Key), bytes };
  }

  async readRange(tableName: string, options: UnitRange): Promise<StoredEntry[]> {
    const db = this.db(tableName);
    const out: StoredEntry[] = [];
    for (const { key, value } of db.getRange(rangeOptions(options))) {
      out.push({ key: key as UnitKey, value, bytes: db.getBinary(key)! });
    }
    return out;
  }

  /** The cached records a commit wrote, once it has landed. */
  private forget(writes: ReadonlyArray<{ table: string; key: UnitKey }>): void {
    for (const write of writes) {
      if (isCached(write.table)) this.records.delete(recordSlot(write.table, write.key));
      const counted = 'ifAbsent' in write ? (write as BufferedWrite).ifAbsent?.counted : undefined;
      if (counted && isCached(counted.table)) this.records.delete(recordSlot(counted.table, counted.key));
    }
  }

  commit(points: PointRead[], ranges: RangeRead[], writes: BufferedWrite[]): Promise<boolean> {
    const apply = (): boolean => {
      for (const read of points) if (!sameBytes(this.db(read.table).getBinary(read.key as Key), read.bytes)) return false;
      for (const read of ranges) {
        const db = this.db(read.table);
        const now = [];
        for (const key of db.getKeys(rangeOptions(read.options))) now.push({ key: key as UnitKey, bytes: db.getBinary(key)! });
        if (!sameEntries(read.entries, now)) return false;
      }
      for (const write of writes) {
        const db = this.db(write.table);
        if (write.delta !== undefined) this.addTo(db, write.key, write.delta);
        else if (write.ifAbsent) {
          if (db.doesExist(write.key as Key)) continue;
          void db.put(write.key as Key, write.value);
          const { counted } = write.ifAbsent;
          if (counted) this.addTo(this.db(counted.table), counted.key, counted.delta);
        } else if (write.value === undefined) void db.remove(write.key as Key);
        else void db.put(write.key as Key, write.value);
      }
      return true;
    };
    // A small unit commits on this thread, grouped with this turn's other small commits (a PutObject's record: no wait for the writer thread).
    const landed = (committed: boolean): boolean => {
      if (committed) this.forget(writes);
      return committed;
    };
    return this.env.commit(apply, writes.length <= SYNC_COMMIT_MAX_WRITES && ranges.length === 0).then(landed);
  }

  /** In a write transaction: the stored number (absent: 0) plus `delta`. */
  private addTo(db: Database<unknown, Key>, key: UnitKey, delta: number): void {
    void db.put(key as Key, ((db.get(key as Key) as number | undefined) ?? 0) + delta);
  }

  async run<T>(step: (unit: Unit) => Promise<T> | T): Promise<T> {
    const { result, written } = await runUnit(this, step);
    for (const name of written) for (const listener of this.listeners.get(name) ?? []) listener();
    return result;
  }

  async insertIfAbsent<V, K extends UnitKey>(table: Table<V, K>, key: K, value: V, also: ReadonlyArray<AlsoWrite> = []): Promise<boolean> {
    const written = await this.env.root.transaction(() => {
      const db = this.db(table.name);
      if (db.doesExist(key as Key)) return false;
      void db.put(key as Key, value);
      for (const w of also) void this.db(w.table.name).put(w.key as Key, w.value);
      return true;
    });
    if (written) {
      this.forget([{ table: table.name, key }, ...also.map((w) => ({ table: w.table.name, key: w.key }))]);
      for (const name of new Set([table.name, ...also.map((w) => w.table.name)])) for (const listener of this.listeners.get(name) ?? []) listener();
    }
    return written;
  }

  async get<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<V | undefined> {
    return this.getNow(table, key);
  }

  getNow<V, K extends UnitKey>(table: Table<V, K>, key: K): V | undefined {
    if (!isCached(table.name)) return this.db(table.name).get(key as Key) as V | undefined;
    const slot = recordSlot(table.name, key);
    const records = this.records;
    let record = records.get(slot);
    if (record !== undefined) {
      records.delete(slot);
    } else {
      // Read and kept in one synchronous step: a commit landing later forgets it.
      record = this.db(table.name).get(key as Key);
      if (record === undefined) return undefined;
      frozen(record);
      if (records.size >= UNIT_RECORDS_CACHED) records.delete(records.keys().next().value!);
    }
    records.set(slot, record);
    return record as V;
  }

  async getMany(reads: ReadonlyArray<PointKey>): Promise<unknown[]> {
    return reads.map((r) => this.db(r.table.name).get(r.key as Key));
  }

  async has<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<boolean> {
    return this.db(table.name).doesExist(key as Key);
  }

  async range<V, K extends UnitKey>(table: Table<V, K>, options: UnitRange = {}): Promise<Array<Entry<V, K>>> {
    return [...this.db(table.name).getRange(rangeOptions(options))] as Array<Entry<V, K>>;
  }

  async *scan<V, K extends UnitKey>(table: Table<V, K>, options: Omit<UnitRange, 'limit'> = {}): AsyncIterable<Entry<V, K>> {
    // No snapshot: a long scan must not pin an old version of the catalog.
    for (const entry of this.db(table.name).getRange({ ...rangeOptions(options), snapshot: false })) yield entry as Entry<V, K>;
  }

  async count<V, K extends UnitKey>(table: Table<V, K>, options: Omit<UnitRange, 'limit'> = {}): Promise<number> {
    return this.db(table.name).getKeysCount(rangeOptions(options));
  }

  watch(tableName: string, listener: () => void): () => void {
    // As on PostgreSQL, where only watched tables are announced: a watch that works here works there.
    if (!isWatched(tableName)) throw new Error(unwatchedTable(tableName));
    let set = this.listeners.get(tableName);
    if (!set) this.listeners.set(tableName, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  probe(): Promise<void> {
    return this.env.probe();
  }

  async close(): Promise<void> {
    // The catalog environment is the engine's to close.
  }
}
