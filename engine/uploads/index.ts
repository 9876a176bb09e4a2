// Resumable upload sessions: the sessions (Uploads) and the part protocol on the ingest core.
export { BufferPool, tailBufferPool } from './buffer-pool.js';
export { PartIngest, type PartOptions, type PartResult } from './part-ingest.js';
export { Uploads } from './uploads.js';
export type { AdmittedPart, CreateRequest, PartRequest, PartUpload } from './requests.js';
