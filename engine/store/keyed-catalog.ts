// Records under string keys, read in key order: model registrations, metadata schemas and
// migrations. Small tables that change rarely and are read often.

export interface KeyedCatalog<R> {
  get(key: string): R | undefined;
  /** Every record whose key sorts after `after` (all when undefined), in key order. */
  entries(after?: string): Iterable<{ key: string; record: R }>;
  keys(): Iterable<string>;
  /** Stores `record` unless the key holds one, atomically; returns what the key holds afterwards. */
  putIfAbsent(key: string, record: R): Promise<{ record: R; created: boolean }>;
  put(key: string, record: R): Promise<void>;
  remove(key: string): Promise<void>;
}
