// On s3 one node at a time serves the document platform: the holder of the claim in the bucket
// (engine/store/s3-only/documents-node.ts). The claim moves (a lapsed lease taken over, svc nodes
// release-documents), so every node mounts /v1 and each request is checked as it arrives, before
// its token: a node that does not serve it now answers 503 documents_single_node naming the one
// that does. Never forwarded: the client (or its load balancer) sends /v1 to the holder.
import type { Engine } from '../engine/engine.js';
import { SvcError } from '../engine/base/errors.js';
import type { DocumentsClaim } from '../engine/store/index.js';

const WHERE = '(docs/backends.md, "s3")';

/** The docs router's `before` on a backend with a documents claim; undefined where every node serves /v1. */
export function documentsGate(engine: Engine): ((pattern: string) => void) | undefined {
  const claim = engine.backend.documents;
  if (!claim) return undefined;
  return (pattern) => {
    if (pattern.startsWith('/v1/') && !claim.serving()) throw notServedHere(claim);
  };
}

export function notServedHere(claim: DocumentsClaim): SvcError {
  const where = claim.elsewhere();
  switch (where.kind) {
    case 'held':
      return new SvcError('unavailable', 'documents_single_node', where.stoppedAt === undefined
        ? `On the s3 backend the document platform is served by one node, ${where.nodeId}; send /v1 requests to it ${WHERE}`
        : `On the s3 backend the document platform is served by one node, ${where.nodeId}, which stopped cleanly at ${new Date(where.stoppedAt).toISOString()}: ` +
          `start it again on its data directory, or hand the document platform on with svc nodes release-documents ${WHERE}`);
    case 'lapsed':
      return new SvcError('unavailable', 'documents_single_node',
        `This node's claim to the document platform was not renewed within SVC_DOCUMENTS_LEASE_TTL (the bucket did not answer, or the process was paused): ` +
        `it serves /v1 again once the claim is renewed, unless another node has taken it over ${WHERE}`, { retryAfterSeconds: 1 });
    case 'unknown':
      return new SvcError('unavailable', 'documents_single_node', `On the s3 backend the document platform is served by one node; which one could not be read from the bucket yet ${WHERE}`, { retryAfterSeconds: 1 });
  }
}
