// What the engine and the server ask of garbage collection, whichever backend collects: the
// embedded collector (./gc.ts: block files and LMDB in one process) implements it today.
import type { StoredBlock } from '../store/index.js';
import type { GcAgeOverrides, GcPhase, GcReport, GcState } from './report.js';
import type { FencedIngest } from './ingest-fence.js';

export interface Collector {
  /** Wraps an ingest so that purge knows while it may still reference blocks it found stored. */
  track<T extends FencedIngest>(ingest: T): T;
  /** Takes the blocks a failed or aborted ingest wrote. */
  reclaim(blocks: StoredBlock[]): void;
  /** The last finished run, for the ops snapshot. */
  lastRun(): GcReport | undefined;
  quarantinedBlocks(): number;
  state(): GcState;
  /**
   * This node is about to keep a reference to blocks in its data directory (document content, a
   * view, a resumable part in its own ledger). With a shared catalog it becomes a known root
   * holder first, so that runs on other nodes wait for its marks even while it is down; resolves
   * at once once it is (and always with an embedded catalog).
   */
  holdRoots(): Promise<void>;
  /** This node now listens at its address: tell the other nodes at once (shared catalogs). */
  announce(): void;
  /** Starts the schedule (SVC_GC_INTERVAL). */
  start(): void;
  stop(): Promise<void>;
  /** One run; dry unless `apply`. */
  run(phase: GcPhase, apply: boolean, trigger?: 'api' | 'schedule', ages?: GcAgeOverrides): Promise<GcReport>;
}
