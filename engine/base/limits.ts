// The bounds a client or an operator meets that are not configuration (those are in
// engine/base/config.ts, one SVC_* variable each): sizes, counts and times fixed by the contract or
// chosen here, each with its reason. Tuning constants that no caller sees (batch sizes of internal
// loops, poll intervals) stay named beside the code they tune.

const KiB = 1024;
const MiB = 1024 * KiB;

// ---- lists ----
/** `limit` of every list and search: default 100, at most 1000 (contract, "Pagination"). */
export const PAGE_DEFAULT = 100;
export const PAGE_MAX = 1000;
/**
 * A `cursor` (contract: opaque, 1..16384 characters): longer is refused before it is decoded.
 * What a cursor seals (engine/auth/cursor-seal.ts) is one position, far below this.
 */
export const CURSOR_MAX_CHARS = 16384;

// ---- the document platform ----
/** A patch request: at most 100 operations and 64 KiB of body (contract: 413 patch_too_large). */
export const PATCH_MAX_OPS = 100;
export const PATCH_MAX_BYTES = 64 * KiB;
/** Operations of one transform (forward or inverse) of a registered migration. */
export const MIGRATION_MAX_OPS = 1000;
/** Namespaces in one metadata bundle: a write names a few; 64 keeps one request's validation short. */
export const BUNDLE_MAX_NAMESPACES = 64;
/** externalRefs of a document, labels of a version (each 1-64 of [A-Za-z0-9._:-]): keys of list indexes, kept small. */
export const EXTERNAL_REFS_MAX = 100;
export const LABELS_MAX = 50;
export const LABEL_MAX_CHARS = 64;
/** Pointers ANDed in one search: each is a point read per candidate. */
export const SEARCH_MAX_POINTERS = 16;
/**
 * Scalars indexed per metadata entry: a write costs at most this many index keys; an entry with
 * more is read and checked by the searches of its namespace instead (engine/documents/metadata-index.ts).
 */
export const INDEX_MAX_LEAVES = 1024;
/** Failures a bulk migration's outputs list (all are counted). */
export const BULK_FAILURES_LISTED = 100;
/** `?wait=` of GET /v1/jobs/{id}: a long poll shorter than common proxies' idle timeouts. */
export const JOB_WAIT_MAX_S = 30;
/** POST /dev/token's body: a handful of claims. */
export const DEV_TOKEN_BODY_BYTES = 64 * KiB;
/**
 * The development secret with security on: at least 32 bytes (HS256's key is the hash's size; a
 * shorter secret can be guessed offline from one token). Shorter refuses the start.
 */
export const DEV_SECRET_MIN_BYTES = 32;
/** A development token lives at most a week (`ttl_seconds`). */
export const DEV_TOKEN_MAX_TTL_S = 7 * 24 * 3600;

// ---- legacy repositories ----
/** A legacy document id: a file name in the repository, within every file system's name limit. */
export const LEGACY_DOC_ID_MAX_BYTES = 200;
/** A legacy XML metadata file is read whole to parse it: larger ones are refused (422). */
export const LEGACY_METADATA_MAX_BYTES = 4 * MiB;

// ---- views ----
/** A rendered page for OCR: 36 megapixels (a page at 600 dpi) bounds one worker's memory. */
export const OCR_MAX_RENDER_PIXELS = 36_000_000;
/** Pages of a TIFF read for OCR. */
export const TIFF_MAX_PAGES = 10_000;

// ---- the HTTP edge ----
/** A model request's URI with its query (a row set may ride in it). */
export const MODEL_URI_MAX_BYTES = 64 * KiB;
/** The answer of a session's owner to a forwarded request: a small JSON envelope. */
export const FORWARDED_ANSWER_MAX_BYTES = 1 * MiB;
/**
 * Partial uploads one tus final upload may name: the header that lists them is bounded by the
 * HTTP parser's header limit anyway, and clients split an upload into a handful.
 */
export const TUS_MAX_PARTIALS = 64;

// ---- names a request carries ----
/**
 * A URN a request names (a namespace, a schema, a workflow): RFC 8141 syntax and at most this
 * many characters, checked at the edge before it reaches any check or cache (engine/base/urn.ts).
 * The longest URN svc itself accepts is 150 characters (urn:svc:schema:<128>@<semver>).
 */
export const URN_MAX_CHARS = 256;

// ---- idempotency keys (engine/idempotency) ----
/** An Idempotency-Key: 1 to this many printable ASCII characters (the draft's sf-string), else 400. */
export const IDEMPOTENCY_KEY_MAX_CHARS = 255;
/**
 * A kept answer (status, headers, body) is at most this many bytes: a create's answer is a few
 * hundred bytes; a bigger one is not kept (the creation fails whole, 500, rather than be kept in part).
 */
export const IDEMPOTENCY_ANSWER_MAX_BYTES = 64 * KiB;
/**
 * How long a request holds its key while it runs (409 idempotency_key_in_progress for a repeat
 * meanwhile). A JSON create takes milliseconds; a holder that died frees its key after this.
 */
export const IDEMPOTENCY_CLAIM_MS = 60_000;
/** Expired keys removed per unit of a sweep, and units per sweep: bounded work each period. */
export const IDEMPOTENCY_SWEEP_BATCH = 200;
export const IDEMPOTENCY_SWEEP_UNITS = 10;

// ---- a cluster's clock ----
/**
 * How far (ms) a node's own clock may stray from the cluster's reference clock (PostgreSQL's, on
 * pg-s3) before readiness says `degraded` naming the offset (decisions §5). Leases, retries and
 * expiry are judged by the reference clock whatever the offset; past this an operator should
 * repair the node's time sync (its logs' and tokens' times are off).
 */
export const CLOCK_SKEW_WARN_MS = 5000;

// ---- PostgreSQL connections (engine/store/pg/pool.ts) ----
/** TCP keepalive of every connection to PostgreSQL: the first probe after this long idle. */
export const PG_KEEPALIVE_IDLE_MS = 10_000;
/** A connection to PostgreSQL that is not open within this is given up (503 catalog_unavailable). */
export const PG_CONNECT_TIMEOUT_MS = 10_000;
/**
 * The client gives up on a statement this long after the server's statement timeout
 * (SVC_PG_STATEMENT_TIMEOUT) would have cancelled it: a paused or unreachable server, whose
 * cancellation never comes. The connection is then closed, not reused.
 */
export const PG_QUERY_TIMEOUT_MARGIN_MS = 5_000;
/**
 * A LISTEN connection sends itself a ping notification this often (through the pool) and must hear
 * it within PG_LISTEN_PING_BOUND_MS: one that does not is half-open or falling behind, and is
 * closed and opened again.
 */
export const PG_LISTEN_PING_MS = 5_000;
export const PG_LISTEN_PING_BOUND_MS = 15_000;
/** Readiness fails when PostgreSQL's notification queue is fuller than this (its commits that notify fail once it is full). */
export const PG_NOTIFY_QUEUE_MAX_USAGE = 0.5;

// ---- The S3-compatible API (decisions §5 "S3-compatible API") ----
// ---- SigV4 ----
/** A request's date may be this far from the server's clock (S3: 15 minutes, then 403 RequestTimeTooSkewed). */
export const S3_MAX_CLOCK_SKEW_MS = 15 * 60_000;
/** A presigned URL lives at most a week (S3: `X-Amz-Expires` of 1 to 604800 seconds). */
export const S3_PRESIGN_MAX_EXPIRES_S = 7 * 24 * 3600;
/** Signing keys (an HMAC chain of four) remembered, per access key, date, region and service. */
export const S3_SIGNING_KEYS_CACHED = 1024;
/** Authorization headers (all but their signature) remembered parsed: a client's requests repeat one. */
export const S3_AUTHORIZATIONS_CACHED = 1024;
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
/**
 * How long a released blob's tombstone is kept in the S3 index (engine/s3/blob-refs.ts): a
 * PutObject or Complete whose publication is older than this when its object is written is
 * answered 503 SlowDown and sends its body again (its publication may predate a release whose
 * tombstone is gone). An hour: far above any publication-to-write interval.
 */
export const S3_RELEASE_TOMBSTONE_MS = 60 * 60_000;
/** Multipart uploads read at a time by the expiry cleanup (a page read, then its expired ones aborted). */
export const S3_UPLOAD_CLEANUP_PAGE = 100;
/** Keys one DeleteObjects may name (S3: 1,000; 400 MalformedXML beyond). */
export const S3_MAX_DELETE_KEYS = 1000;
/** An object key: at most 1024 bytes of UTF-8 (S3: KeyTooLongError beyond). */
export const S3_KEY_MAX_BYTES = 1024;
/** Buckets one tenant may own (S3: 10,000 per account; names here are one namespace for every tenant, so fewer: ListBuckets answers them in one bounded read). Beyond: 400 TooManyBuckets. */
export const S3_MAX_BUCKETS_PER_TENANT = 1000;
/** An object's user metadata (`x-amz-meta-*`): names and values, UTF-8 bytes summed (S3: 2 KiB, then 400 MetadataTooLarge). */
export const S3_USER_METADATA_MAX_BYTES = 2 * KiB;
/** Control characters (U+0000-U+001F) in one key: each takes two bytes in the index's key, which LMDB bounds (svc's own bound, beyond: KeyTooLongError). */
export const S3_KEY_MAX_CONTROL_CHARS = 512;
/** Parts but the last of a multipart upload are at least this large (S3: 5 MiB, then 400 EntityTooSmall at Complete). */
export const S3_MIN_PART_BYTES = 5 * MiB;

/**
 * How long a node keeps a schema's lifecycle it read (engine/documents/schemas.ts) when no change
 * is announced: a bound on staleness should a notification be lost.
 */
export const SCHEMA_LIFECYCLE_CACHE_MS = 5_000;
/**
 * Document versions a pg-s3 node keeps as read or written (engine/documents/records.ts): a version
 * never changes once added, so a write's read of the current version is no round trip when the
 * node has it. At most this many, of at most DOC_VERSIONS_CACHED_BYTES together (their metadata's
 * JSON), none over 1/64 of that (a larger one is read each time). LMDB's reads cost nothing: fs
 * and s3 nodes keep none.
 */
export const DOC_VERSIONS_CACHED = 2048;
export const DOC_VERSIONS_CACHED_BYTES = 32 * 1024 * 1024;

/**
 * Uploads whose document a pg-s3 node keeps (the upload id and the document id, ~150 bytes each:
 * ~2.5 MiB): an upload's document never changes, so the bytes' PUT and the finalize read the
 * upload and its document in one statement (engine/documents/records.ts).
 */
export const DOC_UPLOADS_CACHED = 16_384;

/**
 * Records of remembered tables (engine/store/unit-store.ts: documents) a pg-s3 node keeps as it
 * last read or committed them, at most this many and this many bytes (their msgpack bytes; none
 * over 1/64 of it): a unit's first read of one is no round trip.
 */
export const UNIT_ROWS_REMEMBERED = 8192;
export const UNIT_ROWS_REMEMBERED_BYTES = 16 * 1024 * 1024;

/**
 * Records of cached tables (engine/store/unit-store.ts: S3 objects and buckets) an fs or s3 node
 * keeps decoded, most recently read last: a 4 KiB GetObject's record is no LMDB read and no
 * msgpack decode. An object's record is at most ~4 KiB decoded (a 1 KiB key's slot, 2 KiB of
 * user metadata), so at most ~32 MiB.
 */
export const UNIT_RECORDS_CACHED = 8192;

// ---- not-found answers ----
/**
 * A 404's "did you mean" hint (server/route-hint.ts): paths longer than this get none (the work
 * per request stays bounded by it times the route table), and a route is named only when at most
 * this many edits away (fewer for short routes: a quarter of the route's fixed characters, at least one).
 */
export const ROUTE_HINT_MAX_PATH_CHARS = 160;
export const ROUTE_HINT_MAX_EDITS = 3;

/**
 * The request line and headers of one HTTP request, on every listener (uWebSockets.js's
 * UWS_HTTP_MAX_HEADERS_SIZE, whose own default is 4 KiB; an operator's value in the environment
 * wins). S3 allows 8 KB of request headers (2 KB of them user metadata) beside a URL whose key
 * alone may take 3 KiB percent-encoded: a valid PutObject with the longest key and the most
 * metadata needs more than 4 KiB. Node's own HTTP server allows 16 KiB too. Beyond it: 431.
 */
export const HTTP_MAX_HEADER_BYTES = 16 * KiB;

/** What a block PUT reads of an S3 server's error answer to name the failure (S3's error documents are a few hundred bytes; the rest is dropped). */
export const S3_ERROR_ANSWER_MAX_BYTES = 64 * KiB;
/**
 * The default of SVC_S3_TIMEOUT (engine/base/config.ts), for stores opened by tools and tests: a
 * request to the S3 backend idle this long is given up, so a paused server holds no request forever.
 */
export const S3_DEFAULT_IDLE_TIMEOUT_MS = 30_000;

/**
 * Store tasks of a remote block store (S3) on the main thread (engine/cas/local-stores.ts): one of
 * at most this many bytes always runs there (the hop to a worker costs more than its PUT); a
 * larger one while the main thread's event loop was busy less than LOCAL_STORE_BUSY_FRACTION of
 * the last LOCAL_STORE_LOAD_WINDOW_MS, else on a worker.
 */
export const LOCAL_STORE_TASK_MAX_BYTES = 256 * KiB;
export const LOCAL_STORE_BUSY_FRACTION = 0.5;
export const LOCAL_STORE_LOAD_WINDOW_MS = 200;
