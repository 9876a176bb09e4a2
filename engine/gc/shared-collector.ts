// Garbage collection of a shared catalog and a remote block store (pg-s3): one run at a time
// across nodes (the catalog's lock, released by a dead node's connection), mark in the catalog,
// quarantine by moving a block's bytes to another key, purge after the quarantine age.
//
// Why nothing referenced is ever deleted (docs/architecture.md, "Garbage collection of pg-s3"):
// - a block is quarantined only while live, unmarked and unreferenced since the minimum age; its
//   record is stamped only after its bytes moved, so an upload that found the block stored
//   started before the stamp;
// - a publication that references a quarantined block makes its record live again; its bytes
//   are read from quarantine meanwhile and moved back by the next run;
// - purge takes a record only if it was stamped before the fence (the start of the oldest open
//   upload of every live node, from their heartbeats) and is unmarked in this run;
// - the mark set holds every live node's roots: a run opens a marking epoch, each node seeing it
//   in its heartbeat adds the roots only it can read (its data directory's) and records that it
//   did, and candidates are chosen only once every node seen within SVC_NODE_TTL has;
// - a node whose data directory holds such roots is a root holder, recorded in the catalog before
//   its first such reference is kept (holdRoots) and known while it is down: a run in which any
//   root holder has not marked (down, so it cannot) quarantines and purges nothing and says why
//   (report.heldBack), until the node is back or an operator forgets it (svc nodes forget).
import type { BlockRoots } from '../cas/index.js';
import type { GcConfig } from '../base/config.js';
import { SvcError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { ClusterNode, KeyedBlock, MovableBlockStore, SharedGcCatalog } from '../store/index.js';
import type { Collector } from './collector.js';
import { type GcAgeOverrides, type GcPhase, type GcReport, type GcState, gcState, newReport } from './report.js';
import { type FencedIngest, IngestFence } from './ingest-fence.js';
import { GcSchedule } from './schedule.js';

const RUNS_KEPT = 50;
const BATCH = 1000;
/** Heartbeats come at least every 5 s, and at least three times per SVC_NODE_TTL. */
const HEARTBEAT_MS = 5000;
/** How long a run waits, beyond SVC_NODE_TTL, for live nodes to mark their roots before it gives up (taking nothing). */
const MARK_WAIT_MS = 60_000;
const MARK_POLL_MS = 100;

interface Deps {
  config: GcConfig;
  catalog: SharedGcCatalog;
  blocks: MovableBlockStore;
  /** Roots only this node can read (document content in its data directory, the blocks of staged tails it holds). */
  roots: readonly BlockRoots[];
  log: Logger;
  nodeId: string;
  /** Where this node's blob API listens (known once it does). */
  address: () => string;
  /** A node not seen for this long is gone (SVC_NODE_TTL). */
  nodeTtlMs: number;
  /** What this node says of itself at each heartbeat (engine/ops/snapshot.ts, nodeSummary). */
  summary?: () => Record<string, unknown>;
}

const gcRunning = () => new SvcError('conflict', 'gc_running', 'A garbage collection run is in progress on this or another node; see GET /api/ops/v1/gc');

export class SharedCollector implements Collector {
  private readonly fence: IngestFence;
  private current?: { report: GcReport; step: string; done: Promise<GcReport> };
  private last?: GcReport;
  private quarantined = 0;
  private readonly schedule: GcSchedule;
  private beats?: NodeJS.Timeout;
  private stopping = false;
  /** This node's latest pass adding its roots to a run's marks. */
  private marking?: { epoch: number; done: Promise<void> };
  /** This node's registration as a root holder in this process (undefined: not made, or failed). */
  private holding?: Promise<void>;
  /** Whether the roots found in the data directory at start were looked at (they are registered at a heartbeat). */
  private startRootsChecked = false;

  constructor(private readonly deps: Deps) {
    // A scheduled run that finds another in progress (here or on another node: 409) waits for the next interval.
    this.schedule = new GcSchedule(deps.config.intervalMs, () => (this.current ? Promise.resolve() : this.run('run', true, 'schedule').catch((err) => {
      if (!(err instanceof SvcError && err.code === 'gc_running')) throw err;
    })), deps.log);
    this.fence = new IngestFence(Math.min(60_000, deps.config.quarantineAgeMs), deps.log);
    deps.catalog.adoptRoots?.(deps.roots);
    deps.catalog.lastRun<GcReport>().then((r) => (this.last ??= r), () => {});
  }

  track<T extends FencedIngest>(ingest: T): T {
    return this.fence.track(ingest);
  }

  /** A failed upload's blocks stay until a run finds them unreferenced (another node's upload may have found them stored). */
  reclaim(): void {}

  lastRun(): GcReport | undefined {
    return this.last;
  }

  quarantinedBlocks(): number {
    return this.quarantined;
  }

  state(): GcState {
    // A failed upload's blocks are left for a run (see reclaim): none is reclaimed at once.
    return gcState(this.current, this.last, this.quarantined, this.deps.config, this.schedule, { blocks: 0, bytes: 0 });
  }


  announce(): void {
    this.beat();
  }

  holdRoots(): Promise<void> {
    if (!this.holding) {
      const { catalog, nodeId, log } = this.deps;
      const holding = catalog.registerRootHolder(nodeId).then(({ forgottenAt }) => {
        if (forgottenAt === undefined) return;
        log.error('gc: this node had been forgotten (svc nodes forget) and holds roots again: blocks its data directory referenced may have been collected meanwhile', {
          nodeId, forgottenAt: new Date(forgottenAt).toISOString(),
        });
      });
      holding.catch(() => {
        if (this.holding === holding) this.holding = undefined;
      });
      this.holding = holding;
    }
    return this.holding;
  }

  /**
   * At the first heartbeats, a data directory that already holds roots (written before this node
   * knew of root holders, or whose registration failed) registers them; later, a node that was
   * forgotten while it ran (its heartbeats had lapsed) registers again and says so.
   */
  private async keepHoldingRoots(): Promise<void> {
    const { catalog, nodeId, log } = this.deps;
    if (!this.holding) {
      if (this.startRootsChecked) return;
      if (await this.holdsPersistentRoots()) await this.holdRoots();
      this.startRootsChecked = true;
      return;
    }
    await this.holding;
    if (await catalog.isRootHolder(nodeId)) return;
    log.error('gc: this node was forgotten (svc nodes forget) while it ran; it registers its roots again, but blocks they reference may have been collected meanwhile', { nodeId });
    this.holding = undefined;
    await this.holdRoots();
  }

  private async holdsPersistentRoots(): Promise<boolean> {
    for (const root of this.deps.roots) {
      if (!root.persistent) continue;
      for await (const _ of root.digests()) return true;
    }
    return false;
  }

  /** A heartbeat: this node's address and its uploads' fence, for the other nodes' runs. */
  private beat(): void {
    const now = Date.now();
    const oldest = this.fence.oldestStart(now);
    this.deps.catalog
      .heartbeat(this.deps.nodeId, this.deps.address(), oldest < now ? now - oldest : null, this.deps.summary?.())
      .then(({ markEpoch }) => {
        // A run (on any node) is marking and has not got this node's roots yet.
        if (markEpoch !== undefined) this.markOwnRoots(markEpoch).catch((err) => this.deps.log.warn('gc: marking this node\'s roots failed (the next heartbeat retries)', { err: String(err) }));
        return this.keepHoldingRoots().catch((err) => this.deps.log.warn('gc: recording this node as a root holder failed (the next heartbeat retries)', { err: String(err) }));
      })
      .then(() => this.endListenersOfDownNodes())
      .then(() => this.deps.catalog.quarantinedCount())
      .then((n) => (this.quarantined = n))
      .catch((err) => this.deps.log.warn('gc: heartbeat failed', { err: String(err) }));
  }

  /** At each heartbeat: the LISTEN connections of nodes that went down, which would hold the notification queue (pg-s3). */
  private async endListenersOfDownNodes(): Promise<void> {
    const ended = await this.deps.catalog.endListenersOfDownNodes?.(this.deps.nodeTtlMs).catch((err: unknown) => {
      this.deps.log.warn('nodes: ending the LISTEN connections of down nodes failed (the next heartbeat retries)', { err: String(err) });
      return 0;
    });
    if (ended) this.deps.log.warn('nodes: ended the LISTEN connections of nodes whose heartbeat expired (they would hold PostgreSQL\'s notification queue)', { connections: ended });
  }

  /** Heartbeats (the fence other nodes' runs read) and the schedule (SVC_GC_INTERVAL). */
  start(): void {
    // The first heartbeat goes with the address (announce): one without it could land after.
    if (this.deps.address()) this.beat();
    this.beats = setInterval(() => this.beat(), Math.min(HEARTBEAT_MS, this.deps.nodeTtlMs / 3));
    this.beats.unref();
    this.schedule.start();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.schedule.stop();
    clearInterval(this.beats);
    await this.current?.done.catch(() => {});
  }

  run(phase: GcPhase, apply: boolean, trigger: 'api' | 'schedule' = 'api', ages: GcAgeOverrides = {}): Promise<GcReport> {
    if (this.current) return Promise.reject(gcRunning());
    if (this.stopping) return Promise.reject(new SvcError('unavailable', 'gc_stopped', 'The server is shutting down'));
    const report = newReport(phase, apply, trigger, ages);
    const current = { report, step: 'lock', done: undefined as unknown as Promise<GcReport> };
    this.current = current;
    current.done = this.locked(current, { minAgeMs: ages.minAgeMs ?? this.deps.config.minAgeMs, quarantineAgeMs: ages.quarantineAgeMs ?? this.deps.config.quarantineAgeMs }).finally(() => {
      this.current = undefined;
    });
    return current.done;
  }

  /** The run under the catalog's lock (409 gc_running when another node holds it). */
  private async locked(current: { report: GcReport; step: string }, ages: { minAgeMs: number; quarantineAgeMs: number }): Promise<GcReport> {
    const lock = await this.deps.catalog.lock();
    if (!lock) throw gcRunning();
    try {
      await this.execute(current, ages);
    } finally {
      await lock.release().catch((err) => this.deps.log.warn('gc: lock not released (its connection will)', { err: String(err) }));
    }
    return current.report;
  }

  private async execute(current: { report: GcReport; step: string }, ages: { minAgeMs: number; quarantineAgeMs: number }): Promise<void> {
    const { report } = current;
    const { catalog, log } = this.deps;
    log.info('gc: run started', { runId: report.runId, phase: report.phase, apply: report.apply, trigger: report.trigger });
    try {
      // Taken before marking, on the catalog's clock: uploads open now on any node hold the fence.
      const now = await catalog.now();
      const fence = await this.fenceAt(now);
      current.step = 'mark';
      await this.mark(current);
      // Marked blocks still go back from quarantine; nothing leaves the live area or is deleted.
      const held = report.heldBack !== undefined;
      if (held) log.warn('gc: quarantine and purge held back', { runId: report.runId, reason: report.heldBack!.reason, nodes: report.heldBack!.nodes });
      const before = now - ages.minAgeMs;
      if (report.phase !== 'purge' && !held) {
        current.step = report.phase === 'mark' ? 'count candidates' : 'quarantine';
        await this.quarantine(report, before, report.phase !== 'mark' && report.apply);
      }
      if (report.phase !== 'mark') {
        current.step = report.phase === 'quarantine' || held ? 'restore' : 'purge';
        await this.settle(report, Math.min(fence, now - ages.quarantineAgeMs), report.apply, report.phase !== 'quarantine' && !held);
      }
    } catch (err) {
      report.error = String((err as Error)?.message ?? err);
      log.error('gc: run failed', { runId: report.runId, err: String((err as Error)?.stack ?? err) });
    } finally {
      report.finishedAt = new Date().toISOString();
      report.quarantineBlocks = this.quarantined = await catalog.quarantinedCount().catch(() => this.quarantined);
      await catalog.saveRun(report.runId, report, RUNS_KEPT).catch((err) => log.error('gc: report not saved', { err: String(err) }));
      await catalog.clearMarks().catch(() => {});
      this.last = report;
    }
    log.info('gc: run finished', { ...report });
    if (report.error) throw new Error(report.error);
  }

  /** The oldest start of an open upload on this or any live node (catalog clock); `now` when none. */
  private async fenceAt(now: number): Promise<number> {
    const local = Date.now();
    const oldest = this.fence.oldestStart(local);
    let fence = now - (local - oldest);
    for (const node of await this.deps.catalog.nodes(this.deps.nodeTtlMs)) {
      if (node.nodeId !== this.deps.nodeId && node.oldestIngestAt !== null) fence = Math.min(fence, node.oldestIngestAt);
    }
    return fence;
  }

  /**
   * Manifests (and, in SQL, resumable sessions), then every live node's own roots (this one's, and
   * the others' through their heartbeats); root holders that did not mark (down) hold the run back.
   */
  private async mark(current: { report: GcReport; step: string }): Promise<void> {
    const { catalog, nodeId, nodeTtlMs } = this.deps;
    await catalog.markManifests();
    const epoch = await catalog.openMarking();
    try {
      await this.markOwnRoots(epoch);
      const deadline = Date.now() + nodeTtlMs + MARK_WAIT_MS;
      for (;;) {
        // A node that died stops beating: after SVC_NODE_TTL it is no longer waited for.
        const waiting = (await catalog.unmarkedNodes(epoch, nodeTtlMs)).filter((n) => n !== nodeId);
        if (waiting.length === 0) break;
        current.step = `mark (waiting for ${waiting.join(', ')})`;
        if (Date.now() > deadline) throw new Error(`gc: node(s) ${waiting.join(', ')} did not mark their roots in time; nothing was quarantined`);
        await new Promise((r) => setTimeout(r, MARK_POLL_MS));
      }
      // After the live nodes have marked: a root holder that has not is down (or came back just now).
      const unmarked = (await catalog.rootHoldersUnmarked(epoch, nodeTtlMs)).filter((n) => n.nodeId !== nodeId);
      if (unmarked.length > 0) current.report.heldBack = heldBack(unmarked);
    } finally {
      await catalog.closeMarking(epoch).catch(() => {});
    }
    current.report.markedBlocks = await catalog.markedCount();
  }

  /** Adds this node's own roots to the marks of `epoch` and records it; one pass at a time, none twice for one epoch. */
  private markOwnRoots(epoch: number): Promise<void> {
    const last = this.marking;
    if (last && last.epoch >= epoch) return last.done;
    const done = (last?.done ?? Promise.resolve()).catch(() => {}).then(async () => {
      for (const root of this.deps.roots) await this.markRoots(root);
      await this.deps.catalog.markedBy(this.deps.nodeId, epoch);
    });
    // A failed pass is tried again at the next heartbeat.
    done.catch(() => {
      if (this.marking?.done === done) this.marking = undefined;
    });
    this.marking = { epoch, done };
    return done;
  }

  private async markRoots(root: BlockRoots): Promise<void> {
    const { catalog } = this.deps;
    let batch: Buffer[] = [];
    for await (const digest of root.digests()) {
      batch.push(Buffer.from(digest));
      if (batch.length === BATCH) {
        await catalog.mark(batch);
        batch = [];
      }
    }
    await catalog.mark(batch);
  }

  /** Unreferenced records, then objects no record names (a failed upload's), go to quarantine. */
  private async quarantine(report: GcReport, before: number, apply: boolean): Promise<void> {
    const { catalog, blocks } = this.deps;
    let after: Buffer | undefined;
    for (;;) {
      const page = await catalog.candidates(before, BATCH, after);
      if (page.length === 0) break;
      after = page[page.length - 1]!.key;
      report.candidates += page.length;
      if (!apply) {
        count(report.quarantined, page);
        continue;
      }
      const changed = await catalog.beginQuarantine(page.map((b) => b.key), before);
      for (const b of changed) await blocks.quarantine(b.key.toString('hex'), b.size);
      await catalog.stampQuarantined(changed.map((b) => b.key));
      count(report.quarantined, changed);
    }
    let next: string | undefined;
    do {
      const page = await blocks.list('blocks', next);
      next = page.next;
      const old = page.blocks.filter((b) => b.lastModifiedMs < before);
      const keys = old.map((b) => Buffer.from(b.hex, 'hex'));
      const [states, marked] = await Promise.all([catalog.states(keys), catalog.markedAmong(keys)]);
      // Blocks no record names: a failed upload's, or a resumable session's not yet committed (marked).
      const unrecorded = old.filter((b) => !states.has(b.hex) && !marked.has(b.hex));
      report.candidates += unrecorded.length;
      for (const b of unrecorded) if (apply) await blocks.quarantine(b.hex, b.size);
      count(report.quarantined, unrecorded.map((b) => ({ key: Buffer.alloc(0), size: b.size })));
    } while (next);
  }

  /** Marked quarantined blocks come back; with `purge`, the rest stamped before `stampedBefore` go. */
  private async settle(report: GcReport, stampedBefore: number, apply: boolean, purge: boolean): Promise<void> {
    const { catalog, blocks } = this.deps;
    if (apply) {
      await catalog.stampQuarantined();
      for (;;) {
        const revived = await catalog.reviveMarked(BATCH);
        for (const b of revived) await blocks.restore(b.key.toString('hex'), b.size);
        report.restored += revived.length;
        if (revived.length < BATCH) break;
      }
    }
    if (purge && !apply) {
      const would = await catalog.countPurgeable(stampedBefore);
      report.purged.count += would.count;
      report.purged.bytes += would.bytes;
    }
    if (purge && apply) {
      for (;;) {
        const taken = await catalog.takePurgeable(stampedBefore, BATCH);
        for (const b of taken) await blocks.purge(b.key.toString('hex'), b.size);
        count(report.purged, taken);
        if (taken.length < BATCH) break;
      }
    }
    if (!apply) return;
    // Copies in quarantine whose record is live again, or that a root marks, go back; those no
    // record names (a failed upload's, or a purge cut short) go once they are older than the fence.
    let next: string | undefined;
    do {
      const page = await blocks.list('quarantine', next);
      next = page.next;
      const keys = page.blocks.map((b) => Buffer.from(b.hex, 'hex'));
      const [states, marked] = await Promise.all([catalog.states(keys), catalog.markedAmong(keys)]);
      for (const b of page.blocks) {
        const state = states.get(b.hex);
        if (state === 'live' || (state === undefined && marked.has(b.hex))) {
          if ((await blocks.restore(b.hex, b.size)) === 'restored') report.restored++;
        } else if (state === undefined && purge && b.lastModifiedMs < stampedBefore) {
          await blocks.purge(b.hex, b.size);
          report.purged.count++;
          report.purged.bytes += b.size;
        }
      }
    } while (next);
  }

}

/** What a run held back by root holders that did not mark reports: who, since when, what to do. */
function heldBack(nodes: readonly ClusterNode[]): NonNullable<GcReport['heldBack']> {
  const named = nodes.map((n) => {
    const where = n.address ? `, at ${n.address}` : '';
    return n.live ? `${n.nodeId} (live, not marked yet${where})` : `${n.nodeId} (down, last heartbeat ${new Date(n.lastSeenAt).toISOString()}${where})`;
  });
  const one = nodes.length === 1;
  const reason =
    `Nothing was quarantined or purged: node${one ? '' : 's'} ${named.join(', ')} ${one ? 'keeps' : 'keep'} references to blocks in ${one ? 'its' : 'their'} data ` +
    `director${one ? 'y' : 'ies'} (documents, versions, views, legacy imports) that only ${one ? 'it' : 'they'} can mark, and ${one ? 'has' : 'have'} not marked them for this run. ` +
    `Start ${one ? 'it' : 'each'} again on ${one ? 'its' : 'its own'} data directory (a node marks at its next heartbeat, and the next run proceeds), or, for a node gone for good, ` +
    `run \`svc nodes forget <id>\` (DELETE /api/ops/v1/nodes/<id>): the references in its data directory are then lost, and later runs collect their blocks.`;
  return { reason, nodes: nodes.map((n) => ({ nodeId: n.nodeId, address: n.address, lastSeenAt: new Date(n.lastSeenAt).toISOString() })) };
}

function count(into: { count: number; bytes: number }, blocks: readonly KeyedBlock[]): void {
  into.count += blocks.length;
  into.bytes += blocks.reduce((n, b) => n + b.size, 0);
}
