// Garbage collection of blocks: runs (mark, quarantine, purge), the reclaim of failed uploads'
// blocks, and the fence ingests report to.
export { GC_PHASES, GarbageCollector, type GcAgeOverrides, type GcPhase, type GcReport, type GcState } from './gc.js';
export type { Collector } from './collector.js';
export type { FencedIngest } from './ingest-fence.js';
export { SharedCollector } from './shared-collector.js';
