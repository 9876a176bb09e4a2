import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { formatBytes } from '../base/bytes.js';
import type { HealthCheck, OpsSource, TenantUsageRow } from './source.js';
import type { NodeView } from './nodes.js';
import { floorInBytes } from '../store/index.js';

// The operator snapshot (decisions.md, "Ops snapshot"): one typed document of the live state of
// this process, built from the engine, with no tenant ids and no payload bytes. No HTTP here:
// server/ops-api.ts serves it as JSON and as server-sent events.

type OpsStatus = 'Ready' | 'Degraded' | 'Unavailable';
/** `failed` makes the service Unavailable (only for the catalog and the block store), `warn` Degraded. */
type CheckStatus = 'ok' | 'warn' | 'failed';

interface OpsCheck {
  id: string;
  status: CheckStatus;
  detail: string;
}

interface OpsDependency {
  kind: 'catalog' | 'blockStore' | 'postgres' | 's3';
  status: 'ok' | 'failed';
  latencyMs: number;
}

export interface OpsSnapshot {
  /** Increases by one whenever anything below but `observedAt` changes. */
  sequence: number;
  /** ISO 8601, when the state was read. */
  observedAt: string;
  status: OpsStatus;
  summary: string;
  checks: OpsCheck[];
  /** `minFreeBytes`: SVC_MIN_FREE_SPACE in bytes (uploads are refused while `availableBytes` is below it). */
  storage: { backend: string; usedBytes: number; availableBytes: number; minFreeBytes: number; blobs: number; blocks: number; quarantinedBlocks: number };
  /** `nodes`: the nodes sharing the catalog, seen within SVC_NODE_TTL (pg-s3); empty with an embedded backend. */
  placement: { mode: 'single-node' | 'multi-node'; nodeId: string; nodes: Array<{ nodeId: string; lastSeenAt: string; address: string }> };
  capacity: {
    workerPool: { threads: number; queued: number; running: number };
    transfersInFlight: number;
    bufferedBytes: number;
    limitBytes: number;
  };
  durability: { mode: string; corruptBlocksDetected: number; lastGc?: unknown };
  dependencies: OpsDependency[];
  /** Tenants' usage (the tenants named in the tenant policy; with security off, the default tenant), largest first. */
  tenants: TenantUsageRow[];
  traffic: {
    requests: number;
    errors: number;
    bytesIngested: number;
    bytesServed: number;
    freshBlocks: number;
    duplicateBlocks: number;
    byteReusePercent: number;
  };
  /**
   * With a shared catalog (pg-s3, s3): every node it knows, live or down, each with what it said of
   * itself at its last heartbeat (this node: now), and the totals of the live ones.
   */
  cluster?: {
    nodes: Array<{ nodeId: string; address: string; state: 'live' | 'down'; lastSeenAt: string; self: boolean; health: NodeSummary['health']; traffic?: NodeSummary['traffic']; capacity?: NodeSummary['capacity'] }>;
    totals: { nodes: number; liveNodes: number; requests: number; errors: number; bytesIngested: number; bytesServed: number; transfersInFlight: number; workerThreads: number };
  };
}

/** What a node says of itself at each heartbeat (engine/gc/shared-collector.ts): the other nodes' snapshots show it. */
export interface NodeSummary {
  at: string;
  /** From its last readiness checks (a snapshot, a readiness request): `ok`, the dependencies that failed, or `unknown` before any. */
  health: 'ok' | 'unknown' | { failed: string[] };
  traffic: { requests: number; errors: number; bytesIngested: number; bytesServed: number };
  capacity: { workerThreads: number; running: number; queued: number; transfersInFlight: number; bufferedBytes: number; limitBytes: number };
}

export function nodeSummary(engine: OpsSource): NodeSummary {
  const { stats, pool, memory } = engine;
  const { lastReadiness } = engine.health;
  const threads = pool.threads.length;
  return {
    at: new Date().toISOString(),
    health: !lastReadiness ? 'unknown' : lastReadiness.failed.length === 0 ? 'ok' : { failed: lastReadiness.failed },
    traffic: { requests: stats.requests, errors: stats.errors, bytesIngested: stats.bytesIngested, bytesServed: stats.bytesServed },
    capacity: { workerThreads: threads, running: Math.max(0, threads - pool.idleThreads), queued: pool.queueSize, transfersInFlight: memory.transfers, bufferedBytes: memory.bufferedBytes, limitBytes: memory.limitBytes },
  };
}

/**
 * What the snapshot needs from garbage collection (engine/gc, built separately): the last run's
 * figures (any JSON value; absent before the first run) and, when known, the blocks in quarantine.
 */
export interface GcState {
  lastRun(): unknown | undefined;
  quarantinedBlocks?(): number;
}

interface SnapshotOptions {
  gc?: GcState;
  /** Reads the file system's figures (default: statfs of SVC_FS_ROOT); tests pass fixed ones. */
  statfs?: (fsRoot: string) => Promise<{ blocks: number; bfree: number; bavail: number; bsize: number }>;
}

const NODE_ID_FILE = 'node-id';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * This node's id: a UUID made at the first start and kept in `<SVC_FS_ROOT>/node-id`, so it
 * stays the same across restarts of the same data directory.
 */
export function nodeIdOf(fsRoot: string): string {
  const file = path.join(fsRoot, NODE_ID_FILE);
  try {
    const id = fs.readFileSync(file, 'utf8').trim();
    if (UUID.test(id)) return id;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const id = randomUUID();
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${id}\n`, { mode: 0o644 });
  fs.renameSync(tmp, file);
  return id;
}

/**
 * Builds snapshots and numbers them: `sequence` moves on only when the content changes, so equal
 * states read twice carry the same sequence.
 */
export class OpsSnapshots {
  readonly nodeId: string;
  private sequence = 0;
  private lastContent = '';
  private latest: OpsSnapshot | undefined;
  private inFlight: Promise<OpsSnapshot> | undefined;
  private gc: GcState | undefined;
  private readonly statfs: NonNullable<SnapshotOptions['statfs']>;

  constructor(
    private readonly engine: OpsSource,
    options: SnapshotOptions = {},
  ) {
    this.nodeId = engine.nodeId;
    this.gc = options.gc;
    this.statfs = options.statfs ?? ((root) => fs.promises.statfs(root));
  }

  /** Garbage collection may be set up after the snapshots; its state shows from the next build on. */
  setGc(gc: GcState | undefined): void {
    this.gc = gc;
  }

  /** The newest snapshot built, if any. */
  get current(): OpsSnapshot | undefined {
    return this.latest;
  }

  /** Reads the live state once. Concurrent callers share one build. */
  build(): Promise<OpsSnapshot> {
    this.inFlight ??= this.read().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async read(): Promise<OpsSnapshot> {
    const { engine } = this;
    const observedAt = new Date().toISOString();
    const [probes, space, counts, nodes, known, tenants] = await Promise.all([
      engine.health.readiness(),
      this.diskSpace(),
      this.counts(),
      engine.liveNodes.nodes().catch(() => []),
      engine.backend.shared ? engine.cluster.list().catch(() => undefined) : Promise.resolve(undefined),
      engine.tenantUsage.tenantsUsage().catch(() => []),
    ]);
    const stats = engine.stats;
    const pool = engine.pool;
    const threads = pool.threads.length;
    const gcRun = this.lastGc();
    const quarantinedBlocks = this.quarantined();
    const corrupt = stats.corruptBlocks.size;
    const memory = engine.memory;
    const blockBytes = stats.freshBytes + stats.duplicateBytes;

    const checks: OpsCheck[] = [];
    for (const p of probes) checks.push(probeCheck(p));
    const clock = engine.health.clockCheck();
    if (clock) checks.push({ id: 'clock', status: clock.status, detail: clock.detail ?? '' });
    const minFreeBytes = engine.config.minFreeSpace ? floorInBytes(engine.config.minFreeSpace, space.totalBytes) : 0;
    if (space.error) checks.push({ id: 'diskSpace', status: 'warn', detail: `file system not readable: ${space.error}` });
    else {
      const share = space.totalBytes > 0 ? space.availableBytes / space.totalBytes : 0;
      const below = space.availableBytes < minFreeBytes;
      checks.push({
        id: 'diskSpace',
        status: below ? 'warn' : 'ok',
        detail: `${formatBytes(space.availableBytes)} free of ${formatBytes(space.totalBytes)} (${(share * 100).toFixed(1)}%)${below ? `, below SVC_MIN_FREE_SPACE (${formatBytes(minFreeBytes)}): uploads are refused` : ''}`,
      });
    }
    if (counts.error) checks.push({ id: 'inventory', status: 'warn', detail: `counts not readable: ${counts.error}` });
    checks.push(
      corrupt === 0
        ? { id: 'integrity', status: 'ok', detail: 'no corrupt block detected since start' }
        : { id: 'integrity', status: 'warn', detail: `${corrupt} corrupt block${corrupt === 1 ? '' : 's'} detected since start` },
    );
    // A GC run held back by root holders that are down: the operator has something to do.
    const heldBack = (gcRun as { heldBack?: { reason?: unknown } } | undefined)?.heldBack?.reason;
    if (typeof heldBack === 'string') checks.push({ id: 'gc', status: 'warn', detail: `the last garbage collection run was held back: ${heldBack}` });
    checks.push(
      memory.queued === 0
        ? { id: 'transferMemory', status: 'ok', detail: `${formatBytes(memory.bufferedBytes)} of ${formatBytes(memory.limitBytes)} buffered` }
        : { id: 'transferMemory', status: 'warn', detail: `${memory.queued} upload${memory.queued === 1 ? '' : 's'} waiting for memory` },
    );

    const status: OpsStatus = checks.some((c) => c.status === 'failed') ? 'Unavailable' : checks.some((c) => c.status === 'warn') ? 'Degraded' : 'Ready';
    const summary =
      status === 'Ready'
        ? `Ready: ${counts.blobs} blob${counts.blobs === 1 ? '' : 's'} in ${counts.blocks} block${counts.blocks === 1 ? '' : 's'}, ${formatBytes(space.availableBytes)} free, ${memory.transfers} transfer${memory.transfers === 1 ? '' : 's'} in flight`
        : `${status}: ${checks
            .filter((c) => c.status !== 'ok')
            .map((c) => `${c.id} ${c.status === 'failed' ? 'failed' : 'warns'} (${c.detail})`)
            .join('; ')}`;

    const content: Omit<OpsSnapshot, 'sequence' | 'observedAt'> = {
      status,
      summary,
      checks,
      storage: {
        backend: engine.config.blobBackend,
        usedBytes: counts.storedBytes,
        availableBytes: space.availableBytes,
        minFreeBytes,
        blobs: counts.blobs,
        blocks: counts.blocks,
        quarantinedBlocks,
      },
      placement: { mode: nodes.length > 1 ? 'multi-node' : 'single-node', nodeId: this.nodeId, nodes },
      capacity: {
        workerPool: { threads, queued: pool.queueSize, running: Math.max(0, threads - pool.idleThreads) },
        transfersInFlight: memory.transfers,
        bufferedBytes: memory.bufferedBytes,
        limitBytes: memory.limitBytes,
      },
      durability: gcRun === undefined
        ? { mode: engine.config.durability, corruptBlocksDetected: corrupt }
        : { mode: engine.config.durability, corruptBlocksDetected: corrupt, lastGc: gcRun },
      dependencies: probes.map((p) => ({ kind: p.name as OpsDependency['kind'], status: p.status, latencyMs: Math.round(p.latencyMs * 10) / 10 })),
      tenants,
      traffic: {
        requests: stats.requests,
        errors: stats.errors,
        bytesIngested: stats.bytesIngested,
        bytesServed: stats.bytesServed,
        freshBlocks: stats.freshBlocks,
        duplicateBlocks: stats.duplicateBlocks,
        byteReusePercent: blockBytes === 0 ? 0 : Math.round((stats.duplicateBytes / blockBytes) * 10_000) / 100,
      },
      ...(known ? { cluster: clusterOf(known, nodeSummary(engine)) } : {}),
    };
    const key = JSON.stringify(content);
    if (key !== this.lastContent || this.sequence === 0) {
      this.sequence++;
      this.lastContent = key;
    }
    const snapshot: OpsSnapshot = { sequence: this.sequence, observedAt, ...content };
    this.latest = snapshot;
    return snapshot;
  }

  private async diskSpace(): Promise<{ usedBytes: number; availableBytes: number; totalBytes: number; error?: string }> {
    try {
      const s = await this.statfs(this.engine.config.fsRoot);
      const totalBytes = s.blocks * s.bsize;
      return { usedBytes: (s.blocks - s.bfree) * s.bsize, availableBytes: s.bavail * s.bsize, totalBytes };
    } catch (err) {
      return { usedBytes: 0, availableBytes: 0, totalBytes: 0, error: (err as NodeJS.ErrnoException).code ?? String(err) };
    }
  }

  private async counts(): Promise<{ blobs: number; blocks: number; storedBytes: number; error?: string }> {
    try {
      return await this.engine.manifests.totals();
    } catch (err) {
      return { blobs: 0, blocks: 0, storedBytes: 0, error: String((err as Error).message ?? err) };
    }
  }

  /** The GC's last run, kept only if it is plain JSON (it is sent as is). */
  private lastGc(): unknown {
    try {
      const run = this.gc?.lastRun();
      return run === undefined || run === null ? undefined : JSON.parse(JSON.stringify(run));
    } catch (err) {
      this.engine.log.warn('ops snapshot: the GC state could not be read', { err: String(err) });
      return undefined;
    }
  }

  private quarantined(): number {
    try {
      const n = this.gc?.quarantinedBlocks?.();
      return typeof n === 'number' && Number.isFinite(n) ? n : 0;
    } catch {
      return 0;
    }
  }
}

function probeCheck(p: HealthCheck): OpsCheck {
  const what = p.name === 'catalog' ? 'catalog (LMDB) read/write probe' : 'block store write access';
  return p.status === 'ok'
    ? { id: p.name, status: 'ok', detail: `${what} ok` }
    : { id: p.name, status: 'failed', detail: `${what} failed: ${p.detail ?? 'unknown error'}` };
}

/** The cluster section: each known node as its last heartbeat described it (this one as it is now), and the live ones' totals. */
function clusterOf(known: NodeView[], self: NodeSummary): NonNullable<OpsSnapshot['cluster']> {
  const nodes = known.map((n) => {
    const said = n.self ? self : (n.summary as NodeSummary | undefined);
    return {
      nodeId: n.nodeId, address: n.address, state: n.state, lastSeenAt: n.lastSeenAt, self: n.self,
      health: n.state === 'down' ? ('unknown' as const) : (said?.health ?? ('unknown' as const)),
      ...(said ? { traffic: said.traffic, capacity: said.capacity } : {}),
    };
  });
  const live = nodes.filter((n) => n.state === 'live');
  const sum = (read: (n: (typeof nodes)[number]) => number | undefined) => live.reduce((total, n) => total + (read(n) ?? 0), 0);
  return {
    nodes,
    totals: {
      nodes: nodes.length, liveNodes: live.length,
      requests: sum((n) => n.traffic?.requests), errors: sum((n) => n.traffic?.errors),
      bytesIngested: sum((n) => n.traffic?.bytesIngested), bytesServed: sum((n) => n.traffic?.bytesServed),
      transfersInFlight: sum((n) => n.capacity?.transfersInFlight), workerThreads: sum((n) => n.capacity?.workerThreads),
    },
  };
}
