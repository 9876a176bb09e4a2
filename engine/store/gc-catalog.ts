// Garbage collection's own state: the mark set of a run, quarantine receipts, tombstones of
// purged blocks, the blocks a reclaim of a failed upload is working on, and the last runs.
// GC's safety rests on atomic steps that also touch the blob catalog's block records: the
// `...Sync` calls are made inside `atomicallySync` and are committed with it.

/** A block in quarantine: the receipt that lets it be restored or, later, purged. */
export interface Receipt {
  size: number;
  quarantinedAt: number;
  runId: string;
  /** The block's record when it was quarantined (restored with it), else the file's mtime. */
  createdAt: number;
}

/** A purged block, kept a while so that a late reference to it fails instead of dangling. */
export interface Tombstone {
  size: number;
  quarantinedAt: number;
  purgedAt: number;
  runId: string;
}

/** What the catalog needs of a run's report to keep the last ones in order. */
export interface StoredGcRun {
  runId: string;
  startedAt: string;
}

export interface GcCatalog {
  /** Runs `step` as one atomic, committed step (also for the blob catalog's block records). */
  atomicallySync<T>(step: () => T): T;
  /** Runs `step` as one atomic step, committed when the promise resolves. */
  atomically<T>(step: () => T): Promise<T>;

  lastRun<R extends StoredGcRun>(): R | undefined;
  /** Keeps the run and the `keep - 1` before it. */
  saveRun(run: StoredGcRun, keep: number): Promise<void>;

  clearMarks(): Promise<void>;
  mark(digests: readonly Buffer[]): Promise<void>;
  /** Inside an atomic step (a publication's guard). */
  markSync(key: Buffer): void;
  isMarked(key: Buffer): boolean;
  markedCount(): number;
  /** Resolves once every mark written before the call is committed. */
  marksCommitted(): Promise<void>;

  receipt(key: Buffer): Receipt | undefined;
  hasReceipt(key: Buffer): boolean;
  putReceiptSync(key: Buffer, receipt: Receipt): void;
  removeReceiptSync(key: Buffer): void;
  receiptCount(): number;
  /** Up to `limit` receipts in key order, from `after` (inclusive) on. */
  receipts(after: Buffer | undefined, limit: number): Iterable<{ key: Buffer; receipt: Receipt }>;

  hasTombstone(key: Buffer): boolean;
  putTombstoneSync(key: Buffer, tombstone: Tombstone): void;
  removeTombstoneSync(key: Buffer): void;
  tombstones(): Iterable<{ key: Buffer; tombstone: Tombstone }>;

  /** Blocks a reclaim is working on: digest → size. */
  pendingReclaims(): Iterable<{ key: Buffer; size: number }>;
  addPendingReclaimSync(key: Buffer, size: number): void;
  removePendingReclaimSync(key: Buffer): void;
}
