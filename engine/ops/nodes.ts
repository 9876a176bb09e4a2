// The nodes an operator sees and may declare gone (`svc nodes`, GET and DELETE /api/ops/v1/nodes):
// every node the shared catalog knows of, live or down, and whether it is a root holder (its data
// directory holds references to blocks that only it can mark, so GC waits for it while it is
// down). The catalog owns the records (engine/store: the `nodes` table, or the bucket's heartbeats
// and root-holder records); this module reads them and words the answers. No HTTP here.
import { SvcError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import { type ClusterNode, type DocumentsClaim, type SharedGcCatalog, claimRenewalMs } from '../store/index.js';
import { type DocumentsReleased, releaseDocuments } from './documents-release.js';

export interface NodeView {
  nodeId: string;
  /** Where its blob API listens, from its last heartbeat ('' before it listened). */
  address: string;
  /** `live`: a heartbeat within SVC_NODE_TTL; `down` since `lastSeenAt`. */
  state: 'live' | 'down';
  lastSeenAt: string;
  /** GC waits for its marks while it is down, until it is forgotten. */
  rootHolder: boolean;
  rootHolderSince?: string;
  /** The node that answers. */
  self: boolean;
  /** What it said of itself at its last heartbeat (engine/ops/snapshot.ts, NodeSummary). */
  summary?: Record<string, unknown>;
}

export interface Forgotten {
  nodeId: string;
  forgotten: true;
  /** It held references only it could mark: they are lost with its data directory. */
  rootHolder: boolean;
  message: string;
}

interface Deps {
  /** Absent with an embedded catalog: this node is the only one. */
  catalog?: SharedGcCatalog;
  nodeId: string;
  address: () => string;
  nodeTtlMs: number;
  log: Logger;
  /** Where one node serves the document platform (s3): its claim, and SVC_DOCUMENTS_LEASE_TTL. */
  documents?: DocumentsClaim;
  documentsLeaseMs?: number;
}

export class ClusterNodes {
  constructor(private readonly deps: Deps) {}

  /** Every known node, in id order; this one always among them. */
  async list(): Promise<NodeView[]> {
    const { catalog, nodeId, nodeTtlMs } = this.deps;
    const known = catalog ? await catalog.knownNodes(nodeTtlMs) : [];
    const views = known.map((n) => view(n, n.nodeId === nodeId));
    // Before its first heartbeat landed (or with an embedded catalog), this node is live all the same.
    if (!views.some((v) => v.self)) {
      views.push({ nodeId, address: this.deps.address(), state: 'live', lastSeenAt: new Date().toISOString(), rootHolder: false, self: true });
      views.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
    }
    return views;
  }

  /**
   * Declares `id` gone for good: GC no longer waits for its marks. 409 `node_live` while its
   * heartbeat is younger than SVC_NODE_TTL (this node always), 404 `node_not_found` when unknown.
   */
  async forget(id: string): Promise<Forgotten> {
    const { catalog, nodeId, nodeTtlMs, log } = this.deps;
    if (id === nodeId) throw nodeLive(id, 'it is the node answering this request');
    const done = catalog ? await catalog.forgetNode(id, nodeTtlMs) : ({ outcome: 'unknown' } as const);
    if (done.outcome === 'unknown') throw new SvcError('not_found', 'node_not_found', `No node ${id} is known (svc nodes lists them)`);
    if (done.outcome === 'live') throw nodeLive(id, `its last heartbeat, ${new Date(done.node.lastSeenAt).toISOString()}, is within SVC_NODE_TTL`);
    const rootHolder = done.node.rootHolderSince !== undefined;
    log.warn('nodes: node forgotten', { nodeId: id, rootHolder, lastSeenAt: new Date(done.node.lastSeenAt).toISOString() });
    const message = rootHolder
      ? `Node ${id} is forgotten: garbage collection no longer waits for it. The references its data directory held (documents, versions, views, legacy imports) are lost with that directory, and later runs collect the blocks only they referenced.`
      : `Node ${id} is forgotten. It held no references of its own: nothing is lost.`;
    return { nodeId: id, forgotten: true, rootHolder, message };
  }

  /**
   * This node takes the document platform's claim from a holder that is gone (svc nodes
   * release-documents): 409 `documents_holder_live` while it is live unless `force`.
   */
  releaseDocuments(force: boolean): Promise<DocumentsReleased> {
    const { catalog, nodeId, nodeTtlMs, log, documents, documentsLeaseMs } = this.deps;
    return releaseDocuments({
      claim: documents, nodeId, log,
      knownNodes: async () => (catalog ? catalog.knownNodes(nodeTtlMs) : []),
      renewMs: claimRenewalMs(documentsLeaseMs ?? 0),
    }, force);
  }
}

function view(n: ClusterNode, self: boolean): NodeView {
  const out: NodeView = { nodeId: n.nodeId, address: n.address, state: n.live ? 'live' : 'down', lastSeenAt: new Date(n.lastSeenAt).toISOString(), rootHolder: n.rootHolderSince !== undefined, self };
  if (n.rootHolderSince !== undefined) out.rootHolderSince = new Date(n.rootHolderSince).toISOString();
  if (n.summary !== undefined) out.summary = n.summary;
  return out;
}

const nodeLive = (id: string, why: string) =>
  new SvcError('conflict', 'node_live', `Node ${id} is live (${why}): only a node that is down can be forgotten; stop it first`);
