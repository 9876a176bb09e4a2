// The collector of a backend whose garbage collection is not built yet (pg-s3: issue 19 goes
// on). Nothing is deleted: blocks that no manifest references stay in the bucket, which costs
// space and never loses data. A run is refused with 503 gc_unavailable, and the state says why.
import type { GcConfig } from '../config.js';
import { SvcError } from '../errors.js';
import type { Logger } from '../log.js';
import type { StoredBlock } from '../store/index.js';
import type { Collector } from './collector.js';
import type { GcReport, GcState } from './gc.js';
import type { FencedIngest } from './ingest-fence.js';

export class AbsentCollector implements Collector {
  /** Blocks failed ingests wrote and left for a later collector, since start. */
  private left = { blocks: 0, bytes: 0 };

  constructor(
    private readonly backend: string,
    private readonly config: GcConfig,
    private readonly log: Logger,
  ) {}

  track<T extends FencedIngest>(ingest: T): T {
    return ingest;
  }

  reclaim(blocks: StoredBlock[]): void {
    for (const b of blocks) {
      this.left.blocks++;
      this.left.bytes += b.size;
    }
    if (blocks.length) this.log.info('gc: blocks of a failed upload stay stored (no collector for this backend yet)', { backend: this.backend, blocks: blocks.length });
  }

  lastRun(): GcReport | undefined {
    return undefined;
  }

  quarantinedBlocks(): number {
    return 0;
  }

  state(): GcState {
    const { intervalMs, minAgeMs, quarantineAgeMs } = this.config;
    return { running: false, quarantinedBlocks: 0, config: { intervalMs, minAgeMs, quarantineAgeMs }, reclaimed: { blocks: 0, bytes: 0 } };
  }

  start(): void {}

  async stop(): Promise<void> {}

  run(): Promise<GcReport> {
    return Promise.reject(new SvcError(503, 'gc_unavailable', `Garbage collection of the ${this.backend} backend is not available yet; unreferenced blocks stay stored`));
  }
}
