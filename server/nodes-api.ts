// The operator endpoints of the nodes sharing the catalog (engine/ops/nodes.ts), beside GC's:
//   GET    /api/ops/v1/nodes            { nodes: [{ nodeId, address, state, lastSeenAt, rootHolder, rootHolderSince?, self }] }
//   DELETE /api/ops/v1/nodes/{nodeId}   forgets a node that is down: GC stops waiting for its marks
//                                       (409 node_live while it is live, 404 node_not_found)
//   POST   /api/ops/v1/nodes/release-documents[?force=true]
//                                       s3: this node takes the document platform's claim from a
//                                       holder that is gone (409 documents_holder_live while it is
//                                       live, unless force; engine/ops/documents-release.ts)
import { SvcError } from '../engine/base/errors.js';
import type { ServerContext } from './server-context.js';
import type { Router } from './router.js';

const ROUTE = '/api/ops/v1/nodes';

export function mountNodesApi(router: Router, { engine }: ServerContext): void {
  router.on('GET', ROUTE, async ({ ex, query }) => {
    const unknown = [...query.keys()][0];
    if (unknown !== undefined) throw new SvcError('invalid', 'invalid_request', `Unknown parameter ${unknown}`);
    ex.json(200, { nodes: await engine.cluster.list() }, { 'Cache-Control': 'no-store' });
  }, { capability: 'observability.read' });

  // Forgetting a node lets GC collect what only that node referenced: GC's capability.
  router.on('DELETE', `${ROUTE}/:nodeId`, async ({ ex, params }) => {
    ex.json(200, await engine.cluster.forget(decodeSegment(params[0]!)), { 'Cache-Control': 'no-store' });
  }, { capability: 'gc.run' });

  // Moving the document platform between nodes: an operator's capability of its own.
  router.on('POST', `${ROUTE}/release-documents`, async ({ ex, query }) => {
    let force = false;
    for (const [name, value] of query) {
      if (name !== 'force') throw new SvcError('invalid', 'invalid_request', `Unknown parameter ${name} (this route takes force)`);
      if (value !== 'true' && value !== 'false') throw new SvcError('invalid', 'invalid_request', 'force must be true or false');
      force = value === 'true';
    }
    ex.json(200, await engine.cluster.releaseDocuments(force), { 'Cache-Control': 'no-store' });
  }, { capability: 'nodes.admin' });
}

function decodeSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}
