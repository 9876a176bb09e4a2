// Units of work over ordered tables: the storage of the document platform, jobs, views,
// workflow runs, legacy mappings, schemas and migrations (docs/architecture.md, "Stores as
// units of work"). A step reads what it needs (each read is a precondition), decides, and
// buffers its writes; the store commits the writes atomically only if nothing the step read
// has changed since, and otherwise runs the step again on fresh reads. Steps are async, so the
// same services run on the node's LMDB (`fs`) and on PostgreSQL shared by several nodes
// (`pg-s3`). Keys sort as LMDB's ordered-binary sorts them on both.

import type { StoredBlock } from './block-store.js';

/** Keys sort by type, then value; arrays element by element. */
export type UnitKey = string | number | Array<string | number>;

/**
 * Tables whose commits are announced to every node (`UnitStore.watch`). Only these: on
 * PostgreSQL an announcement is a NOTIFY, and every transaction that notifies takes one lock of
 * the whole database at its commit, so commits that announce go one at a time.
 */
const WATCHED = new Set<string>();

/** Whether commits of the table are announced (declared with `table(name, { watched: true })`). */
export const isWatched = (tableName: string): boolean => WATCHED.has(tableName);

export const unwatchedTable = (tableName: string) => `table ${tableName} is not declared watched (table(name, { watched: true })): its commits are not announced`;

/** A named table of records `V` under keys `K`: a typed handle, nothing is opened. */
export class Table<V, K extends UnitKey = UnitKey> {
  /** Type-only: the record and key types travel with the handle. */
  declare readonly record?: V;
  declare readonly keyType?: K;
  constructor(readonly name: string) {}
}

/**
 * Tables whose records a shared store's node remembers as it last read or committed them: a
 * unit's first attempt takes that copy as its `get` without a round trip, a precondition like any
 * read. A copy another node made stale fails the commit, and the step runs again on fresh reads;
 * so does a step that threw, or wrote nothing, after taking a copy (nothing verified what it saw).
 */
const REMEMBERED = new Set<string>();

/** Whether a shared store's node remembers the table's records (declared with `table(name, { remembered: true })`). */
export const isRemembered = (tableName: string): boolean => REMEMBERED.has(tableName);

/**
 * Tables whose records a store of one node (LMDB: nobody else writes it) keeps decoded as it last
 * read them outside units (`get`, `getNow`), forgotten as soon as the node's own commit of them
 * lands, so a read after a write has answered is never a stale copy. A shared store (pg-s3) keeps
 * none: other nodes write. Such records are shared by every reader and frozen: never change one.
 */
const CACHED = new Set<string>();

/** Whether a store of one node keeps the table's records decoded (declared with `table(name, { cached: true })`). */
export const isCached = (tableName: string): boolean => CACHED.has(tableName);

/**
 * `watched`: commits that write the table are announced, so `watch` may follow it (else `watch`
 * refuses it). `remembered`: see REMEMBERED (for records that units read and write often).
 * `cached`: see CACHED (for records read far more often than written, outside units).
 */
export function table<V, K extends UnitKey = UnitKey>(name: string, options: { watched?: boolean; remembered?: boolean; cached?: boolean } = {}): Table<V, K> {
  if (options.watched) WATCHED.add(name);
  if (options.remembered) REMEMBERED.add(name);
  if (options.cached) CACHED.add(name);
  return new Table<V, K>(name);
}

export interface UnitRange {
  /** Bounds may be key prefixes; `start` is inclusive, `end` exclusive (reversed: `start` is the high end). */
  start?: UnitKey;
  end?: UnitKey;
  reverse?: boolean;
  limit?: number;
}

export interface Entry<V, K> {
  key: K;
  value: V;
}

/** A record written beside another, with it or not at all (UnitStore.insertIfAbsent). */
export interface AlsoWrite {
  table: Table<unknown, UnitKey>;
  key: UnitKey;
  value: unknown;
}

/** A counter added to only if a `Unit.putIfAbsent` writes its record. */
export interface CountedWith<K extends UnitKey> {
  table: Table<number, K>;
  key: K;
  delta: number;
}

/** What a step of a unit of work sees and does. */
/** A record's place: its table and its key (Unit.prefetch). */
export interface PointKey {
  table: { readonly name: string };
  key: UnitKey;
}

export interface Unit {
  /** The record (this unit's own write first); a precondition: the unit commits only if it is unchanged. */
  get<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<V | undefined>;
  has<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<boolean>;
  /**
   * The record, taken to be `known` without reading it on the unit's first attempt (what this
   * request itself committed under the key, such as a claim): a precondition that it is still
   * exactly that value. An attempt run again reads it as `get` does. A store whose reads cost
   * nothing (LMDB) reads it every time. `copy`: `known` is a node's copy (UnitStore.copiesOf),
   * maybe stale: a step that throws or writes nothing on it runs again on fresh reads, as on a
   * remembered table's copy.
   */
  getKnown<V, K extends UnitKey>(table: Table<V, K>, key: K, known: V, copy?: boolean): Promise<V | undefined>;
  /**
   * Reads the records at once (on PostgreSQL one statement for all), each a precondition as
   * `get` makes it; the step's `get` and `has` of them then answer what was read, with no read
   * more. Keys the unit wrote or read already are not read again.
   */
  prefetch(reads: ReadonlyArray<PointKey>): Promise<void>;
  /**
   * The committed entries in the range (this unit's own writes are not merged in). By default a
   * precondition: the unit commits only if the range holds the same entries. `precondition:
   * false` reads without one (a scan for candidates whose records are then read with `get`).
   */
  range<V, K extends UnitKey>(table: Table<V, K>, options?: UnitRange & { precondition?: boolean }): Promise<Array<Entry<V, K>>>;
  put<V, K extends UnitKey>(table: Table<V, K>, key: K, value: V): void;
  remove<V, K extends UnitKey>(table: Table<V, K>, key: K): void;
  /**
   * Adds `delta` to the number the key holds (absent: 0) as the unit commits, without making
   * the number a precondition: concurrent units that only count (a tenant's bytes) do not run
   * each other again. A key a unit adds to is not one it also reads or puts.
   */
  add<K extends UnitKey>(table: Table<number, K>, key: K, delta: number): void;
  /**
   * Writes `value` under `key` as the unit commits only if the key then holds no record, and only
   * then adds `counted.delta` to the number `counted` names (as `add` does): no read and no
   * precondition, so units that put the same key do not run each other again, and one writes it.
   * A key the unit read (or wrote) already is decided on that read (a put if it was absent).
   * The unit cannot `get` the key afterwards (what the commit will find is unknown).
   */
  putIfAbsent<V, K extends UnitKey, CK extends UnitKey>(table: Table<V, K>, key: K, value: V, counted?: CountedWith<CK>): void;
  /**
   * The blob catalog's records of `blocks` (a new block's made, a reused one's touched or made
   * live again), written by this unit's commit and only if it commits: what an unlisted ingest
   * otherwise records before the unit that names the blocks. Only on a store whose commits reach
   * the blob catalog (`UnitStore.recordsBlocks`); elsewhere it throws.
   */
  recordBlocks(blocks: readonly StoredBlock[]): void;
  /** Runs once the unit has committed (not when it is retried or fails). */
  afterCommit(callback: () => void): void;
}

export interface UnitStore {
  /** Whether other nodes write the same tables (pg-s3): in-memory copies must follow `watch`. */
  readonly shared: boolean;
  /** Whether a unit's commit can write the blob catalog's block records (Unit.recordBlocks): PostgreSQL, on the catalog's database. */
  readonly recordsBlocks: boolean;
  /**
   * Runs `step` as one unit of work and returns its result once its writes are committed. A
   * step that throws commits nothing; a step whose reads changed before its commit runs again
   * (so a step has no effects outside the unit but through `afterCommit`).
   */
  run<T>(step: (unit: Unit) => Promise<T> | T): Promise<T>;
  /**
   * Writes `value` under `key` only if the key holds no record, with `also` (written only then),
   * in one commit of its own: no unit runs, no read comes first (on PostgreSQL, one statement).
   * True if written; false, nothing written, if the key was taken. It conflicts with units as a
   * unit's write of the key would (a unit that read the key absent runs again), and wakes the
   * watchers of the tables it wrote.
   */
  insertIfAbsent<V, K extends UnitKey>(table: Table<V, K>, key: K, value: V, also?: ReadonlyArray<AlsoWrite>): Promise<boolean>;
  /** The latest committed record. */
  get<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<V | undefined>;
  /**
   * The latest committed record at once, on a store whose reads are synchronous (LMDB); absent on
   * one that reads over the network. A cached table's record may be the node's decoded copy
   * (CACHED: frozen, never changed by the reader).
   */
  getNow?<V, K extends UnitKey>(table: Table<V, K>, key: K): V | undefined;
  /** The latest committed records of several keys, in order (on PostgreSQL one statement): as `get` of each. */
  getMany(reads: ReadonlyArray<PointKey>): Promise<unknown[]>;
  /**
   * This node's copies of records of remembered tables, in order, when it has one of each (none
   * read: undefined otherwise, and always on a store without copies). Maybe stale: for checks
   * that a unit then takes as known with `getKnown(…, copy)` and so verifies.
   */
  copiesOf?(reads: ReadonlyArray<PointKey>): unknown[] | undefined;
  has<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<boolean>;
  /** The latest committed entries of a bounded range. */
  range<V, K extends UnitKey>(table: Table<V, K>, options?: UnitRange): Promise<Array<Entry<V, K>>>;
  /** Every entry of the range in pages: no snapshot, writes made meanwhile may or may not be seen. */
  scan<V, K extends UnitKey>(table: Table<V, K>, options?: Omit<UnitRange, 'limit'>): AsyncIterable<Entry<V, K>>;
  count<V, K extends UnitKey>(table: Table<V, K>, options?: Omit<UnitRange, 'limit'>): Promise<number>;
  /**
   * `listener` runs after any unit that wrote `tableName` commits, on this node or (shared) another.
   * Only for a table declared watched (`table(name, { watched: true })`); any other throws.
   */
  watch(tableName: string, listener: () => void): () => void;
  /** A cheap read and write round trip for readiness checks. */
  probe(): Promise<void>;
  /**
   * Shared stores (pg-s3): every later commit also checks that the catalog's schema version
   * (engine/store/catalog-schema.ts) is still the one read now, and refuses to write (503
   * `catalog_schema_newer`) once a newer node raised it past `known`.
   */
  pinCatalogSchema?(known: number): Promise<void>;
  close(): Promise<void>;
}

/** A unit's reads changed before it could commit: it runs again. */
export class UnitConflict extends Error {
  constructor(readonly tableName: string) {
    super(`a record of ${tableName} changed while the unit ran`);
  }
}

/** How often a unit runs before its store gives up (each retry waits a little longer). */
export const UNIT_ATTEMPTS = 64;

/** The pause before attempt `attempt` (from 1) of a unit that conflicted: none, then growing with jitter. */
export function conflictBackoff(attempt: number): number {
  if (attempt < 3) return 0;
  return Math.min(50, 2 ** Math.min(attempt - 3, 6)) * (0.5 + Math.random());
}
