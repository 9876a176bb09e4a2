import type { Database } from 'lmdb';
import type { GcCatalog, Receipt, StoredGcRun, Tombstone } from '../gc-catalog.js';
import type { CatalogEnv } from './env.js';

/** GC state in the `gc_marks`, `gc_quarantine`, `gc_purged`, `gc_reclaims` and `gc_runs` databases. */
export class LmdbGcCatalog implements GcCatalog {
  private readonly marks: Database<number, Buffer>;
  private readonly quarantine: Database<Receipt, Buffer>;
  private readonly purged: Database<Tombstone, Buffer>;
  private readonly pending: Database<number, Buffer>;
  private readonly runs: Database<StoredGcRun, [number, string]>;

  constructor(env: CatalogEnv) {
    this.marks = env.database<number, Buffer>('gc_marks', { keyEncoding: 'binary' });
    this.quarantine = env.database<Receipt, Buffer>('gc_quarantine', { keyEncoding: 'binary' });
    this.purged = env.database<Tombstone, Buffer>('gc_purged', { keyEncoding: 'binary' });
    this.pending = env.database<number, Buffer>('gc_reclaims', { keyEncoding: 'binary' });
    this.runs = env.database('gc_runs') as unknown as Database<StoredGcRun, [number, string]>;
  }

  atomicallySync<T>(step: () => T): T {
    return this.quarantine.transactionSync(step);
  }

  atomically<T>(step: () => T): Promise<T> {
    return this.quarantine.transaction(step);
  }

  lastRun<R extends StoredGcRun>(): R | undefined {
    for (const { value } of this.runs.getRange({ reverse: true, limit: 1 })) return value as R;
    return undefined;
  }

  async saveRun(run: StoredGcRun, keep: number): Promise<void> {
    await this.runs.transaction(() => {
      this.runs.put([Date.parse(run.startedAt), run.runId], run);
      let n = 0;
      for (const key of this.runs.getKeys({ reverse: true })) if (++n > keep) this.runs.remove(key);
    });
  }

  async clearMarks(): Promise<void> {
    await this.marks.clearAsync();
  }

  async mark(digests: readonly Buffer[]): Promise<void> {
    if (digests.length === 0) return;
    await this.marks.transaction(() => {
      for (const d of digests) this.marks.put(d, 1);
    });
  }

  markSync(key: Buffer): void {
    this.marks.put(Buffer.from(key), 1);
  }

  isMarked(key: Buffer): boolean {
    return this.marks.doesExist(key);
  }

  markedCount(): number {
    return (this.marks.getStats() as { entryCount: number }).entryCount;
  }

  async marksCommitted(): Promise<void> {
    await this.marks.transaction(() => {});
  }

  receipt(key: Buffer): Receipt | undefined {
    return this.quarantine.get(key);
  }

  hasReceipt(key: Buffer): boolean {
    return this.quarantine.doesExist(key);
  }

  putReceiptSync(key: Buffer, receipt: Receipt): void {
    this.quarantine.put(key, receipt);
  }

  removeReceiptSync(key: Buffer): void {
    this.quarantine.remove(key);
  }

  receiptCount(): number {
    return (this.quarantine.getStats() as { entryCount: number }).entryCount;
  }

  *receipts(after: Buffer | undefined, limit: number): Iterable<{ key: Buffer; receipt: Receipt }> {
    for (const { key, value } of this.quarantine.getRange({ start: after, snapshot: false, limit })) yield { key, receipt: value };
  }

  hasTombstone(key: Buffer): boolean {
    return this.purged.doesExist(key);
  }

  putTombstoneSync(key: Buffer, tombstone: Tombstone): void {
    this.purged.put(key, tombstone);
  }

  removeTombstoneSync(key: Buffer): void {
    this.purged.remove(key);
  }

  *tombstones(): Iterable<{ key: Buffer; tombstone: Tombstone }> {
    for (const { key, value } of this.purged.getRange({ snapshot: false })) yield { key, tombstone: value };
  }

  *pendingReclaims(): Iterable<{ key: Buffer; size: number }> {
    for (const { key, value } of this.pending.getRange({ snapshot: false })) yield { key, size: value };
  }

  addPendingReclaimSync(key: Buffer, size: number): void {
    this.pending.put(key, size);
  }

  removePendingReclaimSync(key: Buffer): void {
    this.pending.remove(key);
  }
}
