// The nodes sharing this node's catalog that are live (seen within SVC_NODE_TTL) and where their
// blob APIs listen: the node list of the snapshot, the live set the leases of shared sessions and
// the tenants' cluster shares are judged by, and the owner of a session-localized upload. This
// node's own address is kept here once it listens; its heartbeats announce it.
import type { SharedGcCatalog } from '../store/index.js';
import { type LiveNode, ownerOf } from './owner.js';

/** A node as the snapshot and placement read it. */
export interface NodeSeen {
  nodeId: string;
  lastSeenAt: string;
  address: string;
}

export interface LiveNodesDeps {
  nodeId: string;
  /** The heartbeats of a shared catalog (pg-s3, s3); undefined with an embedded backend (no other nodes). */
  catalog?: Pick<SharedGcCatalog, 'nodes'>;
  nodeTtlMs: number;
  /** Tells the others this node's address at once (a heartbeat), once it listens. */
  announce(): void;
}

/** How long one reading of the live set serves (the leases of shared sessions ask on every part). */
const LIVE_IDS_MS = 1000;

export class LiveNodes {
  /** Where this node's blob API listens (host:port), once it does; other nodes read it from the heartbeats. */
  private listeningAt = '';
  private liveNodesRead?: { at: number; ids: Promise<ReadonlySet<string>> };

  constructor(private readonly deps: LiveNodesDeps) {}

  /** This node's blob API address ('' until it listens). */
  get address(): string {
    return this.listeningAt;
  }

  /** The blob API listens at `address`. */
  listening(address: string): void {
    this.listeningAt = address;
    this.deps.announce();
  }

  /** The nodes that share this node's catalog, seen within SVC_NODE_TTL (none with an embedded backend). */
  async nodes(): Promise<NodeSeen[]> {
    if (!this.deps.catalog) return [];
    const nodes = await this.deps.catalog.nodes(this.deps.nodeTtlMs);
    return nodes.map((n) => ({ nodeId: n.nodeId, lastSeenAt: new Date(n.lastSeenAt).toISOString(), address: n.address }));
  }

  /** The ids of the nodes seen within SVC_NODE_TTL, read at most once a second. */
  liveNodeIds(): Promise<ReadonlySet<string>> {
    const now = Date.now();
    if (!this.liveNodesRead || now - this.liveNodesRead.at > LIVE_IDS_MS) {
      const ids = this.nodes().then((nodes) => new Set(nodes.map((n) => n.nodeId)));
      ids.catch(() => (this.liveNodesRead = undefined));
      this.liveNodesRead = { at: now, ids };
    }
    return this.liveNodesRead.ids;
  }

  /**
   * The owner of a session-localized upload (SVC_LOCALITY): among the live nodes sharing the
   * catalog that announced an address, this one included; this node when it shares with none.
   */
  async localityOwner(tenant: string, session: string): Promise<LiveNode & { self: boolean }> {
    const { nodeId } = this.deps;
    const live = (await this.nodes()).filter((n) => n.address !== '');
    if (!live.some((n) => n.nodeId === nodeId)) live.push({ nodeId, address: this.listeningAt, lastSeenAt: '' });
    const owner = ownerOf(tenant, session, live)!;
    return { nodeId: owner.nodeId, address: owner.address, self: owner.nodeId === nodeId };
  }
}
