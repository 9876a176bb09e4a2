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

import type { DirectIngest } from '../cas/ingest.js';
import type { Logger } from '../log.js';

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
  private readonly holders = new Set<DirectIngest>();

  constructor(
    private readonly graceMs: number,
    private readonly log: Logger,
  ) {}

  /** Follows one ingest from now until its end (published, failed or aborted) plus the grace. */
  track<T extends DirectIngest>(ingest: T): T {
    const id = this.nextId++;
    const start = Date.now();
    this.open.set(id, start);
    this.holders.add(ingest);
    ingest.onLetGo = () => this.holders.delete(ingest);
    const settle = () => {
      if (!this.open.delete(id)) return;
      if (this.graceMs <= 0) return;
      const bucket = Math.ceil((Date.now() + this.graceMs) / 1000);
      const prev = this.settled.get(bucket);
      if (prev === undefined || start < prev) this.settled.set(bucket, start);
    };
    const wrap = <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
      (...args: A): Promise<R> => {
        let result: Promise<R>;
        try {
          result = fn(...args);
        } catch (err) {
          settle();
          throw err;
        }
        result.then(settle, settle);
        return result;
      };
    const target = ingest as unknown as Record<'end' | 'endPart' | 'endUnlisted', (...a: unknown[]) => Promise<unknown>> & { abort: () => void };
    for (const name of ['end', 'endPart', 'endUnlisted'] as const) target[name] = wrap(target[name].bind(ingest));
    const abort = target.abort.bind(ingest);
    target.abort = () => {
      settle();
      abort();
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
