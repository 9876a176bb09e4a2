// Idempotency keys of creating requests (docs/documents.md, "Idempotency-Key").
export { type Begun, type Claim, type IdempotencyScope, IdempotencyKeys, type InUnit, checkIdempotencyKey, idempotencyKeyInProgress, idempotencyKeyReused } from './idempotency.js';
