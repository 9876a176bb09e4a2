// JSON rows written as UTF-8 bytes, comma-separated, straight into a SharedArrayBuffer
// (engine/models/json-bytes.ts). A worker fills it and hands it over, so the listener writes the
// bytes to the socket without cloning or re-encoding anything.

import { JsonBytes } from './json-bytes.js';
import type { Value } from './types.js';

export interface RowBytes {
  bytes: SharedArrayBuffer;
  length: number;
  /** End offset of every row (only when asked for: ranked output is reordered by row). */
  ends?: Uint32Array;
}

export class RowWriter {
  private readonly out = new JsonBytes();
  private rows = 0;
  private readonly ends: number[] | undefined;

  /**
   * With `keepEnds`, rows are written without commas between them, and their ends are kept.
   * `expectedRows`: room for about that many rows like the first is made after the first.
   */
  constructor(
    keepEnds: boolean,
    private readonly expectedRows = 0,
  ) {
    this.ends = keepEnds ? [] : undefined;
  }

  /** Adds the row's cells at `columns` (all when undefined). */
  write(row: Value[], columns: number[] | undefined): void {
    const out = this.out;
    if (this.rows++ && !this.ends) out.byte(0x2c);
    out.byte(0x5b);
    const n = columns ? columns.length : row.length;
    for (let i = 0; i < n; i++) {
      if (i) out.byte(0x2c);
      out.value(row[columns ? columns[i]! : i]!);
    }
    out.byte(0x5d);
    this.ends?.push(out.length);
    if (this.rows === 1 && this.expectedRows > 1) out.reserve(Math.ceil(out.length * this.expectedRows * 1.25) + 4096);
  }

  finish(): RowBytes {
    const { buffer: bytes, length } = this.out;
    return this.ends ? { bytes, length, ends: Uint32Array.from(this.ends) } : { bytes, length };
  }
}
