/**
 * Process-local counters since start, shared by /api/stats, /metrics and the ops snapshot. A
 * leaf: the modules that see an event record it through a method; everyone else only reads.
 */
export class Stats {
  readonly startedAt = Date.now();
  #ingests = 0;
  #bytesIngested = 0;
  #freshBlocks = 0;
  #duplicateBlocks = 0;
  #freshBytes = 0;
  #duplicateBytes = 0;
  #reads = 0;
  #bytesServed = 0;
  #spilledBytes = 0;
  #requests = 0;
  #errors = 0;
  readonly #corruptBlocks = new Set<string>();

  /** Publications (blob API, resumable commits); document content is not counted. */
  get ingests(): number {
    return this.#ingests;
  }
  /** Upload body bytes, counted as they arrive, failed uploads' too. */
  get bytesIngested(): number {
    return this.#bytesIngested;
  }
  get freshBlocks(): number {
    return this.#freshBlocks;
  }
  get duplicateBlocks(): number {
    return this.#duplicateBlocks;
  }
  get freshBytes(): number {
    return this.#freshBytes;
  }
  get duplicateBytes(): number {
    return this.#duplicateBytes;
  }
  get reads(): number {
    return this.#reads;
  }
  get bytesServed(): number {
    return this.#bytesServed;
  }
  /** Body bytes that arrived while their upload was full and waited in a spill file. */
  get spilledBytes(): number {
    return this.#spilledBytes;
  }
  get requests(): number {
    return this.#requests;
  }
  /** Answers with a status of 400 or more. */
  get errors(): number {
    return this.#errors;
  }
  /** Distinct blocks (or inline blobs) that failed a checksum. */
  get corruptBlocks(): ReadonlySet<string> {
    return this.#corruptBlocks;
  }

  /**
   * A published manifest's blocks: fresh ones are new to the store, the others deduplicated
   * (`reused`: the manifest existed, so none is fresh). Returns the fresh count.
   */
  recordPublication(blocks: ReadonlyArray<{ size: number; fresh: boolean }>, reused = false): number {
    let fresh = 0;
    for (const b of blocks) {
      if (b.fresh && !reused) {
        fresh++;
        this.#freshBytes += b.size;
      } else this.#duplicateBytes += b.size;
    }
    this.#ingests++;
    this.#freshBlocks += fresh;
    this.#duplicateBlocks += blocks.length - fresh;
    return fresh;
  }

  recordBodyBytes(bytes: number): void {
    this.#bytesIngested += bytes;
  }

  recordSpill(bytes: number): void {
    this.#spilledBytes += bytes;
  }

  /** A read answered with `bytes` of a blob. */
  recordRead(bytes: number): void {
    this.#reads++;
    this.#bytesServed += bytes;
  }

  recordRequest(): void {
    this.#requests++;
  }

  recordAnswer(status: number): void {
    if (status >= 400) this.#errors++;
  }

  recordCorrupt(id: string): void {
    this.#corruptBlocks.add(id);
  }

  uptimeSeconds(): number {
    return (Date.now() - this.startedAt) / 1000;
  }

  dedupRatio(): number {
    const total = this.#freshBytes + this.#duplicateBytes;
    return total === 0 ? 0 : this.#duplicateBytes / total;
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
