import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Piscina } from 'piscina';
import { type IngestDeps, largestBlockBytes, localStores } from './cas/index.js';
import { Ingests } from './ingests/index.js';

import { BlobReader, type BlockRoots, StreamScanner, TransferMemory, loadSha256Pair, sha256PairUnavailableReason } from './cas/index.js';
import { Blobs } from './blobs/index.js';
import type { Config, LegacyRepoConfig } from './base/config.js';
import { type Collector, collectorFor } from './gc/index.js';
import { JobQueue } from './jobs/index.js';
import type { Logger } from './base/log.js';
import { CursorSeal, TokenVerifier } from './auth/index.js';
import { BulkMigrations, DocumentJobs, DocumentRecords, Documents, Metadata } from './documents/index.js';
import { MigrationRegistry } from './documents/index.js';
import { SchemaRegistry } from './documents/index.js';
import { BundleRoots, ModelService } from './models/index.js';
import { ClusterNodes, Health, Metrics, Stats, TrafficHistory, nodeIdOf, nodeSummary } from './ops/index.js';
import { LiveNodes } from './locality/index.js';
import { ViewService } from './views/index.js';
import { WorkflowService } from './workflows/index.js';
import { IdempotencyKeys } from './idempotency/index.js';
import { type BlobBackend, type BlobCatalog, type BlockStore, CatalogEnv, type DataDirLock, DiskSpace, KeyedCatalog, type UnitStore, lockDataDir, openBlobBackend, CatalogSchemaTooNew, StartRefused, openCatalogSchema } from './store/index.js';
import type { Clock } from './base/clock.js';
import { Uploads, tailBufferPool } from './uploads/index.js';
import { createWorkerPool } from './worker-pool.js';
import { Budgets, ClusterShareTracker, SINGLE_NODE, type ShareScope, TenantGate, TenantPolicies, TenantUsage } from './tenancy/index.js';
import { LegacyImports, LegacyRepositories } from './legacy/index.js';
import { S3Service } from './s3/s3-service.js';
import { S3Keys } from './s3/keys.js';
import { BlobRefs } from './s3/blob-refs.js';
import { MultipartUploads } from './s3/multipart-uploads.js';

const WORKER_MODULE = fileURLToPath(new URL('../workers/ingest.js', import.meta.url));
const SCANNER_MODULE = fileURLToPath(new URL('../workers/scanner.js', import.meta.url));

/**
 * The composition root: one per process, built from the config and handed to the server. It opens
 * the storage, builds the whole object graph (blob reads, uploads, jobs, documents, tokens, models,
 * GC with every root, tenant usage, health, live nodes) and closes it. The operations are the
 * services' (Blobs, TenantUsage, Health, LiveNodes, …); only the ingests' start is here yet. No HTTP here.
 */
export class Engine {
  readonly stats = new Stats();
  /** The process's one Prometheus registry: every listener's /metrics serves it. */
  readonly metrics: Metrics;
  /** The last minutes of traffic for the dashboard's first look. */
  readonly traffic: TrafficHistory;
  readonly reader: BlobReader;
  readonly uploads: Uploads;
  /** The durable job queue (document platform): kinds are defined by the modules that use it. */
  readonly jobs: JobQueue;
  /** Units of work of the document platform, jobs, views, workflows and legacy mappings (engine/store/unit-store.ts). */
  readonly units: UnitStore;
  /** Idempotency-Key of creating requests, in the units store (engine/idempotency). */
  readonly idempotency: IdempotencyKeys;
  /** The document platform's documents: creation, bytes, versions, labels, content (engine/documents/documents.ts). */
  readonly documents: Documents;
  /** The document platform's metadata: writes, patches, reads, search, schemas and migrations (engine/documents/metadata-service.ts). */
  readonly documentMetadata: Metadata;
  /** The document platform's jobs as the API shows them, and migrations of documents (engine/documents/document-jobs.ts). */
  readonly documentJobs: DocumentJobs;
  readonly views: ViewService;
  readonly workflows: WorkflowService;
  /** POST /v1/migrations/apply (engine/documents/bulk-migration.ts). */
  readonly bulkMigrations: BulkMigrations;
  /** Bearer tokens of the document platform. */
  readonly tokens: TokenVerifier;
  /** The cursors of every list and of search: sealed for one caller and one query (engine/auth/cursor-seal.ts). */
  readonly cursors: CursorSeal;
  /** The model runtime: MLeap bundles on the same worker pool. */
  readonly models: ModelService;
  /** Garbage collection of block files (mark, quarantine, purge): on demand or on SVC_GC_INTERVAL. */
  readonly gc: Collector;
  /** The nodes sharing the catalog, live or down, and the operator's `forget` and `releaseDocuments` (svc nodes). */
  readonly cluster: ClusterNodes;
  /** Free space of the data directory against SVC_MIN_FREE_SPACE (uploads are refused below it). */
  readonly space: DiskSpace;
  /** Tenant policies (SVC_TENANT_POLICY_FILE) and the budgets that enforce them, with security on. */
  readonly policies: TenantPolicies;
  readonly budgets: Budgets;
  /**
   * The tenant gate (engine/tenancy/tenant-gate.ts): the object limit, the quota with reservations,
   * the byte and request budgets and the operation slots. The operations that take bytes apply it
   * (ingests, uploads, documents); the routers take it as their meter.
   */
  readonly gate: TenantGate;
  /** Where every ingest starts: a blob namespace's body through the gate (`blob`), and the services' own. */
  readonly ingests: Ingests;
  /** This node's share of the tenants' cluster-wide limits (engine/tenancy/cluster-share.ts). */
  private readonly clusterShare: ClusterShareTracker;
  /** Legacy repositories read through (SVC_LEGACY_REPOS). */
  readonly legacy: LegacyRepositories;
  /** Legacy documents imported into the document platform (POST /v1/legacy/import). */
  readonly legacyImports: LegacyImports;
  /** The blob API's reads, inventory, verification and delete (engine/blobs). */
  readonly blobs: Blobs;
  /** The S3 API's operations over the S3 index (engine/s3). */
  readonly s3: S3Service;
  /** SVC_S3_KEYS_FILE: the S3 API's access keys, read at start and on SIGHUP (reload) like the tenant policy. */
  readonly s3Keys: S3Keys;
  /** A tenant's usage and limits, and the dashboard's table of them (engine/tenancy/tenant-usage.ts). */
  readonly tenantUsage: TenantUsage;
  /** Readiness, free space and clock checks, and the probe behind the heartbeats (engine/ops/health.ts). */
  readonly health: Health;
  /** The live nodes sharing the catalog, where this node listens, locality's owners (engine/locality/live-nodes.ts). */
  readonly liveNodes: LiveNodes;
  /** Published manifests: the backend's catalog. */
  readonly manifests: BlobCatalog;
  /** This node's stable name (SVC_NODE_ID, else kept in the data directory). */
  readonly nodeId: string;
  /** Block bytes: the backend's store. */
  readonly blocks: BlockStore;
  /** The time leases, retries and expiry are judged by: the database's on pg-s3 (decisions §5), else the system clock. */
  readonly clock: Clock;

  private constructor(
    readonly config: Config,
    readonly log: Logger,
    readonly catalog: CatalogEnv,
    readonly backend: BlobBackend,
    readonly pool: Piscina,
    readonly memory: TransferMemory,
    readonly scanner: StreamScanner,
    private readonly lock: DataDirLock,
    legacyRoots: readonly LegacyRepoConfig[],
    modelRoots: BundleRoots,
    tokens: TokenVerifier,
  ) {
    this.manifests = backend.manifests;
    this.nodeId = config.nodeId || nodeIdOf(config.fsRoot);
    this.blocks = backend.blocks;
    this.clock = backend.clock;
    const { manifests, blocks } = this;
    this.traffic = new TrafficHistory(this.stats, config.opsRefreshMs);
    this.metrics = new Metrics(this);
    this.legacy = new LegacyRepositories(legacyRoots, this.metrics.registry, log);
    this.reader = new BlobReader(manifests, blocks, config.blockCacheBytes, this.stats, log, this.memory);
    this.space = new DiskSpace(config.fsRoot, config.minFreeSpace);
    this.health = new Health({ dependencies: backend.dependencies, timeoutMs: config.healthTimeoutMs, space: this.space, clock: this.clock });
    this.liveNodes = new LiveNodes({ nodeId: this.nodeId, catalog: backend.shared?.gc, nodeTtlMs: config.nodeTtlMs, announce: () => this.gc.announce() });
    this.policies = TenantPolicies.open(config.tenantPolicyFile, log);
    this.s3Keys = S3Keys.open(config.s3Api.keysFile, log);
    // A tenant policy's figures hold for the cluster: this node enforces its share of them.
    this.clusterShare = new ClusterShareTracker(this.nodeId, () => this.liveNodes.liveNodeIds());
    // On s3 one node serves the document platform (the holder of the documents lease): it enforces the whole figures for /v1.
    const share = (scope: ShareScope) => (scope === 'documents' && this.backend.kind === 's3' ? SINGLE_NODE : this.clusterShare.get());
    this.budgets = new Budgets(this.policies, () => this.memory.queued === 0, share, config.tenantQueueWaitMs);
    // What the tenant holds is read only for a tenant with a quota, by then every service is built.
    this.gate = new TenantGate(config.securityEnabled, this.policies, this.budgets, {
      blobs: (tenant) => manifests.retainedBytes(tenant),
      documents: (tenant) => this.documents.retainedBytes(tenant),
      staged: (tenant, except) => this.stagedBytes(tenant, except),
    });
    this.ingests = new Ingests({ ingestDeps: () => this.makeIngestDeps(), gc: () => this.gc, space: this.space, gate: this.gate });
    this.uploads = new Uploads({
      config: config.uploads,
      ledger: backend.sessions.catalog,
      staging: backend.sessions.staging,
      nodeId: this.nodeId,
      // Asked only where the sessions are shared (the ledger's `shared`).
      liveNodes: () => this.liveNodes.liveNodeIds(),
      clock: this.clock,
      tailBuffers: tailBufferPool(largestBlockBytes(config)),
      blocks,
      scanner,
      manifests,
      readBlob: (manifest) => this.reader.range(manifest, 0, manifest.record.size),
      stats: this.stats,
      log,
      startPart: (options) => this.ingests.startPart(options),
      assertRoom: () => this.space.assertRoom(),
      gate: this.gate,
      tenantBlobs: config.securityEnabled,
      // Only for sessions in this node's LMDB (roots only it can mark): pg-s3's and s3's are shared, any run marks them.
      holdRoots: backend.shared ? () => this.gc.holdRoots() : undefined,
    });
    // The document platform's, the jobs' and the legacy mappings' records: shared by the
    // cluster's nodes on pg-s3, else in this node's LMDB.
    const units = backend.units;
    this.units = units;
    this.idempotency = new IdempotencyKeys(units, config.idempotencyTtlMs, () => this.clock.now());
    // Kept where every node reads it: a cursor one node gave opens on any other, and after a restart.
    this.cursors = new CursorSeal(backend.cursorKey);
    this.jobs = new JobQueue({ store: units, pool, config: config.jobs, log, node: this.nodeId, clock: this.clock });
    const schemas = new SchemaRegistry(new KeyedCatalog(units, 'schemas'), units, this.cursors);
    const migrations = new MigrationRegistry(new KeyedCatalog(units, 'migrations'), schemas);
    const documentRecords = new DocumentRecords(units, this.jobs, schemas, {
      limits: (tenant) => this.tenantUsage.limits(tenant),
      admitContent: (caller, declaredLength) => this.gate.content(caller, declaredLength),
      maxMetadataEntryBytes: config.maxMetadataEntryBytes,
      // What the quota counts beside document content: the tenant's blobs and its open uploads' reservations.
      blobBytes: async (tenant) => (await manifests.retainedBytes(tenant)) + (await this.stagedBytes(tenant)),
      isViewOf: (tenant, key, contents) => this.views.isViewOf(tenant, key, contents),
    });
    this.documents = new Documents(documentRecords, schemas, (options) => this.ingests.start(options), this.cursors);
    this.documentMetadata = new Metadata(documentRecords, schemas, migrations, this.jobs, this.cursors);
    this.documentJobs = new DocumentJobs(documentRecords, schemas, migrations, this.jobs, this.cursors);
    this.tenantUsage = new TenantUsage({
      securityEnabled: config.securityEnabled, policies: this.policies, budgets: this.budgets, gate: this.gate,
      blobs: (tenant) => manifests.tenantUsage(tenant),
      documentBytes: (tenant) => this.documents.retainedBytes(tenant),
      stagedBytes: (tenant) => this.stagedBytes(tenant),
    });
    // The tenant's S3 objects' counts (engine/s3/blob-refs.ts): a blob they name is not deleted through the blob API.
    this.blobs = new Blobs({ manifests, blocks, cursors: this.cursors, pool, stats: this.stats, log, names: new BlobRefs(units, () => this.clock.now()), now: () => this.clock.now() });
    this.s3 = new S3Service({
      units, clock: this.clock, region: config.s3Api.region, manifests, blobs: this.blobs, ingests: this.ingests, log,
      multipart: (index) => new MultipartUploads({
        index, units, startIngest: (options) => this.ingests.start(options), gate: this.gate, manifests,
        readBlock: (hex, size) => blocks.read(hex, size), readRange: (manifest, start, end) => this.reader.range(manifest, start, end), stats: this.stats, log, clock: this.clock, tenantBlobs: config.securityEnabled,
        config: { ttlMs: config.uploads.ttlMs, cleanupIntervalMs: config.uploads.cleanupIntervalMs },
      }),
    });
    this.legacyImports = new LegacyImports(units, this.legacy, this.documents, this.jobs, log);
    this.tokens = tokens;
    this.models = new ModelService(config.model, backend.models, config.fsRoot, modelRoots, pool, log);
    // Every reference to blocks outside published manifests: resumable sessions, document content.
    this.views = new ViewService(units, this.jobs, {
      contentOf: (key) => this.documents.contentManifest(key),
      reader: this.reader,
      startIngest: (options) => this.ingests.start(options),
      maxInputBytes: config.views.maxInputBytes,
    });
    this.workflows = new WorkflowService(units, this.jobs, this.documents, this.documentMetadata, this.views);
    this.bulkMigrations = new BulkMigrations(units, this.jobs, this.documentJobs, documentRecords.metaIndex);
    const roots: BlockRoots[] = [this.uploads.blockRoots(), this.documents.blockRoots(), this.views.blockRoots(), this.s3.blockRoots(), this.s3.multipart.blockRoots()];
    this.gc = collectorFor(backend, {
      config: config.gc, roots, log, nodeId: this.nodeId, address: () => this.liveNodes.address, nodeTtlMs: config.nodeTtlMs, summary: () => ({ ...nodeSummary(this) }),
    });
    this.cluster = new ClusterNodes({
      catalog: backend.shared?.gc, nodeId: this.nodeId, address: () => this.liveNodes.address, nodeTtlMs: config.nodeTtlMs, log,
      documents: backend.documents, documentsLeaseMs: config.documentsLeaseMs,
    });
  }

  static async open(config: Config, log: Logger): Promise<Engine> {
    // Before anything is opened: a legacy root that does not exist stops the start (ConfigError).
    const legacyRoots = LegacyRepositories.check(config.legacyRepos, log);
    // Likewise a model root (SVC_MODEL_ROOTS); the default one is made.
    const modelRoots = BundleRoots.check(config.model);
    fs.mkdirSync(config.fsRoot, { recursive: true });
    // Before anything touches the directory: a second process must not clean up the first one's files.
    const lock = lockDataDir(config.fsRoot);
    const catalog = CatalogEnv.open(config.fsRoot, config.durability);
    const backend = await openBlobBackend(config, catalog, config.nodeId || nodeIdOf(config.fsRoot), log);
    if (backend.removedTempFiles > 0) log.info('removed temporary files of interrupted uploads', { count: backend.removedTempFiles });
    const tokens = await TokenVerifier.open(config.auth, backend.devSecret, log, config.securityEnabled);
    const pool = createWorkerPool({ filename: WORKER_MODULE, minThreads: config.workers, maxThreads: config.workers, idleTimeout: 60_000 });
    const memory = new TransferMemory(config.ingestBufferBytes, config.segmentBytes);
    const pairHashing = config.nativeSha256 === 'auto' && loadSha256Pair() !== null;
    if (config.nativeSha256 === 'auto' && !pairHashing) log.info('native SHA-256 pair unavailable: blocks are hashed by the worker threads', { reason: sha256PairUnavailableReason() });
    const scanner = new StreamScanner(SCANNER_MODULE, memory.arena, pairHashing);
    const engine = new Engine(config, log, catalog, backend, pool, memory, scanner, lock, legacyRoots, modelRoots, tokens);
    // Before any unit is written: a catalog of a newer schema stops the start (exit 2, one line).
    const schema = await openCatalogSchema(engine.units).catch((err: unknown) => {
      throw err instanceof CatalogSchemaTooNew ? new StartRefused(backend.kind === 'pg-s3' ? 'SVC_PG_URL' : 'SVC_FS_ROOT', err.message) : err;
    });
    if (schema.from !== schema.to) log.info('catalog: schema version raised', schema);
    // Expired and interrupted sessions: cleaned up now, then every interval.
    await engine.uploads.start();
    const cursorKey = await engine.cursors.load();
    if (cursorKey.created) log.info('generated the key that seals list and search cursors', { keptIn: cursorKey.location });
    await engine.documents.open();
    const kept = await engine.workflows.registerSchemas();
    if (kept.length > 0) log.warn('workflows: schemas registered earlier with other bodies are kept; workflow entries that do not fit them are quarantined', { schemas: kept });
    await engine.models.start();
    await engine.models.reportRefusedRegistrations();
    engine.jobs.start();
    engine.idempotency.start((err) => log.warn('idempotency: a sweep of expired keys failed', { err: String(err) }));
    if (backend.shared) {
      engine.clusterShare.start();
      // The health this node tells the others at its heartbeats (NodeSummary): probed every 5 s.
      engine.health.startProbe();
    }
    engine.gc.start();
    await engine.s3.start();
    engine.traffic.start();
    return engine;
  }

  /** What a tenant's open uploads reserve of its quota: sessions (tus, contract) and S3 multipart uploads' parts, `except` one of them. */
  private async stagedBytes(tenant: string, except?: string): Promise<number> {
    const [sessions, parts] = await Promise.all([this.uploads.stagedBytes(tenant, except), this.s3.multipart.stagedBytes(tenant, except)]);
    return sessions + parts;
  }

  /** What every ingest is given: made at the first ingest (Ingests keeps it). */
  private makeIngestDeps(): IngestDeps {
    const { config, pool, scanner, memory, manifests, stats, log } = this;
    return {
      config, spillDir: this.blocks.scratchDir, blockStore: this.blocks.location, pool, scanner, memory, manifests, stats, log, reclaim: (blocks) => this.gc.reclaim(blocks),
      local: this.blocks.location.kind === 's3' ? localStores(this.blocks) : undefined,
      // An unlisted ingest's record stays in this node's data directory: with a shared catalog, a root only it can mark.
      // Unlisted content is recorded by the document platform: a root only this node can mark
      // unless the units are shared (pg-s3), where every node's GC run reads them.
      holdRoots: this.backend.shared && !this.units.shared ? () => this.gc.holdRoots() : undefined,
    };
  }

  async close(): Promise<void> {
    this.traffic.stop();
    this.s3.stop();
    await this.models.close();
    await this.gc.stop();
    this.clusterShare.stop();
    this.health.stop();
    this.idempotency.stop();
    await this.jobs.stop();
    this.uploads.stop();
    await this.pool.destroy();
    await this.scanner.close();
    await this.backend.close();
    await this.catalog.close();
    this.lock.release();
  }
}
