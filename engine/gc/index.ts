// Garbage collection of blocks: runs (mark, quarantine, purge), the reclaim of failed uploads'
// blocks, and the fence ingests report to.
export { GC_PHASES, GarbageCollector, type GcPhase, type GcReport } from './gc.js';
export type { FencedIngest } from './ingest-fence.js';
