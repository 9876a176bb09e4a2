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
export const storageFailure = (message = 'Storage operation failed') => new SvcError(500, 'storage_failure', message);
export const verificationFailure = () =>
  new SvcError(500, 'verification_failure', 'The persisted bytes of this blob could not be read and hashed');
export const ingestFailed = (message = 'The block store could not complete the write') =>
  new SvcError(500, 'ingest_failed', message);
