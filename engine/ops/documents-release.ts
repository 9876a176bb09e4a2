// `svc nodes release-documents` (POST /api/ops/v1/nodes/release-documents): on s3 the node that
// answers takes the document platform's claim from a holder that is gone for good, at once,
// instead of waiting for its lease to lapse (a holder stopped cleanly keeps its claim for ever).
// The documents stay where they were written: the old holder's data directory; the node that
// answers serves its own (docs/backends.md, "s3"). No HTTP here.
import net from 'node:net';
import { SvcError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { ClusterNode, DocumentsClaim, DocumentsClaimRead } from '../store/index.js';

/** Takes of a live holder's claim a forced release tries again after the holder renewed it. */
const FORCED_ATTEMPTS = 3;
/** How long a probe of the holder's address waits for a connection. */
const PROBE_MS = 1000;

export interface DocumentsReleased {
  /** The node that serves the document platform now: the one that answered. */
  nodeId: string;
  /** The node that held it before (absent: none did). */
  previous?: string;
  /** Why it could be taken: `down` (no fresh heartbeat, or nothing answers at its address), `stopped` cleanly, its lease `lapsed`, or `live` with force. */
  previousState?: 'down' | 'stopped' | 'lapsed' | 'live';
  message: string;
}

export interface ReleaseDeps {
  claim?: DocumentsClaim;
  nodeId: string;
  /** Every node the catalog knows of (heartbeats within SVC_NODE_TTL are live). */
  knownNodes: () => Promise<ClusterNode[]>;
  /** How long a live holder keeps serving after a forced release: its renewal interval. */
  renewMs: number;
  log: Logger;
}

export async function releaseDocuments(deps: ReleaseDeps, force: boolean): Promise<DocumentsReleased> {
  const { claim, nodeId, log } = deps;
  if (!claim) throw new SvcError('conflict', 'documents_not_claimed', 'Every node of this backend serves the document platform: there is no claim to release (only the s3 backend has one)');
  const read = await claim.read();
  if (!read) {
    if (!(await claim.takeFrom(undefined))) throw new SvcError('conflict', 'documents_claim_changed', 'Another node took the claim to the document platform while it was being released; look again (svc nodes)');
    return { nodeId, message: moved(nodeId, 'No node held it before') };
  }
  // Already here (a retry whose first answer was lost, or the wrong node asked): nothing to do.
  if (read.nodeId === nodeId && read.stoppedAt === undefined) {
    return { nodeId, message: `The document platform (/v1) is served by node ${nodeId}, the node that answered, already: nothing was handed on (send this to the node that should take it over).` };
  }
  const { state, why } = await holderState(read, await deps.knownNodes());
  if (state === 'live' && !force) {
    throw new SvcError('conflict', 'documents_holder_live', `Node ${read.nodeId} holds the document platform and is live (${why}): only the claim of a node that is gone is released; stop it first, or force it (svc nodes release-documents --force)`);
  }
  const previous = `node ${read.nodeId} (${state === 'live' ? `live, forced: it stops serving /v1 at its next renewal, within ${Math.ceil(deps.renewMs / 1000)} s` : why})`;
  // A live holder renews meanwhile (every few seconds): a forced release takes its renewed claim,
  // as long as it is still that holder's. Any other change (the holder came back, another node
  // took it over) is the operator's to look at again.
  let current: DocumentsClaimRead | undefined = read;
  for (let attempt = 0; ; attempt++) {
    if (await claim.takeFrom(current)) break;
    const forced = state === 'live' && force;
    current = forced && attempt < FORCED_ATTEMPTS ? await claim.read() : undefined;
    if (current?.nodeId !== read.nodeId || current.boot !== read.boot) {
      throw new SvcError('conflict', 'documents_claim_changed', 'The claim to the document platform changed while it was being released (another node took or renewed it); look again (svc nodes) and retry');
    }
  }
  log.warn('documents: claim to the document platform released to this node', { previous: read.nodeId, previousState: state, forced: force && state === 'live' });
  return { nodeId, previous: read.nodeId, previousState: state, message: moved(nodeId, `It was held by ${previous}, whose documents stay in its data directory`) };
}

const moved = (nodeId: string, before: string) => `The document platform (/v1) is now served by node ${nodeId}, from its own data directory. ${before}.`;

/** Whether the holder may still serve: a fresh heartbeat and something answering at its address. */
async function holderState(read: DocumentsClaimRead, nodes: ClusterNode[]): Promise<{ state: NonNullable<DocumentsReleased['previousState']>; why: string }> {
  if (read.stoppedAt !== undefined) return { state: 'stopped', why: `stopped cleanly at ${new Date(read.stoppedAt).toISOString()}` };
  if (read.lapsed) return { state: 'lapsed', why: 'its claim was not renewed within SVC_DOCUMENTS_LEASE_TTL' };
  const node = nodes.find((n) => n.nodeId === read.nodeId);
  if (!node || !node.live) return { state: 'down', why: node ? `down, last heartbeat ${new Date(node.lastSeenAt).toISOString()}` : 'no heartbeat' };
  const target = probeTarget(node.address);
  if (!target) return { state: 'live', why: `its heartbeat is within SVC_NODE_TTL${node.address ? ` and its address, ${node.address}, cannot be probed` : ''}` };
  if (await refusesConnections(target)) return { state: 'down', why: `nothing answers at ${node.address}` };
  return { state: 'live', why: `its heartbeat is within SVC_NODE_TTL and ${node.address} accepts connections` };
}

/** Host and port of a heartbeat's address; none for an unspecified host (0.0.0.0, ::), which names no machine. */
function probeTarget(address: string): { host: string; port: number } | undefined {
  const at = address.lastIndexOf(':');
  if (at <= 0) return undefined;
  const host = address.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  const port = Number(address.slice(at + 1));
  if (!Number.isInteger(port) || port <= 0 || host === '0.0.0.0' || host === '::') return undefined;
  return { host, port };
}

/** True when the address refuses a connection (the process is gone); a connection or a silence is not proof of that. */
function refusesConnections(target: { host: string; port: number }): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(target);
    const done = (refused: boolean) => {
      socket.destroy();
      resolve(refused);
    };
    socket.setTimeout(PROBE_MS, () => done(false));
    socket.once('connect', () => done(false));
    socket.once('error', (err: NodeJS.ErrnoException) => done(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH'].includes(err.code ?? '')));
  });
}
