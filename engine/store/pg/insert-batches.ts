// Records written where their keys hold none (UnitStore.insertIfAbsent on PostgreSQL), gathered
// into batches: each call of svc_unit_insert_absent_many (schema-v12-insert-batch.ts) writes all
// the records that arrived while the calls before it ran. A lone record goes at once (no wait, no
// timer); when many creates run at once, their claims share one statement and one transaction,
// which is most of what a claim costs PostgreSQL and this node.
import { INSERT_BATCH_MAX, INSERT_BATCHES_IN_FLIGHT } from '../../base/limits.js';

/** One record to write where its key holds none, and the records that go with it. */
export interface AbsentInsert {
  table: string;
  key: Buffer;
  value: Buffer;
  also: ReadonlyArray<{ table: string; key: Buffer; value: Buffer }>;
  /** The watched tables of the record and its companions (announced when written). */
  announce: readonly string[];
}

/** Writes one batch; which of its records were written, in order. */
export type WriteBatch = (batch: readonly AbsentInsert[]) => Promise<boolean[]>;

interface Waiting {
  insert: AbsentInsert;
  resolve(written: boolean): void;
  reject(err: unknown): void;
}

export class InsertBatches {
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;

  constructor(private readonly write: WriteBatch) {}

  /** Whether `insert` was written (false: its key held a record). */
  add(insert: AbsentInsert): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ insert, resolve, reject });
      if (this.inFlight < INSERT_BATCHES_IN_FLIGHT) this.send();
    });
  }

  private send(): void {
    const batch = this.waiting.splice(0, INSERT_BATCH_MAX);
    if (batch.length === 0) return;
    this.inFlight++;
    this.write(batch.map((w) => w.insert)).then(
      (written) => batch.forEach((w, i) => w.resolve(written[i] === true)),
      (err: unknown) => batch.forEach((w) => w.reject(err)),
    ).finally(() => {
      this.inFlight--;
      this.send();
    });
  }
}
