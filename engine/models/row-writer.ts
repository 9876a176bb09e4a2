// JSON rows written as UTF-8 bytes, comma-separated, into one growing buffer. A worker fills
// it and hands the bytes over in a SharedArrayBuffer, so the listener writes them to the
// socket without cloning or re-encoding anything.

import { encodeValue } from './frame-json.js';
import type { Value } from './types.js';

export interface RowBytes {
  bytes: SharedArrayBuffer;
  length: number;
  /** End offset of every row (only when asked for: ranked output is reordered by row). */
  ends?: Uint32Array;
}

/** Rows per JSON.stringify call: one flat string per batch is cheaper than one per row. */
const BATCH_ROWS = 64;

export class RowWriter {
  private buffer = Buffer.allocUnsafe(64 * 1024);
  private length = 0;
  private batch: unknown[][] = [];
  private readonly ends: number[] | undefined;

  /** With `keepEnds`, rows are written one by one, without commas, and their ends are kept. */
  constructor(keepEnds: boolean) {
    this.ends = keepEnds ? [] : undefined;
  }

  /** Adds the row's cells at `columns` (all when undefined). */
  write(row: Value[], columns: number[] | undefined): void {
    const cells = columns ? columns.map((c) => encodeValue(row[c]!)) : row.map(encodeValue);
    if (this.ends) {
      this.append(JSON.stringify(cells));
      this.ends.push(this.length);
      return;
    }
    this.batch.push(cells);
    if (this.batch.length === BATCH_ROWS) this.flush();
  }

  finish(): RowBytes {
    this.flush();
    const bytes = new SharedArrayBuffer(this.length);
    new Uint8Array(bytes).set(this.buffer.subarray(0, this.length));
    return this.ends ? { bytes, length: this.length, ends: Uint32Array.from(this.ends) } : { bytes, length: this.length };
  }

  private flush(): void {
    if (this.batch.length === 0) return;
    const text = JSON.stringify(this.batch);
    // The batch's own brackets are dropped: rows of all batches form one list.
    if (this.length) this.append(',');
    this.append(text.slice(1, -1));
    this.batch = [];
  }

  private append(text: string): void {
    const most = text.length * 3;
    if (this.length + most > this.buffer.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + most));
      this.buffer.copy(grown, 0, 0, this.length);
      this.buffer = grown;
    }
    this.length += this.buffer.write(text, this.length, 'utf8');
  }
}
