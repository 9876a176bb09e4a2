// Ingests: where every ingest of the node starts, a blob namespace's body through the tenant gate.
export { type BlobBody, Ingests, type IngestsDeps } from './ingests.js';
