// Units of work in PostgreSQL (pg-s3, schema v9): every node of the cluster runs its units on the
// same rows. A row is (table name, ordered-binary key bytes, msgpack value bytes); bytea sorts as
// LMDB sorts its keys, so ranges answer exactly what LmdbUnitStore answers. A unit's commit is
// one call of svc_unit_commit (schema-v9-units.ts: locks, checks, writes, notifies; the v11, v12
// and v13 overloads add announcements, counters added on the server, records put if absent and
// blocks; this node calls v13's), and every node LISTENs on `svc_units` to learn which tables the
// others wrote.
import { LRUCache } from 'lru-cache';
import { Packr } from 'msgpackr';
import { fromBufferKey } from 'ordered-binary';
import type { Listening, PgPool } from './pool.js';
import { type BufferedWrite, type PointRead, type RangeRead, type StoredEntry, type UnitBackend, keyBytes, runUnit, sameBytes } from '../unit-runner.js';
import { SvcError } from '../../base/errors.js';
import type { StoredBlock } from '../block-store.js';
import { blockArrays } from './block-arrays.js';
import { UNIT_ROWS_REMEMBERED, UNIT_ROWS_REMEMBERED_BYTES } from '../../base/limits.js';
import { type AlsoWrite, type Entry, type PointKey, type Table, type Unit, type UnitKey, type UnitRange, type UnitStore, isRemembered, isWatched, unwatchedTable } from '../unit-store.js';
import { CATALOG_SCHEMA, CATALOG_SCHEMA_KEY, catalogTooNew, tooNewWords, versionOf } from '../catalog-schema.js';

export const UNITS_CHANNEL = 'svc_units';

/** How soon a lost LISTEN connection is opened again. */
const RECONNECT_MS = 1000;

/** Rows per query of a scan. */
const SCAN_PAGE = 500;

// No shared structures: a row's bytes must decode alone, on any node, forever.
const packr = new Packr({ useRecords: false });

/** The written tables other nodes hear of (each once): the watched ones (engine/store/unit-store.ts). */
const announced = (tables: string[]): string[] => [...new Set(tables.filter(isWatched))];

// Below and above every key: ordered-binary never begins a key with 0xff (strings begin with a
// character byte or 27, numbers with 0x08-0x1f), and the empty key is below all others.
const LOWEST = Buffer.alloc(0);
const HIGHEST = Buffer.from([0xff]);

/**
 * A range as byte bounds, lmdb-js's getRange semantics: forward, `start` <= key < `end`;
 * reverse, descending from `start` (inclusive) down to `end` (exclusive).
 */
function bounds(options: UnitRange): { start: Buffer; end: Buffer; reverse: boolean; limit: number | null } {
  const reverse = options.reverse === true;
  return {
    start: options.start === undefined ? (reverse ? HIGHEST : LOWEST) : keyBytes(options.start),
    end: options.end === undefined ? (reverse ? LOWEST : HIGHEST) : keyBytes(options.end),
    reverse,
    limit: options.limit === undefined || !Number.isFinite(options.limit) ? null : Math.max(0, Math.floor(options.limit)),
  };
}

/** A remembered row's place in PgUnitStore's copies. */
const copySlot = (tableName: string, key: Buffer) => `${tableName}\u0000${key.toString('latin1')}`;

/** The key just after `bytes` in memcmp order: where the next forward page starts. */
const successor = (bytes: Buffer) => Buffer.concat([bytes, Buffer.from([0])]);

interface Row {
  key: Buffer;
  value: Buffer;
}

const storedEntry = (row: Row): StoredEntry => ({ key: fromBufferKey(row.key) as UnitKey, value: packr.unpack(row.value), bytes: row.value });

/**
 * The connection was lost once the commit's statement could have reached PostgreSQL (reset,
 * closed, timed out mid-statement): it may have committed. Not a refused connection, nor one
 * that could not be opened: then nothing was sent, and the request is refused whole.
 */
function sentThenLost(err: unknown): boolean {
  const cause = (err instanceof SvcError && err.code === 'catalog_unavailable' ? (err as { cause?: unknown }).cause : err) as { code?: string; message?: string } | undefined;
  if (['ECONNRESET', 'EPIPE', 'ETIMEDOUT'].includes(cause?.code ?? '')) return true;
  return /^Connection terminated unexpectedly|^Client has encountered a connection error/.test(cause?.message ?? '');
}

/** 503 commit_unknown: the commit may have landed; a retry with the same Idempotency-Key is answered once (engine/idempotency). */
function commitUnknown(err: unknown): SvcError {
  const unknown = new SvcError('unavailable', 'commit_unknown', 'The connection to PostgreSQL was lost after the commit was sent: it may or may not have landed. Retry with the same Idempotency-Key to be answered once', { retryAfterSeconds: 1 });
  Object.defineProperty(unknown, 'cause', { value: err, enumerable: false, writable: true, configurable: true });
  return unknown;
}

/** A deadlock or serialization failure: the commit did not happen, the unit runs again. */
const retryable = (err: unknown) => ['40P01', '40001'].includes((err as { code?: string }).code ?? '');

export interface PgUnitStoreOptions {
  /** Told of a lost LISTEN connection (the node logs it); it is reopened and every watcher called. */
  onWatchLost?: (err: Error) => void;
}

export class PgUnitStore implements UnitStore, UnitBackend {
  readonly shared = true;
  /** The blob catalog's tables are on the same database: a commit records blocks as svc_record_unlisted would (schema v13). */
  readonly recordsBlocks = true;
  private readonly listeners = new Map<string, Set<() => void>>();
  private listening: Listening | undefined;
  private closed = false;
  /** The catalog's schema version this node knows, the row's bytes it pinned, and a newer version once seen. */
  private schema?: { known: number; bytes: Buffer | undefined; newer?: number };
  /** Rows of remembered tables as this node last read or committed them (unit-store.ts, REMEMBERED), by table and key bytes. */
  private readonly copies = new LRUCache<string, Buffer>({
    max: UNIT_ROWS_REMEMBERED,
    maxSize: UNIT_ROWS_REMEMBERED_BYTES,
    maxEntrySize: UNIT_ROWS_REMEMBERED_BYTES / 64,
    sizeCalculation: (bytes, slot) => bytes.length + slot.length,
  });

  constructor(
    private readonly sql: PgPool,
    private readonly options: PgUnitStoreOptions = {},
  ) {}

  encoded(value: unknown): Buffer {
    return packr.pack(value);
  }

  async readPoint(tableName: string, key: UnitKey): Promise<{ value: unknown; bytes: Buffer | undefined }> {
    const bytes = keyBytes(key);
    const [row] = await this.sql<Array<{ value: Buffer }>>`SELECT value FROM svc_unit_rows WHERE tbl = ${tableName} AND key = ${bytes}`;
    this.remember(tableName, bytes, row?.value);
    return row ? { value: packr.unpack(row.value), bytes: row.value } : { value: undefined, bytes: undefined };
  }

  remembered(tableName: string, key: UnitKey): { value: unknown; bytes: Buffer } | undefined {
    if (!isRemembered(tableName)) return undefined;
    const bytes = this.copies.get(copySlot(tableName, keyBytes(key)));
    return bytes && { value: packr.unpack(bytes), bytes };
  }

  copiesOf(reads: ReadonlyArray<PointKey>): unknown[] | undefined {
    const values: unknown[] = [];
    for (const r of reads) {
      const copy = this.remembered(r.table.name, r.key);
      if (!copy) return undefined;
      values.push(copy.value);
    }
    return values;
  }

  /** A row of a remembered table as read or committed (undefined: absent or unknown, forgotten). */
  private remember(tableName: string, key: Buffer, bytes: Buffer | undefined): void {
    if (!isRemembered(tableName)) return;
    if (bytes) this.copies.set(copySlot(tableName, key), bytes);
    else this.copies.delete(copySlot(tableName, key));
  }

  /**
   * The records at once, in order: one statement, each looked up by the primary key (a scalar
   * subquery per element: never a join the planner could turn into a scan of the table).
   */
  async readPoints(reads: ReadonlyArray<{ table: string; key: UnitKey }>): Promise<Array<{ value: unknown; bytes: Buffer | undefined }>> {
    const keys = reads.map((r) => keyBytes(r.key));
    const rows = await this.sql<Array<{ value: Buffer | null }>>`SELECT (SELECT u.value FROM svc_unit_rows u WHERE u.tbl = r.tbl AND u.key = r.key) AS value
      FROM unnest(${reads.map((r) => r.table)}::text[], ${keys}::bytea[]) WITH ORDINALITY AS r(tbl, key, i) ORDER BY r.i`;
    rows.forEach((row, i) => this.remember(reads[i]!.table, keys[i]!, row.value ?? undefined));
    return rows.map((row) => (row.value ? { value: packr.unpack(row.value), bytes: row.value } : { value: undefined, bytes: undefined }));
  }

  async readRange(tableName: string, options: UnitRange): Promise<StoredEntry[]> {
    const { start, end, reverse, limit } = bounds(options);
    const rows = reverse
      ? await this.sql<Row[]>`SELECT key, value FROM svc_unit_rows WHERE tbl = ${tableName} AND key <= ${start} AND key > ${end} ORDER BY key DESC LIMIT ${limit}`
      : await this.sql<Row[]>`SELECT key, value FROM svc_unit_rows WHERE tbl = ${tableName} AND key >= ${start} AND key < ${end} ORDER BY key LIMIT ${limit}`;
    return rows.map(storedEntry);
  }

  /**
   * One call of svc_unit_commit. Counter additions (`delta`) travel as deltas that the commit adds
   * on the server (schema-v12-unit-add.ts): no read of the counter, no precondition on it, so the
   * units that only count do not fail one another.
   */
  async commit(points: PointRead[], ranges: RangeRead[], writes: BufferedWrite[], blocks: readonly StoredBlock[]): Promise<boolean> {
    const { schema } = this;
    if (schema?.newer !== undefined) throw catalogTooNew(schema.newer);
    // The pinned schema row is one more precondition: a newer node's raise of the version takes
    // that key's lock exclusively, so no commit of this node lands after it.
    if (schema) points = [...points, { table: CATALOG_SCHEMA.name, key: CATALOG_SCHEMA_KEY, bytes: schema.bytes }];
    const ok = await this.commitChecked(points, ranges, writes, blocks);
    if (!ok && schema) await this.catalogSchemaMoved(schema);
    return ok;
  }

  /** After a failed commit: a newer version stops this node's writes; one it knows (a node like it raised it) is pinned anew. */
  private async catalogSchemaMoved(schema: NonNullable<PgUnitStore['schema']>): Promise<void> {
    const { value, bytes } = await this.readPoint(CATALOG_SCHEMA.name, CATALOG_SCHEMA_KEY);
    if (sameBytes(bytes, schema.bytes)) return;
    const version = versionOf(value);
    if (version > schema.known) {
      schema.newer = version;
      throw catalogTooNew(version);
    }
    schema.bytes = bytes;
  }

  async pinCatalogSchema(known: number): Promise<void> {
    const { value, bytes } = await this.readPoint(CATALOG_SCHEMA.name, CATALOG_SCHEMA_KEY);
    this.schema = { known, bytes };
    if (versionOf(value) > known) this.schema.newer = versionOf(value);
  }

  /** For readiness (every 5 s on pg-s3): fails once the catalog's schema is newer than this node knows, which then writes nothing more. */
  async checkCatalogSchema(): Promise<void> {
    const { schema } = this;
    if (!schema) return;
    if (schema.newer === undefined) {
      const { value } = await this.readPoint(CATALOG_SCHEMA.name, CATALOG_SCHEMA_KEY);
      if (versionOf(value) > schema.known) schema.newer = versionOf(value);
    }
    if (schema.newer !== undefined) throw new Error(`${tooNewWords(schema.newer)}: this node writes nothing more`);
  }

  private async commitChecked(points: PointRead[], ranges: RangeRead[], writes: BufferedWrite[], blocks: readonly StoredBlock[]): Promise<boolean> {
    const spans = ranges.map((r) => bounds(r.options));
    const entries = ranges.flatMap((r) => r.entries);
    const puts = writes.filter((w) => w.delta === undefined && !w.ifAbsent);
    const adds = writes.filter((w) => w.delta !== undefined);
    const absent = writes.filter((w) => w.ifAbsent);
    const putKeys = puts.map((w) => keyBytes(w.key));
    const putValues = puts.map((w) => (w.value === undefined ? null : packr.pack(w.value)));
    let ok = false;
    try {
      const [row] = await this.commitV13(points, ranges, spans, entries, puts, putKeys, putValues, adds, absent, blocks);
      ok = row!.ok;
      return ok;
    } catch (err) {
      if (retryable(err)) return false;
      if (sentThenLost(err)) throw commitUnknown(err);
      throw err;
    } finally {
      // Committed: the rows as written. Not (or maybe not): the copies it took may be stale, forgotten.
      if (ok) puts.forEach((w, i) => this.remember(w.table, putKeys[i]!, putValues[i] ?? undefined));
      else {
        for (const p of points) this.remember(p.table, keyBytes(p.key), undefined);
        puts.forEach((w, i) => this.remember(w.table, putKeys[i]!, undefined));
      }
      // Put if absent: what the key holds now is not known here.
      for (const w of writes) if (w.ifAbsent) this.remember(w.table, keyBytes(w.key), undefined);
    }
  }

  /**
   * svc_unit_commit of schema v13 (every node of this version migrated the catalog to it): the
   * checks and writes of v12, and also records put where their key holds none, the counters added
   * to only then, and the blob catalog's block records.
   */
  private commitV13(points: PointRead[], ranges: RangeRead[], spans: Array<ReturnType<typeof bounds>>, entries: RangeRead['entries'],
    puts: BufferedWrite[], putKeys: Buffer[], putValues: Array<Buffer | null>, adds: BufferedWrite[], absent: BufferedWrite[], blocks: readonly StoredBlock[]): Promise<Array<{ ok: boolean }>> {
    const recorded = blockArrays(blocks);
    const counted = absent.flatMap((w, i) => (w.ifAbsent!.counted ? [{ of: i + 1, ...w.ifAbsent!.counted }] : []));
    const written = [...puts, ...adds, ...absent].map((w) => w.table).concat(counted.map((c) => c.table));
    return this.sql<Array<{ ok: boolean }>>`SELECT svc_unit_commit(
      ${points.map((p) => p.table)}::text[], ${points.map((p) => keyBytes(p.key))}::bytea[], ${points.map((p) => p.bytes ?? null)}::bytea[],
      ${ranges.map((r) => r.table)}::text[], ${spans.map((s) => s.start)}::bytea[], ${spans.map((s) => s.end)}::bytea[],
      ${spans.map((s) => s.reverse)}::boolean[], ${spans.map((s) => s.limit)}::bigint[], ${ranges.map((r) => r.entries.length)}::integer[],
      ${entries.map((e) => keyBytes(e.key))}::bytea[], ${entries.map((e) => e.bytes)}::bytea[],
      ${puts.map((w) => w.table)}::text[], ${putKeys}::bytea[], ${putValues}::bytea[],
      ${adds.map((w) => w.table)}::text[], ${adds.map((w) => keyBytes(w.key))}::bytea[], ${adds.map((w) => w.delta!)}::float8[],
      ${absent.map((w) => w.table)}::text[], ${absent.map((w) => keyBytes(w.key))}::bytea[], ${absent.map((w) => packr.pack(w.value))}::bytea[],
      ${counted.map((c) => c.of)}::integer[], ${counted.map((c) => c.table)}::text[], ${counted.map((c) => keyBytes(c.key))}::bytea[], ${counted.map((c) => c.delta)}::float8[],
      ${recorded.keys}::bytea[], ${recorded.sizes}::bigint[],
      ${announced(written)}::text[]) AS ok`;
  }

  async run<T>(step: (unit: Unit) => Promise<T> | T): Promise<T> {
    const { result, written } = await runUnit(this, step);
    // This node's watchers now, not after the notification's round trip (they hear that too).
    for (const name of written) for (const listener of this.listeners.get(name) ?? []) listener();
    return result;
  }

  async insertIfAbsent<V, K extends UnitKey>(table: Table<V, K>, key: K, value: V, also: ReadonlyArray<AlsoWrite> = []): Promise<boolean> {
    const newer = this.schema?.newer;
    if (newer !== undefined) throw catalogTooNew(newer);
    let written: boolean;
    try {
      const [row] = await this.sql<Array<{ ok: boolean }>>`SELECT svc_unit_insert_absent(
        ${table.name}, ${keyBytes(key)}, ${packr.pack(value)},
        ${also.map((w) => w.table.name)}::text[], ${also.map((w) => keyBytes(w.key))}::bytea[], ${also.map((w) => packr.pack(w.value))}::bytea[],
        ${announced([table.name, ...also.map((w) => w.table.name)])}::text[]) AS ok`;
      written = row!.ok;
    } catch (err) {
      if (sentThenLost(err)) throw commitUnknown(err);
      throw err;
    }
    if (written) {
      this.remember(table.name, keyBytes(key), undefined);
      for (const w of also) this.remember(w.table.name, keyBytes(w.key), undefined);
    }
    if (written) for (const name of new Set([table.name, ...also.map((w) => w.table.name)])) for (const listener of this.listeners.get(name) ?? []) listener();
    return written;
  }

  async get<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<V | undefined> {
    return (await this.readPoint(table.name, key)).value as V | undefined;
  }

  async getMany(reads: ReadonlyArray<PointKey>): Promise<unknown[]> {
    if (reads.length === 0) return [];
    if (reads.length === 1) return [(await this.readPoint(reads[0]!.table.name, reads[0]!.key)).value];
    return (await this.readPoints(reads.map((r) => ({ table: r.table.name, key: r.key })))).map((r) => r.value);
  }

  async has<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<boolean> {
    const rows = await this.sql`SELECT 1 FROM svc_unit_rows WHERE tbl = ${table.name} AND key = ${keyBytes(key)}`;
    return rows.length > 0;
  }

  async range<V, K extends UnitKey>(table: Table<V, K>, options: UnitRange = {}): Promise<Array<Entry<V, K>>> {
    return (await this.readRange(table.name, options)).map((e) => ({ key: e.key as K, value: e.value as V }));
  }

  async *scan<V, K extends UnitKey>(table: Table<V, K>, options: Omit<UnitRange, 'limit'> = {}): AsyncIterable<Entry<V, K>> {
    const { start, end, reverse } = bounds(options);
    // Page by key: each page continues after the last key of the one before (no cursor held open).
    let after: Buffer | undefined;
    for (;;) {
      let rows: Row[];
      if (!reverse) {
        const from = after === undefined ? start : successor(after);
        rows = await this.sql<Row[]>`SELECT key, value FROM svc_unit_rows WHERE tbl = ${table.name} AND key >= ${from} AND key < ${end} ORDER BY key LIMIT ${SCAN_PAGE}`;
      } else if (after === undefined) {
        rows = await this.sql<Row[]>`SELECT key, value FROM svc_unit_rows WHERE tbl = ${table.name} AND key <= ${start} AND key > ${end} ORDER BY key DESC LIMIT ${SCAN_PAGE}`;
      } else {
        rows = await this.sql<Row[]>`SELECT key, value FROM svc_unit_rows WHERE tbl = ${table.name} AND key < ${after} AND key > ${end} ORDER BY key DESC LIMIT ${SCAN_PAGE}`;
      }
      for (const row of rows) yield { key: fromBufferKey(row.key) as K, value: packr.unpack(row.value) as V };
      if (rows.length < SCAN_PAGE) return;
      after = rows[rows.length - 1]!.key;
    }
  }

  async count<V, K extends UnitKey>(table: Table<V, K>, options: Omit<UnitRange, 'limit'> = {}): Promise<number> {
    const { start, end, reverse } = bounds(options);
    const [row] = reverse
      ? await this.sql<Array<{ n: number }>>`SELECT count(*)::int8 AS n FROM svc_unit_rows WHERE tbl = ${table.name} AND key <= ${start} AND key > ${end}`
      : await this.sql<Array<{ n: number }>>`SELECT count(*)::int8 AS n FROM svc_unit_rows WHERE tbl = ${table.name} AND key >= ${start} AND key < ${end}`;
    return row!.n;
  }

  watch(tableName: string, listener: () => void): () => void {
    if (!isWatched(tableName)) throw new Error(unwatchedTable(tableName));
    let set = this.listeners.get(tableName);
    if (!set) this.listeners.set(tableName, (set = new Set()));
    set.add(listener);
    // One LISTEN connection for the store, opened with the first watch.
    if (!this.listening && !this.closed) {
      this.listening = this.sql.listen(
        UNITS_CHANNEL,
        {
          onNotify: (name) => this.notify(this.listeners.get(name)),
          // At first and after every reconnection: a notification may have been missed meanwhile.
          onListening: () => {
            for (const listeners of this.listeners.values()) this.notify(listeners);
          },
          onLost: (err) => this.options.onWatchLost?.(err),
        },
        RECONNECT_MS,
      );
    }
    return () => set.delete(listener);
  }

  /** Calls each listener; one that throws must not break the LISTEN connection's event handling. */
  private notify(listeners: Set<() => void> | undefined): void {
    for (const listener of listeners ?? []) {
      try {
        listener();
      } catch {
        // The listener's own failure: it is called again on the table's next commit.
      }
    }
  }

  async probe(): Promise<void> {
    await this.sql`SELECT 1 FROM svc_unit_rows LIMIT 1`;
  }

  async close(): Promise<void> {
    // The pool is the catalog's to end; the LISTEN connection is this store's.
    this.closed = true;
    const listening = this.listening;
    this.listening = undefined;
    await listening?.close();
  }
}
