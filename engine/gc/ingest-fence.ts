// Which ingests may still add a reference to a block they found on disk before GC moved it.
//
// A store task that finds an intact block file skips writing it (dedup); the reference to that
// block is committed later (manifest, document content or a resumable part). If GC quarantines
// the file in between, the publication guard moves it back; but if GC *purged* it meanwhile the
// bytes would be gone. So purge only deletes blocks quarantined before the start of the oldest
// ingest that may still be committing its references: the "fence".
//
// The blocks a failed ingest wrote are reclaimed at once (./reclaim.ts) by a finer test: the
// ingests that still hold a block ("claims": blocks stored, or handed to their caller and not yet
// recorded) are asked one by one.

import type { Logger } from '../base/log.js';

/** What the fence needs of an ingest (engine/cas/ingest.ts). */
export interface FencedIngest {
  /** Set by the fence: called once the ingest's caller has its answer (ended, failed or aborted). */
  onEnded: () => void;
  /** Set by the fence: called once nothing the ingest stored can become referenced through it. */
  onLetGo: () => void;
  /** Adds to `into` the digests among `hexes` that may still become referenced through the ingest. */
  collectHeld(hexes: ReadonlySet<string>, into: Set<string>): void;
  /** Its store tasks in flight: they may report blocks found on disk. */
  storeTasksInFlight(): Promise<unknown>[];
}

/** An ingest open this long is assumed leaked (never ended nor aborted) and no longer holds the fence. */
const LEAK_MS = 48 * 3600_000;

export class IngestFence {
  private nextId = 0;
  /** Ingests not yet settled: id → start time. */
  private readonly open = new Map<number, number>();
  /**
   * Settled ingests still inside the grace period (a resumable part records its blocks after its
   * ingest settles): per second of grace end, the earliest start. At most grace/1s + 1 entries.
   */
  private readonly settled = new Map<number, number>();
  private warnedLeak = false;
  /** Ingests whose blocks may still become referenced (until each lets go). */
  private readonly holders = new Set<FencedIngest>();

  constructor(
    private readonly graceMs: number,
    private readonly log: Logger,
  ) {}

  /** Follows one ingest from now until its end (published, failed or aborted) plus the grace. */
  track<T extends FencedIngest>(ingest: T): T {
    const id = this.nextId++;
    const start = Date.now();
    this.open.set(id, start);
    this.holders.add(ingest);
    ingest.onLetGo = () => this.holders.delete(ingest);
    ingest.onEnded = () => {
      if (!this.open.delete(id)) return;
      if (this.graceMs <= 0) return;
      const bucket = Math.ceil((Date.now() + this.graceMs) / 1000);
      const prev = this.settled.get(bucket);
      if (prev === undefined || start < prev) this.settled.set(bucket, start);
    };
    return ingest;
  }

  /** The digests among `hexes` that a live ingest still holds. */
  claimed(hexes: ReadonlySet<string>): Set<string> {
    const out = new Set<string>();
    for (const ingest of this.holders) ingest.collectHeld(hexes, out);
    return out;
  }

  /** Every store task in flight now: once they end, each block they found on disk is in its ingest's claims. */
  storeTasksInFlight(): Promise<unknown>[] {
    return [...this.holders].flatMap((ingest) => ingest.storeTasksInFlight());
  }

  /** Ingests whose blocks may still become referenced. */
  get holding(): number {
    return this.holders.size;
  }

  /** Ingests in flight (not settled). */
  get inFlight(): number {
    return this.open.size;
  }

  /**
   * The start of the oldest ingest that may still commit a reference to a block it deduplicated
   * (now when there is none): a block quarantined before this instant cannot be one of those.
   */
  oldestStart(now = Date.now()): number {
    let oldest = now;
    for (const [id, start] of this.open) {
      if (now - start > LEAK_MS) {
        if (!this.warnedLeak) this.log.warn('gc: an ingest open for more than 48 h is ignored by the purge fence', { startedAt: new Date(start).toISOString() });
        this.warnedLeak = true;
        this.open.delete(id);
        continue;
      }
      if (start < oldest) oldest = start;
    }
    for (const [bucket, start] of this.settled) {
      if (bucket * 1000 < now) this.settled.delete(bucket);
      else if (start < oldest) oldest = start;
    }
    return oldest;
  }
}
