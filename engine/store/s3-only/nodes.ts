// The S3-only nodes' heartbeats: `<prefix>nodes/<nodeId>`, a small JSON document rewritten every
// few seconds (engine/gc/shared-collector.ts beats), like pg-s3's `nodes` table. They give the
// ops snapshot its `placement.nodes`, GC its purge fence (each node's oldest open upload) and the
// ledgers a way to tell a write in progress from one a dead process left (its `boot`).
// Times are the nodes' clocks: they must agree to well within SVC_NODE_TTL (NTP).
import type { NodeRecord } from '../shared-gc-catalog.js';
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
}

export interface LiveNode extends NodeRecord {
  boot: string;
}

/** How long a listing of the heartbeats is reused for liveness checks. */
const CACHE_MS = 1000;

export class NodeRegistry {
  private cached?: { at: number; ttlMs: number; nodes: LiveNode[] };

  constructor(
    private readonly io: ObjectIo,
    private readonly keys: S3OnlyKeys,
    readonly nodeId: string,
    readonly boot: string,
    readonly ttlMs: number,
  ) {}

  /** `holdsBackFrom`: the time (this node's clock) before which other nodes' runs may purge; null: any time. */
  async heartbeat(address: string, holdsBackFrom: number | null): Promise<void> {
    const doc: HeartbeatV1 = { v: 1, nodeId: this.nodeId, boot: this.boot, address, at: Date.now(), oldestIngestAt: holdsBackFrom };
    await this.io.put(this.keys.node(this.nodeId), Buffer.from(JSON.stringify(doc)));
  }

  /** This node leaves (a clean stop): the others need not wait SVC_NODE_TTL. */
  async leave(): Promise<void> {
    await this.io.delete(this.keys.node(this.nodeId));
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
