// The S3-compatible API's bounds that are not configuration (decisions §5 "S3-compatible API"),
// each with its reason. Kept beside limits.ts, in a file of their own, while the S3 listener is
// being built (issue 39).

const KiB = 1024;

// ---- SigV4 ----
/** A request's date may be this far from the server's clock (S3: 15 minutes, then 403 RequestTimeTooSkewed). */
export const S3_MAX_CLOCK_SKEW_MS = 15 * 60_000;
/** A presigned URL lives at most a week (S3: `X-Amz-Expires` of 1 to 604800 seconds). */
export const S3_PRESIGN_MAX_EXPIRES_S = 7 * 24 * 3600;
/** Signing keys (an HMAC chain of four) remembered, per access key, date, region and service. */
export const S3_SIGNING_KEYS_CACHED = 1024;
/** Headers one signature may name: more is refused before anything is hashed. */
export const S3_MAX_SIGNED_HEADERS = 64;
/** Query parameters one request may carry (S3 operations use a handful). */
export const S3_MAX_QUERY_PARAMS = 64;

// ---- aws-chunked bodies ----
/**
 * A chunk header line (`<hex size>;chunk-signature=<64 hex>`), a trailer line (`x-amz-checksum-
 * crc64nvme:<base64>`): a few dozen bytes each; longer is malformed framing, refused before it is
 * buffered.
 */
export const S3_CHUNK_LINE_MAX_BYTES = 1 * KiB;
/** Trailer lines after the last chunk: a checksum and its signature, with room to spare. */
export const S3_MAX_TRAILERS = 8;

// ---- keys file ----
/** A secret access key: at least 32 characters (an HMAC key guessed offline from one signature otherwise), at most 256. */
export const S3_SECRET_MIN_CHARS = 32;
export const S3_SECRET_MAX_CHARS = 256;
/** Keys one SVC_S3_KEYS_FILE may hold. */
export const S3_MAX_KEYS = 10_000;

// ---- XML request bodies ----
/** CompleteMultipartUpload and DeleteObjects bodies (S3: 10,000 parts, 1,000 keys) are read whole, up to this size. */
export const S3_XML_BODY_MAX_BYTES = 2 * 1024 * KiB;
/** Parts one CompleteMultipartUpload may list (S3: 10,000; 400 InvalidRequest beyond). */
export const S3_MAX_PARTS = 10_000;
/** Keys one DeleteObjects may name (S3: 1,000; 400 MalformedXML beyond). */
export const S3_MAX_DELETE_KEYS = 1000;
/** An object key: at most 1024 bytes of UTF-8 (S3: KeyTooLongError beyond). */
export const S3_KEY_MAX_BYTES = 1024;
