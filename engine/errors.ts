/** A failure with a client-facing status, code and message. Anything else is internal. */
export class SvcError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'SvcError';
  }
}

export const invalidBlobId = (message: string) => new SvcError(400, 'invalid_blob_id', message);
export const invalidBlob = (message: string) => new SvcError(400, 'invalid_blob', message);
export const invalidPagination = (message: string) => new SvcError(400, 'invalid_pagination', message);
export const blobNotFound = (id: string) => new SvcError(404, 'blob_not_found', `No blob ${id}`);
export const payloadTooLarge = (limit: number) =>
  new SvcError(413, 'payload_too_large', `Upload exceeds the configured maximum of ${limit} bytes`);
export const tenantObjectLimit = (limit: number) =>
  new SvcError(413, 'tenant_object_limit_exceeded', `The object exceeds the tenant's limit of ${limit} bytes`);
export const tenantQuotaExceeded = (what = 'Publishing this blob') =>
  new SvcError(507, 'tenant_storage_quota_exceeded', `${what} would exceed the tenant's retained-byte quota`);
export const storageFailure = (message = 'Storage operation failed') => new SvcError(500, 'storage_failure', message);
export const verificationFailure = () =>
  new SvcError(500, 'verification_failure', 'The persisted bytes of this blob could not be read and hashed');
export const ingestFailed = (message = 'The block store could not complete the write') =>
  new SvcError(500, 'ingest_failed', message);
export const blockStoreUnavailable = () =>
  new SvcError(503, 'block_store_unavailable', 'The block store (S3) is not answering; retry once it is back', { 'Retry-After': '5' });

/** Whether a block store's failure says the store cannot be reached (refused, reset, timed out, 503): a 503, not a 500. */
export function isUnreachable(err: unknown): boolean {
  const text = typeof err === 'string' ? err : `${(err as { code?: string })?.code ?? ''} ${(err as Error)?.message ?? ''} ${(err as { name?: string })?.name ?? ''}`;
  return /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EPIPE|socket hang up|ServiceUnavailable|SlowDown|TimeoutError/.test(text);
}

export const invalidUpload = (message: string) => new SvcError(400, 'invalid_upload', message);
export const uploadNotFound = (id: string) => new SvcError(404, 'upload_not_found', `No upload session ${id}`);
export const uploadExists = (id: string) => new SvcError(409, 'upload_exists', `Upload session ${id} already exists; read its checkpoint with GET /api/v1/uploads/${id}`);
export const uploadOffsetMismatch = (offset: number) =>
  new SvcError(409, 'upload_offset_mismatch', `The part does not start at the committed offset ${offset}`, { 'Upload-Offset': String(offset) });
export const uploadBusy = (what: string) => new SvcError(409, 'upload_busy', `Another ${what} holds this upload session; retry later`);
export const uploadState = (state: string, action: string) => new SvcError(409, 'upload_state', `The upload session is ${state}: cannot ${action}`);
export const uploadExpired = (id: string) => new SvcError(410, 'upload_expired', `Upload session ${id} has expired`);
