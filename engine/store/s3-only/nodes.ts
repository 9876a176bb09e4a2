// The S3-only nodes' heartbeats: `<prefix>nodes/<nodeId>`, a small JSON document rewritten every
// few seconds (engine/gc/shared-collector.ts beats), like pg-s3's `nodes` table. They give the
// ops snapshot its `placement.nodes`, GC its purge fence (each node's oldest open upload) and the
// ledgers a way to tell a write in progress from one a dead process left (its `boot`).
// Root holders (`<prefix>root-holders/<nodeId>`): a node whose data directory holds references to
// blocks that only it can read records so once, and the record stays while it is down (a clean
// stop removes the heartbeat, not this), until an operator forgets the node.
// Times are the nodes' clocks: they must agree to well within SVC_NODE_TTL (NTP).
import type { ClusterNode, ForgetOutcome, NodeRecord } from '../shared-gc-catalog.js';
import type { S3OnlyKeys } from './keys.js';
import { type ObjectIo, mapLimited } from './objects.js';

interface HeartbeatV1 {
  v: 1;
  nodeId: string;
  /** This process's start: a node restarted on the same data directory is another boot. */
  boot: string;
  address: string;
  at: number;
  /**
   * Other nodes' runs purge only quarantined objects moved before this: the start of the node's
   * oldest open upload, or of its last sweep of its own roots out of quarantine (gc-catalog.ts).
   */
  oldestIngestAt: number | null;
  /** What the node says of itself (its traffic, capacity and health), for the others' ops snapshots. */
  summary?: Record<string, unknown>;
}

interface RootHolderV1 {
  v: 1;
  nodeId: string;
  /** When it registered (its clock). */
  since: number;
  /** Set by `svc nodes forget`: no longer a root holder, and left out of the list until it beats again. */
  forgottenAt?: number;
  /** Its last heartbeat's time and address when it stopped cleanly (which removes the heartbeat). */
  leftAt?: number;
  address?: string;
}

export interface LiveNode extends NodeRecord {
  boot: string;
}

/** How long a listing of the heartbeats is reused for liveness checks. */
const CACHE_MS = 1000;

export class NodeRegistry {
  private cached?: { at: number; ttlMs: number; nodes: LiveNode[] };
  /** This process registered the node as a root holder. */
  private holdsRoots = false;
  private lastAddress = '';

  constructor(
    private readonly io: ObjectIo,
    private readonly keys: S3OnlyKeys,
    readonly nodeId: string,
    readonly boot: string,
    readonly ttlMs: number,
  ) {}

  /** `holdsBackFrom`: the time (this node's clock) before which other nodes' runs may purge; null: any time. */
  async heartbeat(address: string, holdsBackFrom: number | null, summary?: Record<string, unknown>): Promise<void> {
    const doc: HeartbeatV1 = { v: 1, nodeId: this.nodeId, boot: this.boot, address, at: Date.now(), oldestIngestAt: holdsBackFrom, ...(summary ? { summary } : {}) };
    if (address) this.lastAddress = address;
    await this.io.put(this.keys.node(this.nodeId), Buffer.from(JSON.stringify(doc)));
  }

  /** This node leaves (a clean stop): the others need not wait SVC_NODE_TTL. A root holder's record keeps when it left. */
  async leave(): Promise<void> {
    if (this.holdsRoots) {
      const held = await this.readRootHolder(this.nodeId);
      if (held && held.forgottenAt === undefined) await this.writeRootHolder({ ...held, leftAt: Date.now(), address: this.lastAddress });
    }
    await this.io.delete(this.keys.node(this.nodeId));
  }

  /** This node keeps references only it can read (SharedGcCatalog.registerRootHolder). */
  async registerRootHolder(): Promise<{ forgottenAt?: number }> {
    const prior = await this.readRootHolder(this.nodeId);
    const forgottenAt = prior?.forgottenAt;
    await this.writeRootHolder({ v: 1, nodeId: this.nodeId, since: prior && forgottenAt === undefined ? prior.since : Date.now() });
    this.holdsRoots = true;
    return forgottenAt === undefined ? {} : { forgottenAt };
  }

  async isRootHolder(nodeId: string): Promise<boolean> {
    const held = await this.readRootHolder(nodeId);
    return held !== undefined && held.forgottenAt === undefined;
  }

  /** Every node with a heartbeat object (live, or killed: a clean stop removes it) or a root holder's record, not forgotten. */
  async knownNodes(ttlMs = this.ttlMs): Promise<ClusterNode[]> {
    const now = Date.now();
    const [beats, holders] = await Promise.all([this.readAll<HeartbeatV1>(this.keys.nodesPrefix()), this.readAll<RootHolderV1>(this.keys.rootHoldersPrefix())]);
    const out = new Map<string, ClusterNode>();
    for (const b of beats) out.set(b.nodeId, { nodeId: b.nodeId, address: b.address, lastSeenAt: b.at, live: now - b.at < ttlMs, ...(b.summary ? { summary: b.summary } : {}) });
    for (const h of holders) {
      const node = out.get(h.nodeId);
      if (h.forgottenAt !== undefined) {
        // Forgotten: shown again only once it beats again.
        if (!node || node.lastSeenAt <= h.forgottenAt) out.delete(h.nodeId);
        continue;
      }
      if (node) node.rootHolderSince = h.since;
      else out.set(h.nodeId, { nodeId: h.nodeId, address: h.address ?? '', lastSeenAt: h.leftAt ?? h.since, live: false, rootHolderSince: h.since });
    }
    return [...out.values()].sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
  }

  /** Root holders without a live heartbeat. */
  async downRootHolders(ttlMs = this.ttlMs): Promise<ClusterNode[]> {
    return (await this.knownNodes(ttlMs)).filter((n) => n.rootHolderSince !== undefined && !n.live);
  }

  /**
   * Forgets a node that is down: its root holder's record says so (a node that comes back learns
   * it was forgotten) and its stale heartbeat goes. Not atomic against the node's return: a node
   * that beats again re-registers its roots and logs that it was forgotten.
   */
  async forget(nodeId: string, ttlMs = this.ttlMs): Promise<ForgetOutcome> {
    const node = (await this.knownNodes(ttlMs)).find((n) => n.nodeId === nodeId);
    if (!node) return { outcome: 'unknown' };
    if (node.live) return { outcome: 'live', node };
    const held = await this.readRootHolder(nodeId);
    if (held) await this.writeRootHolder({ v: 1, nodeId, since: held.since, forgottenAt: Date.now() });
    await this.io.delete(this.keys.node(nodeId));
    return { outcome: 'forgotten', node };
  }

  private async readRootHolder(nodeId: string): Promise<RootHolderV1 | undefined> {
    const got = await this.io.get(this.keys.rootHolder(nodeId));
    return got ? (JSON.parse(got.body.toString('utf8')) as RootHolderV1) : undefined;
  }

  private async writeRootHolder(doc: RootHolderV1): Promise<void> {
    await this.io.put(this.keys.rootHolder(doc.nodeId), Buffer.from(JSON.stringify(doc)));
  }

  /** Every version-1 document under `prefix` (a few per node). */
  private async readAll<T extends { v: number; nodeId: string }>(prefix: string): Promise<T[]> {
    const listed: string[] = [];
    for await (const page of this.io.pages(prefix)) for (const o of page) listed.push(o.key);
    const docs = await mapLimited(listed, 16, async (key) => {
      const got = await this.io.get(key);
      if (!got) return undefined;
      try {
        return JSON.parse(got.body.toString('utf8')) as T;
      } catch {
        return undefined;
      }
    });
    return docs.filter((d): d is T => d?.v === 1);
  }

  /** Nodes whose heartbeat is younger than `ttlMs`. */
  async nodes(ttlMs = this.ttlMs): Promise<LiveNode[]> {
    const now = Date.now();
    const listed: string[] = [];
    for await (const page of this.io.pages(this.keys.nodesPrefix())) {
      for (const o of page) if (o.lastModifiedMs === 0 || now - o.lastModifiedMs < ttlMs + 60_000) listed.push(o.key);
    }
    const docs = await mapLimited(listed, 16, (key) => this.readHeartbeat(key));
    const live = docs
      .filter((d): d is HeartbeatV1 => d?.v === 1 && now - d.at < ttlMs)
      .map((d) => ({ nodeId: d.nodeId, boot: d.boot, address: d.address, lastSeenAt: d.at, oldestIngestAt: d.oldestIngestAt }))
      .sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
    this.cached = { at: now, ttlMs, nodes: live };
    return live;
  }

  /** A heartbeat; read again once if it does not parse (a server without atomic writes may serve one half-written). */
  private async readHeartbeat(key: string, again = true): Promise<HeartbeatV1 | undefined> {
    const got = await this.io.get(key);
    if (!got) return undefined;
    try {
      return JSON.parse(got.body.toString('utf8')) as HeartbeatV1;
    } catch {
      if (!again) return undefined;
      await new Promise((resolve) => setTimeout(resolve, 50));
      return this.readHeartbeat(key, false);
    }
  }

  /** Whether the process (`node`, `boot`) may still be writing: this one, or a node seen within SVC_NODE_TTL. */
  async isLive(node: string, boot: string): Promise<boolean> {
    if (node === this.nodeId) return boot === this.boot;
    const c = this.cached;
    const nodes = c && c.ttlMs === this.ttlMs && Date.now() - c.at < CACHE_MS ? c.nodes : await this.nodes();
    return nodes.some((n) => n.nodeId === node && n.boot === boot);
  }
}
