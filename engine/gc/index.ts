// Garbage collection of blocks: runs (mark, quarantine, purge), the reclaim of failed uploads'
// blocks, and the fence ingests report to.
export { GarbageCollector } from './gc.js';
export { GC_PHASES, type GcAgeOverrides, type GcPhase, type GcReport, type GcState } from './report.js';
export type { Collector } from './collector.js';
export { type CollectorOptions, collectorFor } from './collector-for.js';
export type { FencedIngest } from './ingest-fence.js';
export { SharedCollector } from './shared-collector.js';
