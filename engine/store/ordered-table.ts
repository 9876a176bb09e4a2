// An ordered table with synchronous transactions: the document platform's and the job queue's
// storage. Their atomic steps span several tables (a job's completion commits the writes of
// its apply step; a finalize writes the version, the document and its index together) and run
// synchronously on the main thread, so these tables live in the node's embedded catalog in
// every backend (docs/architecture.md, "Where the code departs from the plan").

/** Keys sort by type, then value; arrays element by element (LMDB's ordered-binary order). */
export type TableKey = string | number | Buffer | Array<string | number>;

export interface RangeOptions {
  /** Bounds may be key prefixes. */
  start?: TableKey;
  end?: TableKey;
  reverse?: boolean;
  limit?: number;
  /** false: the scan may see writes made while it runs (long scans that must not pin a snapshot). */
  snapshot?: boolean;
}

export interface OrderedTable<V, K extends TableKey = TableKey> {
  get(key: K): V | undefined;
  doesExist(key: K): boolean;
  /** Inside a transaction the write joins it; outside, it commits on its own. */
  put(key: K, value: V): Promise<boolean>;
  remove(key: K): Promise<boolean>;
  getRange(options?: RangeOptions): Iterable<{ key: K; value: V }>;
  getKeys(options?: RangeOptions): Iterable<K>;
  getKeysCount(options?: RangeOptions): number;
  /** Runs `step` atomically; the promise settles once it is committed. */
  transaction<T>(step: () => T): Promise<T>;
  /** Runs `step` atomically and commits before returning; inside another transaction it joins it. */
  transactionSync<T>(step: () => T): T;
  /** Settles once the writes made so far are durable (as SVC_DURABILITY defines it). */
  readonly flushed: Promise<boolean>;
  /** Settles once the writes made so far are committed. */
  readonly committed: Promise<boolean>;
}

export interface TableOptions {
  keyEncoding?: 'binary' | 'ordered-binary';
}

/** Opens the named tables of the node's embedded catalog. */
export interface TableCatalog {
  table<V, K extends TableKey = TableKey>(name: string, options?: TableOptions): OrderedTable<V, K>;
}
