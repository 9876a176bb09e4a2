// The blob engine's API: content ids and cursors, the ingests, the read path, the in-order
// scanning thread and the memory every transfer shares. Worker task modules import their task
// files directly (block-task.ts), so a worker loads only what it runs.
export type { BlockRoots } from '../base/block-roots.js';
export { type ChunkerSpec, chunkerName } from './chunkers.js';
export { type ContentId, formatContentId, parseContentId, parseContentIdSegment } from '../base/content-id.js';
export { parseLimit } from './cursors.js';
export { DirectIngest, type IngestOptions, type MeasuredIngest } from './direct-ingest.js';
export { type Decision, Ingest, type IngestDeps, largestBlockBytes } from './ingest.js';
export { IllegalIngestMove, type IngestStage, moveIngest } from './ingest-lifecycle.js';
export { localStores } from './local-stores.js';
export type { VerifyTask, VerifyTaskResult } from './protocol.js';
export { pushAll } from './push-all.js';
export { BlobReader } from './reader.js';
export { loadSha256Pair, sha256PairUnavailableReason } from './sha256-pair.js';
export { copyInto, nativeSharedCopy } from './shared-copy.js';
export { StreamScanner } from './stream-scanner.js';
export { TransferMemory } from './transfer-memory.js';
