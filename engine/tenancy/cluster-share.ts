// A node's share of the cluster's tenant limits. A policy's figures (requests and bytes per
// minute, operations in flight and queued) hold for the whole cluster; rather than a round trip
// to a shared counter on every request, each live node enforces its share: rates divided by the
// number of live nodes, counts split so that the shares add up to the figure exactly (the
// remainder to the lowest-ranked nodes), except that every node has at least one slot of a
// tenant whose maxConcurrent is 1 or more (a node with none would queue its requests for
// nothing): the cluster may then run up to node count - 1 operations more than the figure.
// Behind a balancer that spreads a tenant's requests evenly the cluster then admits what one
// node would; a node that joins or leaves changes every share within a heartbeat or two
// (docs/security.md, "Tenant policy on several nodes").

export interface ClusterShare {
  /** This node's place among the live nodes, ordered by id (0 first). */
  rank: number;
  /** The live nodes sharing the limits (at least 1: this one). */
  count: number;
}

export const SINGLE_NODE: ClusterShare = { rank: 0, count: 1 };

/**
 * Whose routes a figure is shared by: `cluster`, routes every node serves (this node's share);
 * `documents`, the document platform's (/v1), which on `s3` one node serves alone and so
 * enforces the whole figure of (the engine decides: Engine's budgets).
 */
export type ShareScope = 'cluster' | 'documents';

/** This node's part of a cluster-wide count: the shares of all nodes add up to `total`. */
export function shareOf(total: number, share: ClusterShare): number {
  return Math.floor(total / share.count) + (share.rank < total % share.count ? 1 : 0);
}

/** This node's operation slots of a cluster-wide maxConcurrent: its share, and at least 1 when the figure is. */
export function slotsOf(maxConcurrent: number, share: ClusterShare): number {
  return maxConcurrent === 0 ? 0 : Math.max(1, shareOf(maxConcurrent, share));
}

/**
 * The current share, read from the live nodes every `refreshMs` in the background (the budgets
 * ask on every request, synchronously). Until the first read, and after a failed one, the last
 * known share stands.
 */
export class ClusterShareTracker {
  private current: ClusterShare = SINGLE_NODE;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly nodeId: string,
    private readonly liveNodeIds: () => Promise<ReadonlySet<string>>,
    private readonly refreshMs = 2000,
  ) {}

  get(): ClusterShare {
    return this.current;
  }

  async refresh(): Promise<void> {
    const ids = new Set(await this.liveNodeIds());
    ids.add(this.nodeId);
    const ordered = [...ids].sort();
    this.current = { rank: ordered.indexOf(this.nodeId), count: ordered.length };
  }

  start(): void {
    const tick = () => {
      this.refresh().catch(() => {}).finally(() => {
        this.timer = setTimeout(tick, this.refreshMs);
        this.timer.unref();
      });
    };
    tick();
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}
