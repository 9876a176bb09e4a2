import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Piscina } from 'piscina';
import type { VerifyTask, VerifyTaskResult } from './cas/index.js';
import { type ContentId, formatContentId } from './cas/index.js';
import { type IngestDeps, largestBlockBytes } from './cas/index.js';
import { Ingests } from './ingests/index.js';

import { BlobReader } from './cas/index.js';
import { TransferMemory } from './cas/index.js';
import { loadSha256Pair, sha256PairUnavailableReason } from './cas/index.js';
import { StreamScanner } from './cas/index.js';
import type { Config, LegacyRepoConfig } from './config.js';
import { blobNotFound, invalidPagination, verificationFailure } from './errors.js';
import { type Collector, GarbageCollector, SharedCollector } from './gc/index.js';
import { JobQueue } from './jobs/index.js';
import type { Logger } from './log.js';
import { type HealthCheck, Metrics, Stats, type TenantUsageRow } from './ops/index.js';
import { CursorSeal, type Principal, TokenVerifier } from './auth/index.js';
import { BulkMigrations, DocumentService } from './documents/index.js';
import { MigrationRegistry } from './documents/index.js';
import { SchemaRegistry } from './documents/index.js';
import { BundleRoots, ModelService } from './models/index.js';
import { ClusterNodes, TrafficHistory, nodeIdOf, nodeSummary } from './ops/index.js';
import { type LiveNode, ownerOf } from './locality/index.js';
import { ViewService } from './views/index.js';
import { WorkflowService } from './workflows/index.js';
import { IdempotencyKeys } from './idempotency/index.js';
import { type BlobBackend, type BlobCatalog, type BlobSummary, type BlockStore, CatalogEnv, type DataDirLock, DiskSpace, FsTailStaging, DEFAULT_TENANT, InvalidCursorError, FileDevSecretStore, UnitSecretStore, KeyedCatalog, LmdbGcCatalog, LmdbModelRegistry, LmdbUnitStore, type UnitStore, LmdbUploadCatalog, type Manifest, lockDataDir, openBlobBackend, CatalogSchemaTooNew, StartRefused, openCatalogSchema } from './store/index.js';
import type { BlockRoots } from './cas/index.js';
import { type Clock, systemClock } from './base/clock.js';
import { CLOCK_SKEW_WARN_MS } from './base/limits.js';
import { BufferPool } from './uploads/index.js';
import { Uploads } from './uploads/index.js';
import { createWorkerPool } from './worker-pool.js';
import { type BudgetUsage, Budgets, ClusterShareTracker, SINGLE_NODE, type ShareScope, TenantGate, TenantPolicies } from './tenancy/index.js';
import { LegacyImports, LegacyRepositories } from './legacy/index.js';

const WORKER_MODULE = fileURLToPath(new URL('../workers/ingest.js', import.meta.url));
const SCANNER_MODULE = fileURLToPath(new URL('../workers/scanner.js', import.meta.url));

export type { HealthCheck };

/**
 * The composition root: one per process, built from the config and handed to the server. It builds
 * the whole object graph (blob store, uploads, jobs, documents, tokens, models, GC with every root)
 * and closes it. No HTTP here.
 */
/** A tenant's usage and limits (GET /api/v1/usage); a limit not configured is null. */
export interface TenantUsage {
  tenant: string;
  retainedBytes: number;
  /** What the tenant's open uploads reserve in its quota (declared lengths, else bytes received). */
  stagedBytes: number;
  objects: number;
  quotaBytes: number | null;
  maxObjectBytes: number | null;
  concurrency: BudgetUsage['concurrency'];
  budgets: { requests: BudgetUsage['requests']; bytes: BudgetUsage['bytes'] };
}

/** Tenants in the dashboard's usage table, and how long one reading of them serves the snapshots. */
const OPS_TENANTS = 50;
const OPS_TENANTS_MS = 5000;

/** The blob contract (interface.md, errors) answers a malformed cursor 400 invalid_pagination. */
const BLOB_CURSORS = { malformed: invalidPagination };

const NO_RATE = { remaining: null, limit: null, resetsAt: null };
const NO_BUDGETS: BudgetUsage = { concurrency: { inUse: null, queued: null, limit: null }, requests: NO_RATE, bytes: NO_RATE };

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
  /** The document platform: documents, versions, metadata, schemas, migrations. */
  readonly documents: DocumentService;
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
  /** Where this node's blob API listens (host:port), once it does; other nodes read it from the heartbeats. */
  private address = '';
  private liveNodesRead?: { at: number; ids: Promise<ReadonlySet<string>> };

  /** The blob API listens at `address`. */
  listening(address: string): void {
    this.address = address;
    this.gc.announce();
  }
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
    this.clock = backend.clock ?? systemClock;
    const { manifests, blocks } = this;
    this.traffic = new TrafficHistory(this.stats, config.opsRefreshMs);
    this.metrics = new Metrics(this);
    this.legacy = new LegacyRepositories(legacyRoots, this.metrics.registry, log);
    this.reader = new BlobReader(manifests, blocks, config.blockCacheBytes, this.stats, log, this.memory);
    this.space = new DiskSpace(config.fsRoot, config.minFreeSpace);
    this.policies = TenantPolicies.open(config.tenantPolicyFile, log);
    // A tenant policy's figures hold for the cluster: this node enforces its share of them.
    this.clusterShare = new ClusterShareTracker(this.nodeId, () => this.liveNodeIds());
    // On s3 one node serves the document platform (the holder of the documents lease): it enforces the whole figures for /v1.
    const share = (scope: ShareScope) => (scope === 'documents' && this.backend.kind === 's3' ? SINGLE_NODE : this.clusterShare.get());
    this.budgets = new Budgets(this.policies, () => this.memory.queued === 0, share, config.tenantQueueWaitMs);
    // What the tenant holds is read only for a tenant with a quota, by then every service is built.
    this.gate = new TenantGate(config.securityEnabled, this.policies, this.budgets, {
      blobs: (tenant) => manifests.retainedBytes(tenant),
      documents: (tenant) => this.documents.retainedBytes(tenant),
      staged: (tenant, except) => this.uploads.stagedBytes(tenant, except),
    });
    this.ingests = new Ingests({ ingestDeps: () => this.makeIngestDeps(), gc: () => this.gc, space: this.space, gate: this.gate });
    this.uploads = new Uploads({
      config: config.uploads,
      ledger: backend.sessions?.catalog ?? new LmdbUploadCatalog(catalog),
      staging: backend.sessions?.staging ?? new FsTailStaging(config.fsRoot, config.durability),
      nodeId: this.nodeId,
      liveNodes: backend.sessions ? () => this.liveNodeIds() : undefined,
      clock: this.clock,
      tailBuffers: tailBufferPool(config),
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
    const units: UnitStore = backend.units ?? new LmdbUnitStore(catalog);
    this.units = units;
    this.idempotency = new IdempotencyKeys(units, config.idempotencyTtlMs, () => this.clock.now());
    // Kept where every node reads it: a cursor one node gave opens on any other, and after a restart.
    this.cursors = new CursorSeal(backend.cursorKey ?? new UnitSecretStore(units, 'cursor-key'));
    this.jobs = new JobQueue({ store: units, pool, config: config.jobs, log, node: this.nodeId, clock: this.clock });
    const schemas = new SchemaRegistry(new KeyedCatalog(units, 'schemas'), units, this.cursors);
    this.documents = new DocumentService(units, schemas, new MigrationRegistry(new KeyedCatalog(units, 'migrations'), schemas), this.jobs, (options) => this.ingests.start(options), {
      limits: (tenant) => this.tenantLimits(tenant),
      admitContent: (caller, declaredLength) => this.gate.content(caller, declaredLength),
      maxMetadataEntryBytes: config.maxMetadataEntryBytes,
      // What the quota counts beside document content: the tenant's blobs and its open uploads' reservations.
      blobBytes: async (tenant) => (await manifests.retainedBytes(tenant)) + (await this.uploads.stagedBytes(tenant)),
      isViewOf: (tenant, key, contents) => this.views.isViewOf(tenant, key, contents),
    }, this.cursors);
    this.legacyImports = new LegacyImports(units, this.legacy, this.documents, this.jobs, log);
    this.tokens = tokens;
    this.models = new ModelService(config.model, backend.models ?? new LmdbModelRegistry(catalog), config.fsRoot, modelRoots, pool, log);
    // Every reference to blocks outside published manifests: resumable sessions, document content.
    this.views = new ViewService(units, this.jobs, {
      contentOf: (key) => this.documents.contentManifest(key),
      reader: this.reader,
      startIngest: (options) => this.ingests.start(options),
      maxInputBytes: config.views.maxInputBytes,
    });
    this.workflows = new WorkflowService(units, this.jobs, this.documents, this.views);
    this.bulkMigrations = new BulkMigrations(units, this.jobs, this.documents, this.documents.metaIndex);
    const roots: BlockRoots[] = [this.uploads.blockRoots(), this.documents.blockRoots(), this.views.blockRoots()];
    if (backend.embedded) {
      this.gc = new GarbageCollector({ config: config.gc, catalog: new LmdbGcCatalog(catalog), manifests: backend.embedded.manifests, blocks: backend.embedded.blocks, roots, log });
    } else if (backend.shared) {
      this.gc = new SharedCollector({ config: config.gc, catalog: backend.shared.gc, blocks: backend.shared.blocks, roots, log, nodeId: this.nodeId, address: () => this.address, nodeTtlMs: config.nodeTtlMs, summary: () => ({ ...nodeSummary(this) }) });
    } else {
      throw new Error(`the ${backend.kind} backend has no garbage collector`);
    }
    this.cluster = new ClusterNodes({
      catalog: backend.shared?.gc, nodeId: this.nodeId, address: () => this.address, nodeTtlMs: config.nodeTtlMs, log,
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
    const tokens = await TokenVerifier.open(config.auth, backend.devSecret ?? new FileDevSecretStore(config.fsRoot), log, config.securityEnabled);
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
    // Shared sessions (pg-s3, s3) are any node's to clean up, on every interval. The backend's open
    // refused a bucket or a PostgreSQL that cannot be reached (StartRefused); one that stops
    // answering after that does not stop the start (readiness says so).
    const cleaned = await engine.uploads.cleanup().catch((err: unknown) => {
      if (!backend.sessions) throw err;
      log.warn('uploads: cleanup at start failed; the next interval tries again', { err: String(err) });
      return { expired: 0, recovered: 0, removed: 0 };
    });
    if (cleaned.expired || cleaned.recovered || cleaned.removed) log.info('uploads: cleanup at start', cleaned);
    engine.uploads.startCleanup();
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
      engine.healthProbe = setInterval(() => void engine.readiness().catch(() => {}), 5000);
      engine.healthProbe.unref();
      void engine.readiness().catch(() => {});
    }
    engine.gc.start();
    engine.traffic.start();
    return engine;
  }

  /** The tenant's storage limits (SVC_TENANT_POLICY_FILE), applied with security on; none with it off. */
  tenantLimits(tenant: string): { maxObjectBytes?: number; quotaBytes?: number } {
    return this.gate.limits(tenant);
  }

  /**
   * What `tenant` stores and may still do (GET /api/v1/usage): its retained bytes (blobs and
   * document content, as its quota counts them), its blobs, its limits and, for `subject` (the
   * caller), the budgets left. With security off no policy applies: every limit is null.
   */
  async usage(tenant: string, subject?: string): Promise<TenantUsage> {
    const [blobs, documentBytes, stagedBytes] = await Promise.all([this.manifests.tenantUsage(tenant), this.documents.retainedBytes(tenant), this.uploads.stagedBytes(tenant)]);
    const { maxObjectBytes, quotaBytes } = this.tenantLimits(tenant);
    const budgets = this.config.securityEnabled && subject !== undefined ? this.budgets.usage(tenant, subject) : NO_BUDGETS;
    return {
      tenant,
      retainedBytes: blobs.bytes + documentBytes,
      stagedBytes,
      objects: blobs.objects,
      quotaBytes: quotaBytes ?? null,
      maxObjectBytes: maxObjectBytes ?? null,
      concurrency: budgets.concurrency,
      budgets: { requests: budgets.requests, bytes: budgets.bytes },
    };
  }

  /**
   * The dashboard's table: the usage of the tenants named in the tenant policy (with security off,
   * the default tenant's), at most OPS_TENANTS of them, the largest first; at most OPS_TENANTS_MS old.
   */
  tenantsUsage(): Promise<TenantUsageRow[]> {
    // Read at most every OPS_TENANTS_MS, however often snapshots are built: each row counts the tenant's blobs.
    const now = Date.now();
    if (this.tenantsRead && now - this.tenantsRead.at < OPS_TENANTS_MS) return this.tenantsRead.rows;
    const names = this.config.securityEnabled ? this.policies.named().slice(0, OPS_TENANTS) : [DEFAULT_TENANT];
    const rows = Promise.all(names.map(async (tenant) => {
      const u = await this.usage(tenant);
      return { tenant, retainedBytes: u.retainedBytes, objects: u.objects, quotaBytes: u.quotaBytes };
    })).then((read) => read.sort((a, b) => b.retainedBytes - a.retainedBytes || (a.tenant < b.tenant ? -1 : 1)));
    this.tenantsRead = { at: now, rows };
    rows.catch(() => {
      if (this.tenantsRead?.rows === rows) this.tenantsRead = undefined;
    });
    return rows;
  }

  private tenantsRead?: { at: number; rows: Promise<TenantUsageRow[]> };

  /** What every ingest is given: made at the first ingest (Ingests keeps it). */
  private makeIngestDeps(): IngestDeps {
    const { config, pool, scanner, memory, manifests, stats, log } = this;
    return {
      config, spillDir: this.blocks.scratchDir, blockStore: this.blocks.location, pool, scanner, memory, manifests, stats, log, reclaim: (blocks) => this.gc.reclaim(blocks),
      // An unlisted ingest's record stays in this node's data directory: with a shared catalog, a root only it can mark.
      // Unlisted content is recorded by the document platform: a root only this node can mark
      // unless the units are shared (pg-s3), where every node's GC run reads them.
      holdRoots: this.backend.shared && !this.units.shared ? () => this.gc.holdRoots() : undefined,
    };
  }

  /** The tenant's blob (another tenant's, or none: 404 blob_not_found alike). */
  manifest(id: ContentId, tenant = DEFAULT_TENANT): Manifest | Promise<Manifest> {
    const key = formatContentId(id.hex, id.size);
    const found = (m: Manifest | undefined): Manifest => {
      if (!m) throw blobNotFound(key);
      return m;
    };
    const m = this.manifests.get(key, tenant);
    return m instanceof Promise ? m.then(found) : found(m);
  }

  /**
   * GET /api/v1/blobs: the caller's tenant's blobs. The catalog's position (a sequence number, or
   * an S3 key) travels sealed for this caller; a token not even shaped like a cursor is the blob
   * contract's 400 invalid_pagination, one that does not open 400 invalid_cursor.
   */
  async list(limit: number, cursor?: string, principal?: Principal): Promise<{ blobs: BlobSummary[]; nextCursor?: string }> {
    const cursors = this.cursors.of('blobs', principal, BLOB_CURSORS);
    const after = cursors.open(null, cursor);
    let page;
    try {
      page = await this.manifests.page(limit, after, principal?.tenant ?? DEFAULT_TENANT);
    } catch (err) {
      if (err instanceof InvalidCursorError) throw invalidPagination(err.message);
      throw err;
    }
    return { blobs: page.summaries, nextCursor: page.next === undefined ? undefined : cursors.seal(null, page.next) };
  }

  /** GET /api/v1/blobs/{id}/metadata: the blob's blocks a page at a time; a cursor is bound to the blob and the caller. */
  async metadata(id: ContentId, limit: number, cursor?: string, principal?: Principal) {
    const m = await this.manifest(id, principal?.tenant ?? DEFAULT_TENANT);
    const cursors = this.cursors.of('blocks', principal, BLOB_CURSORS);
    let from = 0;
    const position = cursors.open(m.id, cursor);
    if (position !== undefined) {
      from = Number(position);
      if (!/^[0-9]{1,16}$/.test(position) || from >= m.blockCount) throw invalidPagination('cursor does not belong to this blob');
    }
    const to = Math.min(m.blockCount, from + limit);
    const blocks = [];
    for (let i = from; i < to; i++) {
      const b = m.block(i);
      blocks.push({ index: i, contentId: formatContentId(b.hex, b.size), offset: b.offset, size: b.size });
    }
    return { summary: m.summary(), blocks, nextCursor: to < m.blockCount ? cursors.seal(m.id, String(to)) : undefined };
  }

  async verify(id: ContentId, tenant = DEFAULT_TENANT): Promise<{ id: string; verified: boolean; bytesChecked: number }> {
    const m = await this.manifest(id, tenant);
    if (m.record.inline) {
      // At most SVC_INLINE_MAX_BYTES (64 KiB): hashing here is cheaper than a worker hop.
      const bytes = await this.manifests.inlineBytes(m.id);
      if (!bytes) throw verificationFailure();
      const verified = createHash('sha256').update(bytes).digest('hex') === id.hex && bytes.length === id.size;
      if (!verified) this.stats.recordCorrupt(m.id);
      return { id: m.id, verified, bytesChecked: bytes.length };
    }
    const blocks = [];
    for (let i = 0; i < m.blockCount; i++) {
      const b = m.block(i);
      blocks.push({ hex: b.hex, size: b.size });
    }
    let result: VerifyTaskResult;
    try {
      const task: VerifyTask = { store: this.blocks.location, blocks, expectedHex: id.hex };
      result = await this.pool.run(task, { name: 'verify' });
    } catch (err) {
      this.log.error('verify: persisted bytes could not be read', { blob: m.id, err: String(err) });
      throw verificationFailure();
    }
    for (const c of result.corruptBlocks) this.stats.recordCorrupt(c);
    return { id: m.id, verified: result.digestHex === id.hex && result.bytesRead === id.size, bytesChecked: result.bytesRead };
  }

  async delete(id: ContentId, tenant = DEFAULT_TENANT): Promise<void> {
    const key = formatContentId(id.hex, id.size);
    if (!(await this.manifests.remove(key, tenant))) throw blobNotFound(key);
  }

  /** The nodes that share this node's catalog, seen within SVC_NODE_TTL (none with an embedded backend). */
  /** The ids of the nodes seen within SVC_NODE_TTL, read at most once a second (the leases of shared sessions ask on every part). */
  private liveNodeIds(): Promise<ReadonlySet<string>> {
    const now = Date.now();
    if (!this.liveNodesRead || now - this.liveNodesRead.at > 1000) {
      const ids = this.nodes().then((nodes) => new Set(nodes.map((n) => n.nodeId)));
      ids.catch(() => (this.liveNodesRead = undefined));
      this.liveNodesRead = { at: now, ids };
    }
    return this.liveNodesRead.ids;
  }

  async nodes(): Promise<Array<{ nodeId: string; lastSeenAt: string; address: string }>> {
    if (!this.backend.shared) return [];
    const nodes = await this.backend.shared.gc.nodes(this.config.nodeTtlMs);
    return nodes.map((n) => ({ nodeId: n.nodeId, lastSeenAt: new Date(n.lastSeenAt).toISOString(), address: n.address }));
  }

  /**
   * The owner of a session-localized upload (SVC_LOCALITY): among the live nodes sharing the
   * catalog that announced an address, this one included; this node when it shares with none.
   */
  async localityOwner(tenant: string, session: string): Promise<LiveNode & { self: boolean }> {
    const live = (await this.nodes()).filter((n) => n.address !== '');
    if (!live.some((n) => n.nodeId === this.nodeId)) live.push({ nodeId: this.nodeId, address: this.address, lastSeenAt: '' });
    const owner = ownerOf(tenant, session, live)!;
    return { nodeId: owner.nodeId, address: owner.address, self: owner.nodeId === this.nodeId };
  }

  /** Readiness: each of the backend's dependencies (catalog and block store), each bounded by the health timeout. */
  async readiness(): Promise<HealthCheck[]> {
    const checks = await Promise.all(this.backend.dependencies.map((d) => this.check(d.name, () => d.probe())));
    this.lastReadiness = { at: Date.now(), failed: checks.filter((c) => c.status !== 'ok').map((c) => c.name) };
    return checks;
  }

  /** The last readiness checks' outcome (the heartbeat's summary; with a shared catalog probed every 5 s). */
  lastReadiness?: { at: number; failed: string[] };
  private healthProbe?: NodeJS.Timeout;

  /** Free space against SVC_MIN_FREE_SPACE: `warn` below it (uploads are refused, reads go on). */
  spaceCheck(): Omit<HealthCheck, 'status'> & { status: 'ok' | 'warn' } {
    const started = performance.now();
    const shortage = this.space.shortage();
    const latencyMs = round(performance.now() - started);
    return shortage ? { name: 'diskSpace', status: 'warn', latencyMs, detail: `${shortage}: uploads are refused (507)` } : { name: 'diskSpace', status: 'ok', latencyMs };
  }

  /**
   * On pg-s3, this node's clock against the database's, which judges leases, retries and expiry:
   * `warn` (readiness: degraded) past CLOCK_SKEW_WARN_MS, naming the offset; undefined elsewhere.
   */
  clockCheck(): (Omit<HealthCheck, 'status'> & { status: 'ok' | 'warn'; offsetMs: number }) | undefined {
    const offset = this.backend.clock?.offsetMs();
    if (offset === undefined) return undefined;
    const offsetMs = Math.round(offset);
    const seconds = `${(Math.abs(offset) / 1000).toFixed(1)} s`;
    const uncertainty = `±${((this.backend.clock!.roundTripMs() ?? 0) / 2).toFixed(1)} ms`;
    if (Math.abs(offset) <= CLOCK_SKEW_WARN_MS) return { name: 'clock', status: 'ok', latencyMs: 0, offsetMs, detail: `this node's clock is within ${seconds} of PostgreSQL's (${uncertainty})` };
    return {
      name: 'clock', status: 'warn', latencyMs: 0, offsetMs,
      detail: `this node's clock is ${seconds} ${offset > 0 ? 'ahead of' : 'behind'} PostgreSQL's (more than ${CLOCK_SKEW_WARN_MS / 1000} s): leases, retries and expiry follow PostgreSQL's clock, but this node's logs and tokens do not; repair its time synchronization`,
    };
  }

  private async check(name: string, probe: () => Promise<void>): Promise<HealthCheck> {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${this.config.healthTimeoutMs} ms`)), this.config.healthTimeoutMs);
    });
    try {
      await Promise.race([probe(), timeout]);
      return { name, status: 'ok', latencyMs: round(performance.now() - started) };
    } catch (err) {
      return { name, status: 'failed', latencyMs: round(performance.now() - started), detail: (err as Error).message };
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    this.traffic.stop();
    await this.models.close();
    await this.gc.stop();
    this.clusterShare.stop();
    clearInterval(this.healthProbe);
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

/**
 * Buffers of a maximal block (a drained part's tail, the one read most); larger tails, which parts
 * answered early leave, get buffers of their own. About 16 MiB stay pooled (at least two).
 */
function tailBufferPool(config: Config): BufferPool {
  const capacity = largestBlockBytes(config);
  return new BufferPool(capacity, Math.max(2, Math.floor((16 * 1024 * 1024) / capacity)));
}

const round = (ms: number) => Math.round(ms * 1000) / 1000;
