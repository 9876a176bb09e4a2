import os from 'node:os';
import path from 'node:path';
import { ConfigError } from './config-error.js';
import { S3_DEFAULT_IDLE_TIMEOUT_MS } from './limits.js';
import { type ObjectRoot, parseModelRoots } from './model-roots.js';

/** Every SVC_* variable: name, default, meaning. `svc --help` prints this table. */

/** SVC_MIN_FREE_SPACE: a number of bytes, or a share of the file system (engine/store/disk-space.ts applies it). */
export type FreeSpaceFloor = { bytes: number } | { percent: number };

export const VARIABLES: ReadonlyArray<{ name: string; default: string; help: string }> = [
  { name: 'SVC_HOST', default: '127.0.0.1', help: 'Address the HTTP listener binds.' },
  { name: 'SVC_HTTP_PORT', default: '8081', help: 'Port of the blob API listener (0 = pick a free port).' },
  { name: 'SVC_HTTP_LINGER_BYTES', default: '64MiB', help: 'After an answer given before the request body ended (an error), the rest of the body is read and dropped when it is at most this size, so clients that read only after sending get the answer; a larger or chunked rest is not read and the connection closes.' },
  { name: 'SVC_BLOB_BACKEND', default: 'fs', help: 'Where blobs live: `fs` (block files and LMDB under SVC_FS_ROOT), `pg-s3` (the blob catalog in PostgreSQL at SVC_PG_URL, block bytes in the S3 bucket SVC_S3_BUCKET) or `s3` (everything in the bucket SVC_S3_BUCKET: manifests, inventory, per-tenant ledgers and block bytes; several nodes only on a server that honours If-None-Match and If-Match). Every way SVC_FS_ROOT keeps what is local to the node (upload spills; with fs resumable sessions, with fs and s3 documents and jobs).' },
  { name: 'SVC_PG_URL', default: '', help: 'PostgreSQL of the pg-s3 backend: `postgres://user:pass@host:port/db`. svc creates and migrates its tables itself.' },
  { name: 'SVC_PG_POOL', default: '10', help: 'Connections to PostgreSQL per svc process.' },
  { name: 'SVC_PG_STATEMENT_TIMEOUT', default: '30s', help: 'PostgreSQL cancels a statement of svc that runs longer, and ends a transaction left idle as long; svc gives up 5 s later on a server that does not answer at all (a paused PostgreSQL, a connection cut without a reset). The request is then answered 503 `catalog_unavailable`. Migrations and `svc catalog rebuild` are not bounded. Every connection also has TCP keepalive (10 s).' },
  { name: 'SVC_S3_ENDPOINT', default: '', help: 'S3 endpoint of the pg-s3 and s3 backends (empty: AWS). Credentials from the AWS SDK\'s standard chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles, instance roles).' },
  { name: 'SVC_S3_REGION', default: 'us-east-1', help: 'S3 region.' },
  { name: 'SVC_S3_BUCKET', default: '', help: 'S3 bucket of the block bytes (pg-s3), or of everything (s3); it must exist.' },
  { name: 'SVC_S3_PREFIX', default: '', help: 'Prefix of every key svc writes in the bucket (e.g. `svc/`).' },
  { name: 'SVC_NODE_ID', default: '', help: 'This node\'s stable name among the nodes of one catalog; empty: a UUID made at the first start and kept in <SVC_FS_ROOT>/node-id. Keep it with its data directory: garbage collection knows a root holder (a node whose data directory holds document content) by this name, and waits for it while it is down (svc nodes).' },
  { name: 'SVC_NODE_TTL', default: '15s', help: 'A node whose heartbeat (in the shared catalog, every 5 s or a third of this, whichever is shorter) is older than this is down: its uploads no longer hold back garbage collection (the roots of a root holder still do, until it is back or forgotten: svc nodes). With `s3` on a server that ignores conditional writes, a node refuses to start while another node\'s heartbeat is younger than this; a node stopped cleanly removes its heartbeat at once.' },
  { name: 'SVC_DOCUMENTS_LEASE_TTL', default: '30s', help: 'With `s3`: the node serving the document platform (/v1) holds it by a lease in the bucket, renewed every 5 s or a third of this, whichever is shorter; a claim not renewed for this long (its node killed or cut off; judged by the bucket\'s clock) is taken over by another node, which then serves /v1 from its own data directory (the documents of the node before it stay in that node\'s). A node stopped cleanly keeps its claim until it starts again or `svc nodes release-documents` hands it on. At least 3s.' },
  { name: 'SVC_LOCALITY', default: 'off', help: '`on`: a POST /api/v1/blobs with X-Svc-Tenant-Id and X-Svc-Upload-Session-Id is ingested by one live owner among the nodes sharing the catalog (another node forwards the body to it once, unbuffered); `off`: such a request is 503 locality_unavailable.' },
  { name: 'SVC_LOCALITY_TIMEOUT', default: '30s', help: 'A forwarded upload (SVC_LOCALITY) whose owner node neither takes bytes nor answers for this long (a stopped or unreachable node whose kernel still holds the connection) is given up: the client gets 503 locality_failed.' },
  { name: 'SVC_S3_TIMEOUT', default: `${S3_DEFAULT_IDLE_TIMEOUT_MS / 1000}s`, help: 'A request of svc to the S3 server of the pg-s3 and s3 backends that sends or receives nothing for this long (a paused server, a connection cut without a reset), or whose connection does not open within it, is given up and retried as a network failure; after 3 attempts the client\'s request is answered 503. Raise it for a slow or distant S3 server.' },
  { name: 'SVC_S3_FORCE_PATH_STYLE', default: '', help: '`true` to address the bucket by path (most S3-compatible servers); empty: `true` when SVC_S3_ENDPOINT is set, else `false`.' },
  { name: 'SVC_FS_ROOT', default: './data', help: 'Data directory: blocks/ (block files), catalog/ (LMDB) and svc.lock (one svc process per directory).' },
  { name: 'SVC_DURABILITY', default: 'strict', help: '`strict`: fsync blocks, directories and LMDB before answering. `relaxed`: trust the page cache.' },
  { name: 'SVC_CHUNKER', default: 'fastcdc', help: 'Default chunker for non-PDF bodies: `fastcdc` (normalized) or `fixed` (SVC_CHUNK_AVG-sized blocks).' },
  { name: 'SVC_CHUNK_MIN', default: '256KiB', help: 'FastCDC minimum block size.' },
  { name: 'SVC_CHUNK_AVG', default: '1MiB', help: 'FastCDC average block size; the block size of the fixed chunker.' },
  { name: 'SVC_CHUNK_MAX', default: '4MiB', help: 'FastCDC maximum block size (at most 16 MiB).' },
  { name: 'SVC_MAX_UPLOAD_BYTES', default: '5GiB', help: 'Largest direct upload, enforced while streaming (413 beyond); also the largest tus upload (`Tus-Max-Size`).' },
  { name: 'SVC_WORKERS', default: String(os.availableParallelism()), help: 'Worker threads in the pool (default: available parallelism).' },
  { name: 'SVC_NATIVE_SHA256', default: 'auto', help: '`auto`: hash each block together with the whole object on the scanning thread with the native SHA-256 pair (native/sha256-pair.c, built by `npm run build`; x86-64 with SHA extensions), when it loaded; `off`: node:crypto only, blocks hashed by the worker threads.' },
  { name: 'SVC_SEGMENT_BYTES', default: '1MiB', help: 'Size of the shared segments an upload is copied into and handed to workers.' },
  { name: 'SVC_INGEST_BUFFER_BYTES', default: '512MiB', help: 'Bytes all uploads together may hold in segments; uploads pause beyond it.' },
  { name: 'SVC_IDEMPOTENCY_TTL', default: '24h', help: 'How long the answer to a creating POST sent with an `Idempotency-Key` is kept (in the units store: LMDB on fs and s3, PostgreSQL on pg-s3, so any node answers a repeat): a repeat within it gets the first answer again; expired keys are swept every minute, a bounded batch at a time. At least 1 minute.' },
  { name: 'SVC_UPLOAD_TTL', default: '24h', help: 'Lifetime of a resumable upload session (tus uploads included: `Upload-Expires`), fixed when it is created (410 upload_expired after).' },
  { name: 'SVC_UPLOAD_MAX_PART_BYTES', default: '256MiB', help: 'Largest part of a resumable upload (400 invalid_upload beyond); a tus PATCH may carry up to the rest of its upload.' },
  { name: 'SVC_UPLOAD_MAX_PARTS', default: '8192', help: 'Most parts one resumable upload session may have.' },
  { name: 'SVC_UPLOAD_PART_LEASE', default: '15m', help: 'How long a part in progress holds its session (409 upload_busy for others meanwhile).' },
  { name: 'SVC_UPLOAD_COMMIT_LEASE', default: '30m', help: 'How long a commit in progress holds its session.' },
  { name: 'SVC_UPLOAD_CLEANUP_INTERVAL', default: '15m', help: 'Period of the cleanup of expired, cancelled and interrupted sessions (also run at start).' },
  { name: 'SVC_JOB_CONCURRENCY', default: '', help: 'Most jobs running at once (empty: SVC_WORKERS, the pool\'s thread count).' },
  { name: 'SVC_JOB_IO_CONCURRENCY', default: '16', help: 'Most jobs whose work is the main thread\'s waiting on I/O (legacy imports) running at once, apart from SVC_JOB_CONCURRENCY.' },
  { name: 'SVC_JOB_MAX_ATTEMPTS', default: '5', help: 'Attempts of a job before it is `dead`; a non-retryable failure is `failed` at once.' },
  { name: 'SVC_JOB_BACKOFF', default: '1s', help: 'Delay before a failed job runs again; doubles with each attempt.' },
  { name: 'SVC_JOB_BACKOFF_MAX', default: '5m', help: 'Longest delay between two attempts of a job.' },
  { name: 'SVC_JOB_LEASE', default: '5m', help: 'How long a running job stays with its node without renewal (renewed while it runs); a job whose lease has expired is taken over by any node (about the lease plus one second after its node stopped), and a restarted node takes its own earlier jobs over at once.' },
  { name: 'SVC_GC_INTERVAL', default: '', help: 'Period of scheduled garbage collection runs (mark, quarantine, purge, applied); empty or 0: off (runs only on POST /api/ops/v1/gc or `svc gc`).' },
  { name: 'SVC_GC_MIN_AGE', default: '24h', help: 'Unreferenced blocks younger than this (since written or last referenced) are not quarantined.' },
  { name: 'SVC_GC_QUARANTINE_AGE', default: '7d', help: 'How long a quarantined block stays restorable before a purge deletes it.' },
  { name: 'SVC_MIN_FREE_SPACE', default: '1GiB', help: 'Free space the data directory\'s file system keeps: a size (1GiB) or a share of the file system (5%). Below it uploads are refused (507 insufficient_storage) and readiness says `degraded`; 0 disables.' },
  { name: 'SVC_INLINE_MAX_BYTES', default: '16KiB', help: 'Blobs up to this size (one block) are kept in the catalog with their manifest instead of as block files (with `s3`: inside the tenant\'s holding object, no block object); 0 disables.' },
  { name: 'SVC_BLOCK_CACHE_BYTES', default: '64MiB', help: 'Memory for caching small blocks (64 KiB or less) on the read path; 0 disables.' },
  { name: 'SVC_HEALTH_TIMEOUT', default: '5s', help: 'Timeout of each readiness check.' },
  { name: 'SVC_OPS_REFRESH_MS', default: '1000', help: 'Milliseconds between two reads of the operator snapshot while anyone follows /api/ops/v1/events (also the most a GET of the snapshot is out of date).' },
  { name: 'SVC_OPS_MAX_STREAMS', default: '4', help: 'With SVC_SECURITY_ENABLED=true, most /api/ops/v1/events streams one principal (a token\'s org_id and sub) may hold open at once: one more is 429 too_many_streams with Retry-After until one closes.' },
  { name: 'SVC_SECURITY_ENABLED', default: 'false', help: '`true`: every /api/v1 and /api/ops route, and every route of the model listener (HTTP_PORT) but /health and /docs, needs a bearer token (RS256/ES256 against SVC_OIDC_*; HS256 only with an explicit SVC_DEV_SHARED_SECRET) and the capability of the route; health stays public. file:// bundles are then read only inside SVC_MODEL_ROOTS.' },
  { name: 'SVC_TENANT_POLICY_FILE', default: '', help: 'JSON file of tenant policies (`{ "default": Policy, "tenants": { "<org_id>": Policy } }`, Policy = { maxObjectBytes?, quotaBytes?, maxConcurrent?, maxQueued?, bytesPerMinute?, requestsPerMinute? }), applied with security on; re-read on SIGHUP. Empty: no limits.' },
  { name: 'SVC_TENANT_QUEUE_WAIT', default: '30s', help: 'With a tenant policy, the longest an operation waits in its tenant\'s queue (maxQueued) for a slot (maxConcurrent): then 503 tenant_queue_timeout with Retry-After. A request whose client goes away leaves the queue at once.' },
  { name: 'SVC_SECURITY_CORS_ALLOWED_ORIGINS', default: '', help: 'Comma-separated exact browser origins (used when security is enabled; unsecured servers allow any origin).' },
  { name: 'SVC_DEV_SHARED_SECRET', default: '', help: 'HS256 secret of development tokens; empty: one is generated at first start and kept in <SVC_FS_ROOT>/secrets/dev-shared-secret, or with SVC_BLOB_BACKEND=pg-s3 in the database, where every node reads the same one (never with SVC_SECURITY_ENABLED=true: then HS256 needs an explicit secret of at least 32 bytes, else the start is refused). `off` disables HS256 tokens and POST /dev/token.' },
  { name: 'SVC_DEV_TOKEN_ENDPOINT', default: 'loopback', help: '`loopback`: POST /dev/token answers requests from 127.0.0.1/::1 only, and none that carries Forwarded, X-Forwarded-For or X-Real-IP (a proxy\'s); `off`: disabled.' },
  { name: 'SVC_OIDC_ISSUER', default: '', help: 'Required `iss` of RS256/ES256 tokens (checked when a JWKS is configured).' },
  { name: 'SVC_OIDC_AUDIENCE', default: '', help: 'Required `aud` of RS256/ES256 tokens.' },
  { name: 'SVC_OIDC_JWKS_URI', default: '', help: 'URL of the JWKS that verifies RS256/ES256 tokens; empty with SVC_OIDC_ISSUER set: the `jwks_uri` of the issuer\'s discovery document.' },
  { name: 'SVC_OIDC_JWKS_REFRESH', default: '30s', help: 'Least time between two fetches of SVC_OIDC_JWKS_URI (a token signed by a key not in the cached set triggers one: a provider\'s key rotation).' },
  { name: 'SVC_OIDC_JWKS_FILE', default: '', help: 'Local JWKS file that verifies RS256/ES256 tokens (instead of SVC_OIDC_JWKS_URI).' },
  { name: 'SVC_SCHEMA_COMPILE_TIMEOUT', default: '5s', help: 'How long compiling a JSON Schema at registration may take on the main thread (422 schema_unsupported beyond).' },
  { name: 'SVC_METADATA_VALIDATION_TIMEOUT', default: '1s', help: 'How long validating one metadata entry may take (the entry is rejected, or quarantined if derived, with a timeout issue beyond).' },
  { name: 'SVC_VIEW_WAIT', default: '30s', help: 'How long a content request for a view that is not stored yet waits for its materialization before answering 202 with the job (0: answer at once).' },
  { name: 'SVC_VIEW_MAX_INPUT_BYTES', default: '256MiB', help: 'Largest content views and workflows read (the PDF, image or text is held whole by the engines): larger content is 422 view_unsupported.' },
  { name: 'SVC_DOC_MAX_JSON_BYTES', default: '1MiB', help: 'Largest JSON request body of the document platform (413 beyond); metadata patches are bounded at 64 KiB.' },
  { name: 'SVC_MAX_METADATA_ENTRY_BYTES', default: '1MiB', help: 'Largest metadata entry as stored (its JSON: schema, id, data, receipt; 413 metadata_entry_too_large beyond). Each stored entry counts against its tenant\'s quota.' },
  { name: 'SVC_LEGACY_REPOS', default: '', help: 'Legacy repositories served read-through at GET /legacy/{repo}/{docId}: comma-separated `name=/path` entries (name: a letter or digit, then letters, digits, `.`, `_`, `-`, at most 64; path: the repository root holding metadata/ and binaries/, relative paths resolved from the working directory; no commas in paths). Each root must be an existing directory at start. Empty: none.' },
  { name: 'HTTP_PORT', default: '8080', help: 'Port of the model runtime listener (0 = pick a free port).' },
  { name: 'MODEL_EXECUTION_STRATEGY', default: 'par', help: 'Default execution mode of transform and rank: `seq`, `par` (every pool thread) or `par-N` (at most N tasks in flight).' },
  { name: 'MODEL_CACHE_SIZE', default: '5', help: 'Loaded models kept in memory (least recently used are dropped and reloaded on next use).' },
  { name: 'MODEL_CACHE_TTL', default: '30m', help: 'How long a loaded model stays cached after it was loaded.' },
  { name: 'MODEL_LOAD_TIMEOUT', default: '60s', help: 'Limit for acquiring, reading, compiling and warming one bundle (408 beyond).' },
  { name: 'MODEL_REQUEST_TIMEOUT', default: '30s', help: 'Limit for one transform, rank, sample, graph or health request (408 beyond).' },
  { name: 'MODEL_MAX_BUNDLE_BYTES', default: '512MiB', help: 'Largest bundle, downloaded, and expanded (the uncompressed bytes of its JSON files together, checked against a zip\'s declared sizes before inflating and again while inflating); 400 BundleException beyond.' },
  { name: 'MODEL_MAX_BUNDLE_FILES', default: '100000', help: 'Most JSON files a bundle may hold (the files that are read; 400 BundleException beyond).' },
  { name: 'MODEL_MAX_ZIP_ENTRIES', default: '200000', help: 'Most entries (files and folders of any kind) a zip bundle may list, checked before any entry is read (400 BundleException beyond).' },
  { name: 'MODEL_MAX_DIRECTORY_ENTRIES', default: '200000', help: 'Most entries (files, folders, links) a directory bundle\'s walk may meet; the walk stops there (400 BundleException beyond).' },
  { name: 'SVC_MODEL_ROOTS', default: '', help: 'Comma-separated places bundles may be read from: directories that file:// bundle URIs must lie in once links are followed, and s3://bucket/folder/ or gs://bucket/folder/ prefixes that s3:// and gs:// URIs must lie under; a URI elsewhere is 403 ForbiddenLocation, refused by its name without opening or fetching it. Each directory must exist at start. Empty: any local path and any bucket with security off; with SVC_SECURITY_ENABLED=true, <SVC_FS_ROOT>/models alone (created at start) and no bucket. Whatever the roots say, no bundle is read from the blob store\'s own SVC_S3_BUCKET under SVC_S3_PREFIX.' },
  { name: 'MODEL_MAX_FRAME_BYTES', default: '64MiB', help: 'Largest request body of transform and rank (413 beyond).' },
  { name: 'MODEL_MAX_FRAME_ROWS', default: '1000000', help: 'Most rows a flattened request frame may have (a Cartesian frame multiplies).' },
  { name: 'MODEL_WARMUP_ROWS', default: '200', help: 'Rows of generated sample data run through a model when it is registered.' },
  { name: 'MODEL_S3_ENDPOINT', default: '', help: 'Endpoint of an S3-compatible store for s3:// bundle URIs (empty: AWS). Credentials and region come from the AWS SDK\'s usual sources.' },
  { name: 'MODEL_S3_FORCE_PATH_STYLE', default: 'false', help: '`true` to address buckets by path (most S3-compatible servers).' },
  { name: 'MODEL_GCS_ENDPOINT', default: 'https://storage.googleapis.com', help: 'Endpoint of Google Cloud Storage for gs:// bundle URIs (an emulator for tests).' },
  { name: 'SVC_LOG_LEVEL', default: 'info', help: '`debug`, `info`, `warn`, `error` or `silent`. Logs are JSON lines on stderr.' },
  // The S3-compatible API (issue 39; decisions §5 "S3-compatible API").
  { name: 'SVC_S3_API_PORT', default: '9000', help: 'Port of the S3-compatible API listener (host SVC_HOST; 0 = pick a free port; `off` disables it).' },
  { name: 'SVC_S3_API_DOMAIN', default: '', help: 'Domain of virtual-hosted-style S3 requests (`<bucket>.<domain>`); empty: path-style requests only (`/<bucket>/<key>`).' },
  { name: 'SVC_S3_API_REGION', default: 'us-east-1', help: 'The region of the S3 API: the one a SigV4 credential scope must name, and GetBucketLocation\'s answer.' },
  { name: 'SVC_S3_KEYS_FILE', default: '', help: 'JSON file of the S3 API\'s access keys (`{ "keys": [ { "accessKeyId", "secretAccessKey", "tenant", "sub", "displayName"?, "scope" } ] }`; a secret of 32 to 256 visible ASCII characters, `scope` like a token\'s: `blob.read blob.write blob.delete`); re-read on SIGHUP. With SVC_SECURITY_ENABLED=true every S3 request is SigV4-verified against these keys.' },
];

export type Durability = 'strict' | 'relaxed';
type DefaultChunker = 'fastcdc' | 'fixed';
export type BlobBackendKind = 'fs' | 'pg-s3' | 's3';
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

export interface Config {
  host: string;
  httpPort: number;
  /** SVC_HTTP_LINGER_BYTES: the most of a body's rest read and dropped after an early answer. */
  httpLingerBytes: number;
  blobBackend: BlobBackendKind;
  /** The pg-s3 backend's PostgreSQL (url '' with fs). */
  pg: { url: string; pool: number; statementTimeoutMs: number };
  /** The pg-s3 backend's bucket (bucket '' with fs). */
  s3: { endpoint: string; region: string; bucket: string; prefix: string; forcePathStyle: boolean; idleTimeoutMs: number };
  fsRoot: string;
  /** SVC_NODE_ID; '' = the one kept in the data directory. */
  nodeId: string;
  nodeTtlMs: number;
  /** SVC_DOCUMENTS_LEASE_TTL: how long the s3 documents node's claim outlives its last renewal. */
  documentsLeaseMs: number;
  /** SVC_LOCALITY=on. */
  locality: boolean;
  /** SVC_LOCALITY_TIMEOUT: a forward to an owner silent this long is given up. */
  localityTimeoutMs: number;
  durability: Durability;
  chunker: DefaultChunker;
  chunkMin: number;
  chunkAvg: number;
  chunkMax: number;
  maxUploadBytes: number;
  workers: number;
  segmentBytes: number;
  nativeSha256: 'auto' | 'off';
  ingestBufferBytes: number;
  inlineMaxBytes: number;
  blockCacheBytes: number;
  healthTimeoutMs: number;
  /** SVC_MIN_FREE_SPACE. */
  minFreeSpace: FreeSpaceFloor;
  /** SVC_OPS_REFRESH_MS: period of the shared operator snapshot refresher. */
  opsRefreshMs: number;
  /** SVC_OPS_MAX_STREAMS: open event streams per principal (security on). */
  opsMaxStreams: number;
  uploads: UploadConfig;
  jobs: JobConfig;
  gc: GcConfig;
  auth: AuthConfig;
  /** SVC_SECURITY_ENABLED: the blob API and the operator endpoints need a token and a capability. */
  securityEnabled: boolean;
  /** SVC_TENANT_POLICY_FILE ('' = no limits). */
  tenantPolicyFile: string;
  /** SVC_TENANT_QUEUE_WAIT: the longest wait of a queued operation for its tenant's slot. */
  tenantQueueWaitMs: number;
  docMaxJsonBytes: number;
  /** SVC_IDEMPOTENCY_TTL: how long a creating POST's answer is kept under its Idempotency-Key. */
  idempotencyTtlMs: number;
  /** SVC_MAX_METADATA_ENTRY_BYTES: the largest metadata entry as stored (its JSON). */
  maxMetadataEntryBytes: number;
  /** Read again by engine/documents/validator.ts in every thread; parsed here so a bad value stops the start. */
  validation: ValidationDeadlines;
  /** SVC_LEGACY_REPOS: configured legacy repositories, in the order given (roots absolute, not yet checked on disk). */
  legacyRepos: LegacyRepoConfig[];
  views: { waitMs: number; maxInputBytes: number };
  corsAllowedOrigins: string[];
  logLevel: LogLevel;
  model: ModelConfig;
  /** The S3-compatible API: port (null: `off`), virtual-host domain ('' : path style only), region, keys file ('' : none). */
  s3Api: { port: number | null; domain: string; region: string; keysFile: string };
}

export interface LegacyRepoConfig {
  /** The `{repo}` of /legacy/{repo}/{docId}. */
  name: string;
  /** The repository root (absolute). */
  root: string;
}

export interface AuthConfig {
  /** '' = generate and keep one (never with security enabled: then no HS256 tokens); 'off' = no HS256 tokens. */
  devSharedSecret: string;
  devTokenEndpoint: 'loopback' | 'off';
  oidcIssuer: string;
  oidcAudience: string;
  jwksUri: string;
  jwksFile: string;
  /** SVC_OIDC_JWKS_REFRESH: the least time between two JWKS fetches. */
  jwksRefreshMs: number;
}

export interface UploadConfig {
  ttlMs: number;
  maxPartBytes: number;
  maxParts: number;
  partLeaseMs: number;
  commitLeaseMs: number;
  cleanupIntervalMs: number;
}

export interface GcConfig {
  /** 0 = no schedule. */
  intervalMs: number;
  minAgeMs: number;
  quarantineAgeMs: number;
}

export interface JobConfig {
  /** Most jobs running at once. */
  concurrency: number;
  /** Most main-thread (I/O) jobs running at once. */
  ioConcurrency: number;
  maxAttempts: number;
  backoffMs: number;
  backoffMaxMs: number;
  leaseMs: number;
}

export type ExecutionMode = { kind: 'seq' } | { kind: 'par' } | { kind: 'par-n'; n: number };

export interface ModelConfig {
  httpPort: number;
  executionStrategy: ExecutionMode;
  cacheSize: number;
  cacheTtlMs: number;
  loadTimeoutMs: number;
  requestTimeoutMs: number;
  maxBundleBytes: number;
  maxBundleFiles: number;
  /** MODEL_MAX_ZIP_ENTRIES: entries of any kind in a zip bundle's central directory. */
  maxZipEntries: number;
  /** MODEL_MAX_DIRECTORY_ENTRIES: entries of any kind a directory bundle's walk may meet. */
  maxDirectoryEntries: number;
  /**
   * SVC_MODEL_ROOTS (absolute, not yet checked on disk): the directories file:// bundles must
   * resolve inside. null: anywhere (security off and SVC_MODEL_ROOTS unset).
   */
  roots: string[] | null;
  /**
   * SVC_MODEL_ROOTS' s3:// and gs:// entries: the bucket folders object bundles must lie under.
   * null: any (security off and SVC_MODEL_ROOTS unset); empty: none.
   */
  objectRoots: ObjectRoot[] | null;
  /** The blob store's own SVC_S3_BUCKET and SVC_S3_PREFIX, never read as a bundle; null without SVC_S3_BUCKET. */
  storeLocation: { bucket: string; prefix: string } | null;
  /** The roots are the default, <SVC_FS_ROOT>/models (security on, SVC_MODEL_ROOTS unset): made at start when missing. */
  defaultRoots: boolean;
  maxFrameBytes: number;
  maxFrameRows: number;
  warmupRows: number;
  s3Endpoint: string;
  s3ForcePathStyle: boolean;
  gcsEndpoint: string;
}

export { ConfigError };

/** `seq`, `par`, `par-N` (N >= 1); undefined when the text is none of them. */
export function parseExecutionMode(raw: string): ExecutionMode | undefined {
  if (raw === 'seq' || raw === 'par') return { kind: raw };
  const m = /^par-(\d{1,6})$/.exec(raw);
  if (!m || Number(m[1]) < 1) return undefined;
  return { kind: 'par-n', n: Number(m[1]) };
}

const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, tib: 1024 ** 4, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12 };
const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `1048576`, `256KiB`, `5GiB`, `1.5MB` → bytes. */
export function parseSize(name: string, raw: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([a-zA-Z]*)$/.exec(raw.trim());
  const unit = m ? SIZE_UNITS[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new ConfigError(`${name}: "${raw}" is not a size (e.g. 1048576, 256KiB, 5GiB)`);
  const value = Math.round(Number(m[1]) * unit);
  if (!Number.isSafeInteger(value)) throw new ConfigError(`${name}: "${raw}" is too large`);
  return value;
}

/** `500ms`, `90s`, `15m`, `24h`, `7d` → milliseconds. A unit is required. */
export function parseDuration(name: string, raw: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)(ms|s|m|h|d)\s*$/.exec(raw);
  if (!m) throw new ConfigError(`${name}: "${raw}" is not a duration with a unit (500ms, 90s, 15m, 24h, 7d)`);
  return Math.round(Number(m[1]) * DURATION_UNITS[m[2]]);
}

/** `1GiB` (bytes) or `5%` (of the file system). */
function parseFloor(name: string, raw: string): FreeSpaceFloor {
  const m = /^\s*(\d+(?:\.\d+)?)\s*%\s*$/.exec(raw);
  if (!m) return { bytes: parseSize(name, raw) };
  return { percent: inRange(name, Number(m[1]), 0, 100) };
}

function parseInteger(name: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name}: "${raw}" is not a whole number`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(`${name}: ${n} is outside ${min}..${max}`);
  return n;
}

function oneOf<T extends string>(name: string, raw: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(raw)) throw new ConfigError(`${name}: "${raw}" must be one of ${allowed.join(', ')}`);
  return raw as T;
}

/** A duration of at least `min` ms (`shown`: the same in the variable's unit). */
function atLeast(name: string, ms: number, min: number, shown: string): number {
  if (ms < min) throw new ConfigError(`${name}: must be at least ${shown}`);
  return ms;
}

function inRange(name: string, value: number, min: number, max: number): number {
  if (value < min || value > max) throw new ConfigError(`${name}: ${value} is outside ${min}..${max}`);
  return value;
}

const LEGACY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** `name=/path,name2=/path2` → repositories; every syntax error names the entry at fault. */
export function parseLegacyRepos(raw: string): LegacyRepoConfig[] {
  const name = 'SVC_LEGACY_REPOS';
  if (raw.trim() === '') return [];
  const repos: LegacyRepoConfig[] = [];
  const entries = raw.split(',');
  for (const [i, rawEntry] of entries.entries()) {
    const entry = rawEntry.trim();
    if (entry === '') {
      // A trailing comma is tolerated; an empty entry between two others is a typo.
      if (i === entries.length - 1 && i > 0) continue;
      throw new ConfigError(`${name}: entry ${i + 1} is empty (expected name=/path,name2=/path2)`);
    }
    const eq = entry.indexOf('=');
    if (eq < 0) throw new ConfigError(`${name}: entry ${i + 1} "${entry}" is not name=/path`);
    const repoName = entry.slice(0, eq).trim();
    const root = entry.slice(eq + 1).trim();
    if (!LEGACY_NAME.test(repoName)) {
      throw new ConfigError(`${name}: "${repoName}" is not a repository name (a letter or digit, then letters, digits, ".", "_" or "-", at most 64)`);
    }
    if (root === '') throw new ConfigError(`${name}: repository "${repoName}" has no path`);
    if (root.includes('\0')) throw new ConfigError(`${name}: the path of repository "${repoName}" contains NUL`);
    if (repos.some((r) => r.name === repoName)) throw new ConfigError(`${name}: repository "${repoName}" is named twice`);
    repos.push({ name: repoName, root: path.resolve(root) });
  }
  return repos;
}

function executionMode(raw: string): ExecutionMode {
  const mode = parseExecutionMode(raw);
  if (!mode) throw new ConfigError(`MODEL_EXECUTION_STRATEGY: "${raw}" is not seq, par or par-N (N >= 1)`);
  return mode;
}

/** The deadlines of metadata validation (the main thread and the job workers read them alike). */
export interface ValidationDeadlines {
  compileMs: number;
  validateMs: number;
}

export function validationDeadlines(env: NodeJS.ProcessEnv = process.env): ValidationDeadlines {
  const get = (name: string) => env[name] || VARIABLES.find((x) => x.name === name)!.default;
  return {
    compileMs: inRange('SVC_SCHEMA_COMPILE_TIMEOUT', parseDuration('SVC_SCHEMA_COMPILE_TIMEOUT', get('SVC_SCHEMA_COMPILE_TIMEOUT')), 100, 10 * 60_000),
    validateMs: inRange('SVC_METADATA_VALIDATION_TIMEOUT', parseDuration('SVC_METADATA_VALIDATION_TIMEOUT', get('SVC_METADATA_VALIDATION_TIMEOUT')), 10, 10 * 60_000),
  };
}

const MiB = 1024 ** 2;

/** A variable's value, or its default when unset or empty. */
type Getter = (name: string) => string;

function getterOf(env: NodeJS.ProcessEnv): Getter {
  return (name) => {
    const v = env[name];
    return v === undefined || v === '' ? VARIABLES.find((x) => x.name === name)!.default : v;
  };
}

/** Parse and validate the whole configuration; throws ConfigError naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const get = getterOf(env);
  const config: Config = {
    host: get('SVC_HOST'),
    httpPort: parseInteger('SVC_HTTP_PORT', get('SVC_HTTP_PORT'), 0, 65535),
    httpLingerBytes: inRange('SVC_HTTP_LINGER_BYTES', parseSize('SVC_HTTP_LINGER_BYTES', get('SVC_HTTP_LINGER_BYTES')), 0, 2 ** 40),
    blobBackend: oneOf('SVC_BLOB_BACKEND', get('SVC_BLOB_BACKEND'), ['fs', 'pg-s3', 's3'] as const),
    pg: { url: get('SVC_PG_URL'), pool: parseInteger('SVC_PG_POOL', get('SVC_PG_POOL'), 1, 1000), statementTimeoutMs: inRange('SVC_PG_STATEMENT_TIMEOUT', parseDuration('SVC_PG_STATEMENT_TIMEOUT', get('SVC_PG_STATEMENT_TIMEOUT')), 100, 60 * 60_000) },
    s3: {
      endpoint: get('SVC_S3_ENDPOINT'),
      region: get('SVC_S3_REGION'),
      bucket: get('SVC_S3_BUCKET'),
      prefix: get('SVC_S3_PREFIX'),
      forcePathStyle: get('SVC_S3_FORCE_PATH_STYLE') === '' ? get('SVC_S3_ENDPOINT') !== '' : oneOf('SVC_S3_FORCE_PATH_STYLE', get('SVC_S3_FORCE_PATH_STYLE'), ['true', 'false'] as const) === 'true',
      idleTimeoutMs: inRange('SVC_S3_TIMEOUT', parseDuration('SVC_S3_TIMEOUT', get('SVC_S3_TIMEOUT')), 100, 60 * 60_000),
    },
    fsRoot: path.resolve(get('SVC_FS_ROOT')),
    nodeId: get('SVC_NODE_ID'),
    nodeTtlMs: parseDuration('SVC_NODE_TTL', get('SVC_NODE_TTL')),
    documentsLeaseMs: atLeast('SVC_DOCUMENTS_LEASE_TTL', parseDuration('SVC_DOCUMENTS_LEASE_TTL', get('SVC_DOCUMENTS_LEASE_TTL')), 3000, '3s'),
    locality: oneOf('SVC_LOCALITY', get('SVC_LOCALITY'), ['off', 'on'] as const) === 'on',
    localityTimeoutMs: inRange('SVC_LOCALITY_TIMEOUT', parseDuration('SVC_LOCALITY_TIMEOUT', get('SVC_LOCALITY_TIMEOUT')), 100, 60 * 60_000),
    durability: oneOf('SVC_DURABILITY', get('SVC_DURABILITY'), ['strict', 'relaxed'] as const),
    chunker: oneOf('SVC_CHUNKER', get('SVC_CHUNKER'), ['fastcdc', 'fixed'] as const),
    chunkMin: inRange('SVC_CHUNK_MIN', parseSize('SVC_CHUNK_MIN', get('SVC_CHUNK_MIN')), 64, 16 * MiB),
    chunkAvg: inRange('SVC_CHUNK_AVG', parseSize('SVC_CHUNK_AVG', get('SVC_CHUNK_AVG')), 256, 16 * MiB),
    chunkMax: inRange('SVC_CHUNK_MAX', parseSize('SVC_CHUNK_MAX', get('SVC_CHUNK_MAX')), 1024, 16 * MiB),
    maxUploadBytes: inRange('SVC_MAX_UPLOAD_BYTES', parseSize('SVC_MAX_UPLOAD_BYTES', get('SVC_MAX_UPLOAD_BYTES')), 1, 2 ** 40),
    workers: parseInteger('SVC_WORKERS', get('SVC_WORKERS'), 1, 256),
    segmentBytes: inRange('SVC_SEGMENT_BYTES', parseSize('SVC_SEGMENT_BYTES', get('SVC_SEGMENT_BYTES')), 64 * 1024, 64 * MiB),
    nativeSha256: oneOf('SVC_NATIVE_SHA256', get('SVC_NATIVE_SHA256'), ['auto', 'off'] as const),
    ingestBufferBytes: inRange('SVC_INGEST_BUFFER_BYTES', parseSize('SVC_INGEST_BUFFER_BYTES', get('SVC_INGEST_BUFFER_BYTES')), 16 * MiB, 2 ** 40),
    inlineMaxBytes: inRange('SVC_INLINE_MAX_BYTES', parseSize('SVC_INLINE_MAX_BYTES', get('SVC_INLINE_MAX_BYTES')), 0, 64 * 1024),
    blockCacheBytes: parseSize('SVC_BLOCK_CACHE_BYTES', get('SVC_BLOCK_CACHE_BYTES')),
    healthTimeoutMs: parseDuration('SVC_HEALTH_TIMEOUT', get('SVC_HEALTH_TIMEOUT')),
    minFreeSpace: parseFloor('SVC_MIN_FREE_SPACE', get('SVC_MIN_FREE_SPACE')),
    opsRefreshMs: parseInteger('SVC_OPS_REFRESH_MS', get('SVC_OPS_REFRESH_MS'), 10, 3_600_000),
    opsMaxStreams: parseInteger('SVC_OPS_MAX_STREAMS', get('SVC_OPS_MAX_STREAMS'), 1, 10_000),
    auth: authConfig(get, env),
    securityEnabled: oneOf('SVC_SECURITY_ENABLED', get('SVC_SECURITY_ENABLED'), ['true', 'false'] as const) === 'true',
    tenantPolicyFile: get('SVC_TENANT_POLICY_FILE'),
    idempotencyTtlMs: inRange('SVC_IDEMPOTENCY_TTL', parseDuration('SVC_IDEMPOTENCY_TTL', get('SVC_IDEMPOTENCY_TTL')), 60_000, 30 * 24 * 3600_000),
    tenantQueueWaitMs: inRange('SVC_TENANT_QUEUE_WAIT', parseDuration('SVC_TENANT_QUEUE_WAIT', get('SVC_TENANT_QUEUE_WAIT')), 10, 60 * 60_000),
    docMaxJsonBytes: inRange('SVC_DOC_MAX_JSON_BYTES', parseSize('SVC_DOC_MAX_JSON_BYTES', get('SVC_DOC_MAX_JSON_BYTES')), 1024, 64 * MiB),
    maxMetadataEntryBytes: inRange('SVC_MAX_METADATA_ENTRY_BYTES', parseSize('SVC_MAX_METADATA_ENTRY_BYTES', get('SVC_MAX_METADATA_ENTRY_BYTES')), 1024, 64 * MiB),
    validation: validationDeadlines(env),
    legacyRepos: parseLegacyRepos(get('SVC_LEGACY_REPOS')),
    views: {
      waitMs: get('SVC_VIEW_WAIT') === '0' ? 0 : inRange('SVC_VIEW_WAIT', parseDuration('SVC_VIEW_WAIT', get('SVC_VIEW_WAIT')), 0, 10 * 60_000),
      maxInputBytes: inRange('SVC_VIEW_MAX_INPUT_BYTES', parseSize('SVC_VIEW_MAX_INPUT_BYTES', get('SVC_VIEW_MAX_INPUT_BYTES')), 1024, 4096 * MiB),
    },
    uploads: uploadsConfig(get),
    jobs: jobsConfig(get),
    gc: gcConfig(get),
    corsAllowedOrigins: get('SVC_SECURITY_CORS_ALLOWED_ORIGINS').split(',').map((s) => s.trim()).filter(Boolean),
    logLevel: oneOf('SVC_LOG_LEVEL', get('SVC_LOG_LEVEL'), ['debug', 'info', 'warn', 'error', 'silent'] as const),
    model: modelConfig(get),
    s3Api: {
      port: get('SVC_S3_API_PORT') === 'off' ? null : parseInteger('SVC_S3_API_PORT', get('SVC_S3_API_PORT'), 0, 65535),
      domain: s3ApiDomain(get('SVC_S3_API_DOMAIN')),
      region: s3ApiRegion(get('SVC_S3_API_REGION')),
      keysFile: get('SVC_S3_KEYS_FILE'),
    },
  };
  // Named roots are the only places, of each kind (only s3:// roots named: no file:// bundle at all).
  const roots = parseModelRoots(get('SVC_MODEL_ROOTS'));
  if (roots.directories.length + roots.objects.length > 0) Object.assign(config.model, { roots: roots.directories, objectRoots: roots.objects });
  else if (config.securityEnabled) Object.assign(config.model, { roots: [path.join(config.fsRoot, 'models')], objectRoots: [], defaultRoots: true });
  if (config.s3.bucket) config.model.storeLocation = { bucket: config.s3.bucket, prefix: config.s3.prefix };
  checkBackend(config);
  return config;
}

function uploadsConfig(get: Getter): Config['uploads'] {
  return {
    ttlMs: parseDuration('SVC_UPLOAD_TTL', get('SVC_UPLOAD_TTL')),
    maxPartBytes: inRange('SVC_UPLOAD_MAX_PART_BYTES', parseSize('SVC_UPLOAD_MAX_PART_BYTES', get('SVC_UPLOAD_MAX_PART_BYTES')), 1, 4 * 1024 * MiB),
    maxParts: parseInteger('SVC_UPLOAD_MAX_PARTS', get('SVC_UPLOAD_MAX_PARTS'), 1, 1_000_000),
    partLeaseMs: parseDuration('SVC_UPLOAD_PART_LEASE', get('SVC_UPLOAD_PART_LEASE')),
    commitLeaseMs: parseDuration('SVC_UPLOAD_COMMIT_LEASE', get('SVC_UPLOAD_COMMIT_LEASE')),
    cleanupIntervalMs: parseDuration('SVC_UPLOAD_CLEANUP_INTERVAL', get('SVC_UPLOAD_CLEANUP_INTERVAL')),
  };
}

function jobsConfig(get: Getter): Config['jobs'] {
  return {
    // Empty: one job per pool thread.
    concurrency: get('SVC_JOB_CONCURRENCY') === '' ? parseInteger('SVC_WORKERS', get('SVC_WORKERS'), 1, 256) : parseInteger('SVC_JOB_CONCURRENCY', get('SVC_JOB_CONCURRENCY'), 1, 1024),
    ioConcurrency: parseInteger('SVC_JOB_IO_CONCURRENCY', get('SVC_JOB_IO_CONCURRENCY'), 1, 1024),
    maxAttempts: parseInteger('SVC_JOB_MAX_ATTEMPTS', get('SVC_JOB_MAX_ATTEMPTS'), 1, 1000),
    backoffMs: parseDuration('SVC_JOB_BACKOFF', get('SVC_JOB_BACKOFF')),
    backoffMaxMs: parseDuration('SVC_JOB_BACKOFF_MAX', get('SVC_JOB_BACKOFF_MAX')),
    leaseMs: inRange('SVC_JOB_LEASE', parseDuration('SVC_JOB_LEASE', get('SVC_JOB_LEASE')), 100, 2 ** 31 - 1),
  };
}

function gcConfig(get: Getter): Config['gc'] {
  return {
    intervalMs: ['', '0'].includes(get('SVC_GC_INTERVAL')) ? 0 : inRange('SVC_GC_INTERVAL', parseDuration('SVC_GC_INTERVAL', get('SVC_GC_INTERVAL')), 0, 2 ** 31 - 1),
    minAgeMs: parseDuration('SVC_GC_MIN_AGE', get('SVC_GC_MIN_AGE')),
    quarantineAgeMs: parseDuration('SVC_GC_QUARANTINE_AGE', get('SVC_GC_QUARANTINE_AGE')),
  };
}

function modelConfig(get: Getter): Config['model'] {
  return {
    httpPort: parseInteger('HTTP_PORT', get('HTTP_PORT'), 0, 65535),
    executionStrategy: executionMode(get('MODEL_EXECUTION_STRATEGY')),
    cacheSize: parseInteger('MODEL_CACHE_SIZE', get('MODEL_CACHE_SIZE'), 1, 10_000),
    cacheTtlMs: parseDuration('MODEL_CACHE_TTL', get('MODEL_CACHE_TTL')),
    loadTimeoutMs: parseDuration('MODEL_LOAD_TIMEOUT', get('MODEL_LOAD_TIMEOUT')),
    requestTimeoutMs: parseDuration('MODEL_REQUEST_TIMEOUT', get('MODEL_REQUEST_TIMEOUT')),
    maxBundleBytes: parseSize('MODEL_MAX_BUNDLE_BYTES', get('MODEL_MAX_BUNDLE_BYTES')),
    maxBundleFiles: parseInteger('MODEL_MAX_BUNDLE_FILES', get('MODEL_MAX_BUNDLE_FILES'), 1, 10_000_000),
    maxZipEntries: parseInteger('MODEL_MAX_ZIP_ENTRIES', get('MODEL_MAX_ZIP_ENTRIES'), 1, 10_000_000),
    maxDirectoryEntries: parseInteger('MODEL_MAX_DIRECTORY_ENTRIES', get('MODEL_MAX_DIRECTORY_ENTRIES'), 1, 10_000_000),
    roots: null,
    objectRoots: null,
    storeLocation: null,
    defaultRoots: false,
    maxFrameBytes: parseSize('MODEL_MAX_FRAME_BYTES', get('MODEL_MAX_FRAME_BYTES')),
    maxFrameRows: parseInteger('MODEL_MAX_FRAME_ROWS', get('MODEL_MAX_FRAME_ROWS'), 1, 100_000_000),
    warmupRows: parseInteger('MODEL_WARMUP_ROWS', get('MODEL_WARMUP_ROWS'), 0, 1_000_000),
    s3Endpoint: get('MODEL_S3_ENDPOINT'),
    s3ForcePathStyle: oneOf('MODEL_S3_FORCE_PATH_STYLE', get('MODEL_S3_FORCE_PATH_STYLE'), ['true', 'false'] as const) === 'true',
    gcsEndpoint: get('MODEL_GCS_ENDPOINT').replace(/(?<!\/)\/+$/, ''),
  };
}

function authConfig(get: Getter, env: NodeJS.ProcessEnv): Config['auth'] {
  return {
    devSharedSecret: env.SVC_DEV_SHARED_SECRET ?? '',
    devTokenEndpoint: oneOf('SVC_DEV_TOKEN_ENDPOINT', get('SVC_DEV_TOKEN_ENDPOINT'), ['loopback', 'off'] as const),
    oidcIssuer: get('SVC_OIDC_ISSUER'),
    oidcAudience: get('SVC_OIDC_AUDIENCE'),
    jwksUri: get('SVC_OIDC_JWKS_URI'),
    jwksFile: get('SVC_OIDC_JWKS_FILE'),
    jwksRefreshMs: parseDuration('SVC_OIDC_JWKS_REFRESH', get('SVC_OIDC_JWKS_REFRESH')),
  };
}

/** What the backend needs and the chunk sizes' order: refused at start, naming the variable. */
function checkBackend(config: Config): void {
  if (!(config.chunkMin <= config.chunkAvg && config.chunkAvg <= config.chunkMax)) {
    throw new ConfigError(`SVC_CHUNK_MIN <= SVC_CHUNK_AVG <= SVC_CHUNK_MAX must hold (got ${config.chunkMin}, ${config.chunkAvg}, ${config.chunkMax})`);
  }
  if (config.blobBackend === 'pg-s3') {
    if (!/^postgres(ql)?:\/\//.test(config.pg.url)) throw new ConfigError('SVC_PG_URL: the pg-s3 backend needs a postgres://user:pass@host:port/db URL');
    if (!config.s3.bucket) throw new ConfigError('SVC_S3_BUCKET: the pg-s3 backend needs the bucket of its block bytes');
    if (config.s3.prefix && !config.s3.prefix.endsWith('/')) throw new ConfigError(`SVC_S3_PREFIX: "${config.s3.prefix}" must end with "/"`);
  }
  if (config.blobBackend === 's3') {
    if (!config.s3.bucket) throw new ConfigError('SVC_S3_BUCKET: the s3 backend needs the bucket that holds everything');
    if (config.s3.prefix && !config.s3.prefix.endsWith('/')) throw new ConfigError(`SVC_S3_PREFIX: "${config.s3.prefix}" must end with "/"`);
  }
}

/** SVC_S3_API_DOMAIN: '' or a host name (lower-case labels of letters, digits and hyphens). */
function s3ApiDomain(raw: string): string {
  const domain = raw.trim().toLowerCase().replace(/\.$/, '');
  if (domain !== '' && !/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(domain)) {
    throw new ConfigError(`SVC_S3_API_DOMAIN: "${raw}" is not a host name (e.g. s3.example.com)`);
  }
  return domain;
}

/** SVC_S3_API_REGION: an AWS-style region name (e.g. us-east-1, eu-west-3, or a name of one's own: letters, digits, hyphens). */
function s3ApiRegion(raw: string): string {
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(raw)) throw new ConfigError(`SVC_S3_API_REGION: "${raw}" is not a region name (lower-case letters, digits and hyphens, e.g. us-east-1)`);
  return raw;
}
