// Garbage collection's side of the S3-only backend (engine/store/shared-gc-catalog.ts), for the
// shared collector (engine/gc/shared-collector.ts). The bucket keeps no record per block: every
// block object is what that collector calls "unrecorded" and goes through its listing paths
// (older than the minimum age and unmarked → quarantine; in quarantine, unmarked and older than
// the purge fence → deleted; marked → moved back). So the record-based steps here have nothing to
// do, and what remains is: the lease (one run at a time), the mark set (this process's memory:
// every holding's blocks and every open resumable session's, ~100 bytes per distinct block),
// the heartbeats and the last report. Resumable sessions are in the bucket (upload-catalog.ts):
// every run marks them, whichever node they were made through.
//
// Other nodes' roots. Document content lives in the documents node's LMDB (and a closed live
// ingest's stored blocks in its node's memory), so a
// run marks only its own node's roots and may quarantine another node's (reads fall back to
// quarantine, so nothing is lost yet). Each node therefore sweeps its own roots out of quarantine
// (at most every SWEEP_MS: a listing of quarantine/, usually empty; the roots' digests are
// collected only when it is not), and its heartbeat says when its last completed sweep began:
// other nodes' runs purge only objects quarantined before that (the collector's fence), so a
// block quarantined by another node's run is either moved back by this node's next sweep or
// kept. Until a node's first sweep completes it holds back every purge.
import { randomUUID } from 'node:crypto';
import { decodeHolding } from '../catalog-journal.js';
import type { ListedObject } from '../block-store.js';
import type { BlockRoots } from '../../base/block-roots.js';
import type { ClusterNode, ForgetOutcome, KeyedBlock, NodeRecord, SharedGcCatalog } from '../shared-gc-catalog.js';
import { PART_BLOCK_BYTES } from '../upload-catalog.js';
import type { S3OnlyKeys } from './keys.js';
import type { NodeRegistry } from './nodes.js';
import { type ObjectIo, mapLimited } from './objects.js';
import type { S3OnlyUploadCatalog } from './upload-catalog.js';

/** A run's lease lasts this long unless renewed (every third of it while the run goes on). */
const LEASE_MS = 60_000;
const READ_CONCURRENCY = 16;
/** Margin for the LastModified of a holding against this node's clock (whole seconds on some servers, clocks a little apart). */
const CLOCK_MARGIN_MS = 5000;
/** How often a node sweeps its own roots out of quarantine (purges by other nodes wait for it): this, or twice SVC_NODE_TTL if shorter. */
const SWEEP_MS = 30_000;

interface LeaseV1 {
  v: 1;
  holder: string;
  node: string;
  /** The holder's process: a lease of this node's earlier boot (killed mid-run) is taken over at once. */
  boot?: string;
  expiresAt: number;
}

export class S3OnlyGcCatalog implements SharedGcCatalog {
  private marks = new Set<string>();
  /** When the last pass over the holdings began (undefined: no run is marking). */
  private markedSince?: number;
  /** Quarantined block objects, counted after each run (a count needs a listing). */
  private quarantined = 0;
  /** A run has moved blocks since the last count. */
  private recount = true;
  /** A run of this process holds the lease (the only guard where the server ignores preconditions). */
  private leased = false;

  constructor(
    private readonly io: ObjectIo,
    private readonly keys: S3OnlyKeys,
    private readonly nodesRegistry: NodeRegistry,
    private readonly blocks: {
      /** Quarantined block objects, a page at a time. */
      listQuarantine(after?: string): Promise<{ blocks: ListedObject[]; next?: string }>;
      /** Moves a quarantined block back. */
      restore(hex: string, size: number): Promise<unknown>;
    },
    /** Resumable sessions in the bucket (upload-catalog.ts): any run marks their blocks. */
    private readonly sessions?: Pick<S3OnlyUploadCatalog, 'markableParts'>,
  ) {}

  private roots: readonly BlockRoots[] = [];
  /** When this node's last completed sweep began (minus the clock margin); 0: none yet. */
  private sweptFrom = 0;
  private markingEpoch = 0;
  private lastSweep = 0;

  adoptRoots(roots: readonly BlockRoots[]): void {
    this.roots = roots;
  }

  /** Moves this node's root blocks that another node's run quarantined back to live. */
  private async sweepRoots(): Promise<void> {
    const started = Date.now() - CLOCK_MARGIN_MS;
    let mine: Set<string> | undefined;
    let after: string | undefined;
    do {
      const page = await this.blocks.listQuarantine(after);
      if (page.blocks.length > 0) {
        mine ??= await this.rootSet();
        for (const b of page.blocks) if (mine.has(b.hex)) await this.blocks.restore(b.hex, b.size);
      }
      after = page.next;
    } while (after);
    this.sweptFrom = started;
  }

  private async rootSet(): Promise<Set<string>> {
    const out = new Set<string>();
    for (const root of this.roots) for await (const d of root.digests()) out.add(Buffer.from(d).toString('hex'));
    return out;
  }

  async lock(): Promise<{ release(): Promise<void> } | undefined> {
    if (this.leased) return undefined;
    const key = this.keys.gcLease();
    const holder = randomUUID();
    const { nodeId, boot } = this.nodesRegistry;
    const body = (expiresAt: number) => Buffer.from(JSON.stringify({ v: 1, holder, node: nodeId, boot, expiresAt } satisfies LeaseV1));
    const current = await this.io.get(key);
    if (current) {
      const lease = JSON.parse(current.body.toString('utf8')) as LeaseV1;
      const earlierBoot = lease.node === nodeId && lease.boot !== undefined && lease.boot !== boot;
      if (lease.expiresAt > Date.now() && !earlierBoot) return undefined;
    }
    // Taken only if nobody took or renewed it since it was read (If-None-Match: * / If-Match).
    const taken = await this.io.put(key, body(Date.now() + LEASE_MS), current ? { ifMatch: current.etag } : { ifNoneMatch: true });
    if (taken === 'refused') return undefined;
    this.leased = true;
    let etag = taken.etag;
    let lost = false;
    const renew = setInterval(() => {
      void this.io.put(key, body(Date.now() + LEASE_MS), { ifMatch: etag }).then((r) => {
        if (r === 'refused') lost = true;
        else etag = r.etag;
      }, () => {});
    }, LEASE_MS / 3);
    renew.unref();
    return {
      release: async () => {
        clearInterval(renew);
        this.leased = false;
        // Expired at once rather than deleted: a DELETE cannot be conditional, and the lease may have moved on.
        if (!lost) await this.io.put(key, body(0), { ifMatch: etag });
      },
    };
  }

  /** Marks the blocks of every tenant's holdings (inline blobs have none) and of every session that may still commit. */
  async markManifests(): Promise<number> {
    this.marks = new Set();
    this.recount = true;
    this.markedSince = undefined;
    await this.markHoldings(0);
    return this.marks.size;
  }

  /**
   * Adds the blocks of the holdings written since the last pass (all when `since` is 0). A
   * holding is written once, so one written before a pass's listing began was read by it;
   * LastModified has one-second resolution on some servers, hence the margin.
   */
  private async markHoldings(since: number): Promise<void> {
    const started = Date.now();
    for await (const page of this.io.pages(this.keys.holdingsPrefix())) {
      const fresh = page.filter((o) => o.lastModifiedMs === 0 || o.lastModifiedMs >= since - CLOCK_MARGIN_MS);
      const docs = await mapLimited(fresh, READ_CONCURRENCY, (o) => this.io.get(o.key));
      for (const doc of docs) {
        if (!doc) continue;
        const holding = decodeHolding(doc.body);
        if (holding.inline) continue;
        for (let i = 0; i < holding.refs.length; i += 40) this.marks.add(holding.refs.toString('hex', i, i + 32));
      }
    }
    // And the blocks of resumable sessions: counted parts of open ones on a full pass, and any
    // part written since the last pass (one counted after the records were read, or about to be).
    if (this.sessions) {
      const from = (since === 0 ? started : since) - CLOCK_MARGIN_MS;
      for await (const packed of this.sessions.markableParts(since, (modified) => modified === 0 || modified >= from)) {
        for (let i = 0; i < packed.length; i += PART_BLOCK_BYTES) this.marks.add(packed.toString('hex', i, i + 32));
      }
    }
    this.markedSince = started;
  }

  async mark(keys: readonly Buffer[]): Promise<void> {
    for (const k of keys) this.marks.add(k.toString('hex'));
  }

  async markedCount(): Promise<number> {
    return this.marks.size;
  }

  async clearMarks(): Promise<void> {
    this.marks = new Set();
    this.markedSince = undefined;
  }

  // No block records: nothing is a candidate by record, nothing is stamped, revived or taken.
  async candidates(): Promise<KeyedBlock[]> {
    return [];
  }

  async beginQuarantine(): Promise<KeyedBlock[]> {
    return [];
  }

  async stampQuarantined(): Promise<void> {}

  async reviveMarked(): Promise<KeyedBlock[]> {
    return [];
  }

  /**
   * A dry run's purge: the quarantined objects that a run would delete (unmarked, moved before
   * `stampedBefore`). The collector lists them itself when it applies; a dry run asks here.
   */
  async countPurgeable(stampedBefore: number): Promise<{ count: number; bytes: number }> {
    const out = { count: 0, bytes: 0 };
    let after: string | undefined;
    do {
      const page = await this.blocks.listQuarantine(after);
      for (const b of page.blocks) {
        if (this.marks.has(b.hex) || b.lastModifiedMs >= stampedBefore) continue;
        out.count++;
        out.bytes += b.size;
      }
      after = page.next;
    } while (after);
    return out;
  }

  async takePurgeable(): Promise<KeyedBlock[]> {
    return [];
  }

  /**
   * Which of `keys` are marked. Before it answers that a block is unmarked, the holdings written
   * since the last pass are marked too: a publication that landed after marking began must keep
   * its blocks (pg-s3 has each block's last reference for this; the bucket has no per-block
   * record). What remains is the moment between this answer and the block's move, as with pg-s3:
   * a publication in it finds its block in quarantine (reads fall back), and the next run moves it back.
   */
  async markedAmong(keys: readonly Buffer[]): Promise<Set<string>> {
    if (this.markedSince !== undefined && keys.some((k) => !this.marks.has(k.toString('hex')))) await this.markHoldings(this.markedSince);
    const out = new Set<string>();
    for (const k of keys) {
      const hex = k.toString('hex');
      if (this.marks.has(hex)) out.add(hex);
    }
    return out;
  }

  async states(): Promise<Map<string, 'live' | 'quarantined'>> {
    return new Map();
  }

  /** Listed once after each run (the collector asks at the end of a run and with every heartbeat). */
  async quarantinedCount(): Promise<number> {
    // While a run holds its marks it moves blocks: a heartbeat's count then is no count for
    // after the run (the run's own, at its end, is taken afresh too).
    const running = this.markedSince !== undefined;
    if (this.recount || running) {
      this.recount = running;
      try {
        let n = 0;
        let after: string | undefined;
        do {
          const page = await this.blocks.listQuarantine(after);
          n += page.blocks.length;
          after = page.next;
        } while (after);
        this.quarantined = n;
      } catch (err) {
        this.recount = true;
        throw err;
      }
    }
    return this.quarantined;
  }

  async saveRun(_runId: string, report: unknown): Promise<void> {
    await this.io.put(this.keys.gcLastRun(), Buffer.from(JSON.stringify(report)));
  }

  async lastRun<R>(): Promise<R | undefined> {
    const got = await this.io.get(this.keys.gcLastRun());
    return got ? (JSON.parse(got.body.toString('utf8')) as R) : undefined;
  }

  /**
   * The heartbeat, after a sweep of this node's roots when one is due (its start holds back other
   * nodes' purges). It never asks this node to mark for another node's run: here each node
   * protects its own roots by sweeping them out of quarantine (see the top of this file).
   */
  async heartbeat(_nodeId: string, address: string, oldestIngestAgeMs: number | null, summary?: Record<string, unknown>): Promise<{ markEpoch?: number }> {
    if (Date.now() - this.lastSweep >= Math.min(SWEEP_MS, 2 * this.nodesRegistry.ttlMs)) {
      this.lastSweep = Date.now();
      await this.sweepRoots().catch(() => (this.lastSweep = 0));
    }
    const now = Date.now();
    const oldestIngest = oldestIngestAgeMs === null ? Number.POSITIVE_INFINITY : now - oldestIngestAgeMs;
    await this.nodesRegistry.heartbeat(address, Math.min(oldestIngest, this.sweptFrom), summary);
    return {};
  }

  /** A run's marking epoch, local to it: no other node is asked to mark (their sweeps keep their roots). */
  async openMarking(): Promise<number> {
    return ++this.markingEpoch;
  }

  async closeMarking(): Promise<void> {}

  async markedBy(): Promise<void> {}

  async unmarkedNodes(): Promise<string[]> {
    return [];
  }

  nodes(ttlMs: number): Promise<NodeRecord[]> {
    return this.nodesRegistry.nodes(ttlMs);
  }

  registerRootHolder(): Promise<{ forgottenAt?: number }> {
    return this.nodesRegistry.registerRootHolder();
  }

  isRootHolder(nodeId: string): Promise<boolean> {
    return this.nodesRegistry.isRootHolder(nodeId);
  }

  /**
   * No node marks for another's run here: a live root holder keeps its roots by sweeping them out
   * of quarantine and holding back purges (above), so the run waits only for those that are down.
   */
  rootHoldersUnmarked(_epoch: number, ttlMs: number): Promise<ClusterNode[]> {
    return this.nodesRegistry.downRootHolders(ttlMs);
  }

  knownNodes(ttlMs: number): Promise<ClusterNode[]> {
    return this.nodesRegistry.knownNodes(ttlMs);
  }

  forgetNode(nodeId: string, ttlMs: number): Promise<ForgetOutcome> {
    return this.nodesRegistry.forget(nodeId, ttlMs);
  }

  /** The nodes' clocks are the catalog's clock here (NodeRegistry: they must agree). */
  async now(): Promise<number> {
    return Date.now();
  }
}
