/**
 * What kind of failure a client is told of. The engine names the kind; server/ alone turns it
 * into an HTTP status and headers (server/failure-status.ts).
 */
export type FailureKind =
  | 'invalid'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'not_acceptable'
  | 'conflict'
  | 'gone'
  | 'timed_out'
  | 'precondition_failed'
  | 'too_large'
  | 'unsupported_media_type'
  | 'range_not_satisfiable'
  | 'unprocessable'
  | 'too_many_requests'
  | 'checksum_mismatch'
  | 'internal'
  | 'unavailable'
  | 'insufficient_storage';

/** Facts a failure carries for the client beside its message (the server turns them into headers). */
export interface FailureDetails {
  /** When to try again, in seconds. */
  retryAfterSeconds?: number;
  /** A resumable upload's committed offset. */
  uploadOffset?: number;
  /** The methods a path has (method_not_allowed). */
  allow?: string;
  /** The protocol versions the server speaks (a request naming another). */
  supportedVersions?: string;
  /** A tenant's limits as a refusal met them (the error envelope's fields of the same names). */
  quotaBytes?: number;
  retainedBytes?: number;
  /** What the tenant's open uploads reserve (their declared lengths, else the bytes they received). */
  stagedBytes?: number;
  maxObjectBytes?: number;
}

/** A failure the client is told of: its kind, snake_case code and message. Anything else is internal. */
export class SvcError extends Error {
  constructor(
    readonly kind: FailureKind,
    readonly code: string,
    message: string,
    readonly details: FailureDetails = {},
  ) {
    super(message);
    this.name = 'SvcError';
  }

  /** Whether a retry later may succeed where this failed (the service's side, or a limit that frees up). */
  get transient(): boolean {
    return this.kind === 'internal' || this.kind === 'unavailable' || this.kind === 'too_many_requests';
  }
}

export const invalidBlobId = (message: string) => new SvcError('invalid', 'invalid_blob_id', message);
export const invalidBlob = (message: string) => new SvcError('invalid', 'invalid_blob', message);
export const invalidPagination = (message: string) => new SvcError('invalid', 'invalid_pagination', message);
/** A cursor this server did not give to this caller for this query, or one altered since (engine/auth/cursor-seal.ts). */
export const invalidCursor = (message = 'The cursor is not one this list gave to this caller for this query (cursors are opaque: pass nextCursor back unchanged)') =>
  new SvcError('invalid', 'invalid_cursor', message);
export const blobNotFound = (id: string) => new SvcError('not_found', 'blob_not_found', `No blob ${id}`);
/** DELETE /api/v1/blobs/{id} of a blob the tenant's S3 objects name (their bytes: delete them first). */
export const blobInUse = (id: string, objects: number) =>
  new SvcError('conflict', 'blob_in_use', `Blob ${id} is the content of ${objects} S3 object${objects === 1 ? '' : 's'} of this tenant; delete the S3 objects first`);
export const payloadTooLarge = (limit: number) =>
  new SvcError('too_large', 'payload_too_large', `Upload exceeds the configured maximum of ${limit} bytes`);
export const tenantObjectLimit = (limit: number) =>
  new SvcError('too_large', 'tenant_object_limit_exceeded', `The object exceeds the tenant's limit of ${limit} bytes (maxObjectBytes ${limit})`, { maxObjectBytes: limit });
/**
 * 507: storing `size` more bytes (when known) would take the tenant's retained bytes past its
 * quota. The numbers are the whole tenant's: blobs and document content together, and the bytes
 * its open uploads reserve (`stagedBytes`, told only when there are some).
 */
export const tenantQuotaExceeded = (facts: { quotaBytes: number; retainedBytes: number; stagedBytes?: number; size?: number }, what = 'Publishing this blob') => {
  const { quotaBytes, retainedBytes, size } = facts;
  const staged = facts.stagedBytes ?? 0;
  const more = size === undefined ? '' : ` ${size} more bytes`;
  const held = staged > 0 ? `${retainedBytes} retained and ${staged} reserved by open uploads` : `${retainedBytes} retained`;
  return new SvcError(
    'insufficient_storage',
    'tenant_storage_quota_exceeded',
    `${what} would take the tenant past its retained-byte quota:${more} on ${held} of a quota of ${quotaBytes} bytes (${Math.max(0, quotaBytes - retainedBytes - staged)} left)`,
    staged > 0 ? { quotaBytes, retainedBytes, stagedBytes: staged } : { quotaBytes, retainedBytes },
  );
};
/**
 * The refusal of a blob publication, told the tenant's blob bytes by the catalog: `room` is the
 * quota less `documentBytes` and `stagedBytes` (what the catalog checks against), so the whole
 * tenant's numbers are put back together here.
 */
export const blobQuotaExceeded = (room: number, documentBytes: number, size: number, stagedBytes = 0) => (blobBytes: number) =>
  tenantQuotaExceeded({ quotaBytes: room + documentBytes + stagedBytes, retainedBytes: blobBytes + documentBytes, stagedBytes, size });
export const storageFailure = (message = 'Storage operation failed') => new SvcError('internal', 'storage_failure', message);
export const verificationFailure = () =>
  new SvcError('internal', 'verification_failure', 'The persisted bytes of this blob could not be read and hashed');
export const ingestFailed = (message = 'The block store could not complete the write') =>
  new SvcError('internal', 'ingest_failed', message);
export const blockStoreUnavailable = () =>
  new SvcError('unavailable', 'block_store_unavailable', 'The block store (S3) is not answering; retry once it is back', { retryAfterSeconds: 5 });

/** Whether a block store's failure says the store cannot be reached (refused, reset, timed out, 503): a 503, not a 500. */
export function isUnreachable(err: unknown): boolean {
  const text = typeof err === 'string' ? err : `${(err as { code?: string })?.code ?? ''} ${(err as Error)?.message ?? ''} ${(err as { name?: string })?.name ?? ''}`;
  return /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EPIPE|socket hang up|ServiceUnavailable|SlowDown|TimeoutError/.test(text);
}

export const invalidUpload = (message: string) => new SvcError('invalid', 'invalid_upload', message);
export const uploadNotFound = (id: string) => new SvcError('not_found', 'upload_not_found', `No upload session ${id}`);
export const uploadExists = (id: string) => new SvcError('conflict', 'upload_exists', `Upload session ${id} already exists; read its checkpoint with GET /api/v1/uploads/${id}`);
export const uploadOffsetMismatch = (offset: number) =>
  new SvcError('conflict', 'upload_offset_mismatch', `The part does not start at the committed offset ${offset}`, { uploadOffset: offset });
export const uploadBusy = (what: string) => new SvcError('conflict', 'upload_busy', `Another ${what} holds this upload session; retry later`);
export const uploadState = (state: string, action: string) => new SvcError('conflict', 'upload_state', `The upload session is ${state}: cannot ${action}`);
export const uploadExpired = (id: string) => new SvcError('gone', 'upload_expired', `Upload session ${id} has expired`);
