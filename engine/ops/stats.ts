/** Process-local counters since start, shared by /api/stats, /metrics and the ops snapshot. */
export class Stats {
  readonly startedAt = Date.now();
  ingests = 0;
  /** Upload body bytes, counted as they arrive (server/body-feed.ts), failed uploads' too. */
  bytesIngested = 0;
  freshBlocks = 0;
  duplicateBlocks = 0;
  freshBytes = 0;
  duplicateBytes = 0;
  reads = 0;
  bytesServed = 0;
  /** Body bytes that arrived while their upload was full and waited in a spill file. */
  spilledBytes = 0;
  requests = 0;
  errors = 0;
  readonly corruptBlocks = new Set<string>();

  uptimeSeconds(): number {
    return (Date.now() - this.startedAt) / 1000;
  }

  dedupRatio(): number {
    const total = this.freshBytes + this.duplicateBytes;
    return total === 0 ? 0 : this.duplicateBytes / total;
  }

  toJSON() {
    return {
      uptimeSeconds: this.uptimeSeconds(),
      ingests: this.ingests,
      bytesIngested: this.bytesIngested,
      freshBlocks: this.freshBlocks,
      duplicateBlocks: this.duplicateBlocks,
      freshBytes: this.freshBytes,
      duplicateBytes: this.duplicateBytes,
      dedupRatio: this.dedupRatio(),
      reads: this.reads,
      bytesServed: this.bytesServed,
    };
  }
}
