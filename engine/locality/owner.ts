// Which node owns a session-localized upload: rendezvous hashing of (tenant, session) over the
// live nodes, so every node that sees the same nodes picks the same owner, and a node that
// joins or leaves moves only the sessions it wins or held.
import { createHash } from 'node:crypto';

export interface LiveNode {
  nodeId: string;
  /** host:port of its blob API. */
  address: string;
}

export function ownerOf(tenant: string, session: string, nodes: readonly LiveNode[]): LiveNode | undefined {
  let best: LiveNode | undefined;
  let bestScore = '';
  for (const node of nodes) {
    const score = createHash('sha256').update(`${tenant}\0${session}\0${node.nodeId}`).digest('hex');
    if (score > bestScore) {
      best = node;
      bestScore = score;
    }
  }
  return best;
}
