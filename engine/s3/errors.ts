// The refusals of the S3 index (buckets, objects, multipart records) as SvcErrors: the engine
// knows no HTTP, so each is a FailureKind and a snake_case code that is S3's own code spelled in
// snake case (BucketAlreadyExists ↔ 'bucket_already_exists'). The S3 listener turns a code back
// into S3's with `s3CodeOf` and answers S3's status for it (server/s3/s3-error.ts S3_STATUS);
// FailureKind keeps the error meaningful to anything else that meets it. Chosen over a code
// carried in the details: FailureDetails is the blob API's envelope, and a code is what a caller
// branches on already.

import { SvcError } from '../base/errors.js';

/** S3's codes the index refuses with (its "List of error codes"). */
export type S3IndexCode =
  | 'AccessDenied'
  | 'BadDigest'
  | 'BucketAlreadyExists'
  | 'BucketAlreadyOwnedByYou'
  | 'BucketNotEmpty'
  | 'EntityTooSmall'
  | 'InvalidArgument'
  | 'InvalidBucketName'
  | 'InvalidPart'
  | 'InvalidPartOrder'
  | 'InvalidRange'
  | 'InvalidRequest'
  | 'KeyTooLongError'
  | 'MalformedXML'
  | 'MetadataTooLarge'
  | 'NoSuchBucket'
  | 'NoSuchKey'
  | 'NoSuchUpload'
  | 'PreconditionFailed'
  | 'TooManyBuckets'
  | 'XAmzContentSHA256Mismatch';

const snake = (code: string) => code.replace(/(?<=[a-z])(?=[A-Z])/g, '_').toLowerCase();

const KIND: Record<S3IndexCode, SvcError['kind']> = {
  AccessDenied: 'forbidden',
  BadDigest: 'invalid',
  BucketAlreadyExists: 'conflict',
  BucketAlreadyOwnedByYou: 'conflict',
  BucketNotEmpty: 'conflict',
  EntityTooSmall: 'invalid',
  InvalidArgument: 'invalid',
  InvalidBucketName: 'invalid',
  InvalidPart: 'invalid',
  InvalidPartOrder: 'invalid',
  InvalidRange: 'range_not_satisfiable',
  InvalidRequest: 'invalid',
  KeyTooLongError: 'invalid',
  MalformedXML: 'invalid',
  MetadataTooLarge: 'invalid',
  NoSuchBucket: 'not_found',
  NoSuchKey: 'not_found',
  NoSuchUpload: 'not_found',
  PreconditionFailed: 'precondition_failed',
  TooManyBuckets: 'invalid',
  XAmzContentSHA256Mismatch: 'invalid',
};

const BY_SNAKE = new Map<string, S3IndexCode>((Object.keys(KIND) as S3IndexCode[]).map((c) => [snake(c), c]));

/** The refusal `code` (S3's), with S3's wording or one of ours. */
export const s3Refusal = (code: S3IndexCode, message: string) => new SvcError(KIND[code], snake(code), message);

/** S3's code of an index refusal (undefined: not one of the index's). */
export function s3CodeOf(err: unknown): S3IndexCode | undefined {
  return err instanceof SvcError ? BY_SNAKE.get(err.code) : undefined;
}

export const noSuchBucket = (bucket: string) => s3Refusal('NoSuchBucket', `The specified bucket does not exist: ${bucket}`);
export const accessDenied = () => s3Refusal('AccessDenied', 'Access Denied');
export const noSuchKey = () => s3Refusal('NoSuchKey', 'The specified key does not exist.');
export const noSuchUpload = () =>
  s3Refusal('NoSuchUpload', 'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.');
export const preconditionFailed = () => s3Refusal('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');

/**
 * Not S3's: a blob the tenant's objects stopped naming is being released from the blob catalog
 * (engine/s3/blob-refs.ts) while a write names it again. The wiring publishes the blob again and
 * runs the write again; a client never sees it unless that keeps failing (then a 503).
 */
export const blobReleasing = (blobId: string) =>
  new SvcError('unavailable', 's3_blob_releasing', `Blob ${blobId} is being released; retry the write once it is published again`, { retryAfterSeconds: 1 });
export const isBlobReleasing = (err: unknown): boolean => err instanceof SvcError && err.code === 's3_blob_releasing';
