// Legacy repositories read through over HTTP: GET and HEAD /legacy/{repo}/{docId}. Mounted on the
// document platform's router: its guard verifies the token and checks `legacy.read` (or
// `legacy.import`), its meter charges the budgets; the id is decoded and checked here;
// engine/legacy resolves and opens both files before the status line, so 404, 422 and 409 are
// real statuses; a 200 streams the binary as the socket drains (one piece in memory).

import { parseLimit } from '../engine/cas/index.js';
import { badRequest } from '../engine/documents/index.js';
import {
  type LegacyDocument, LegacyError, type LegacyFailure, UNKNOWN_REPO_LABEL, legacyInvalidId, legacyRepoNotFound, parseLegacyDocId,
} from '../engine/legacy/index.js';
import { jsonBody } from './body-readers.js';
import { answerOnce, jsonAnswer, keyedRequest, scopeOf } from './idempotent.js';
import type { ImportAnswer } from '../engine/legacy/index.js';
import type { ServerContext } from './server-context.js';
import type { Exchange } from './exchange.js';
import { parseImportRequest } from './commands/legacy-import.js';
import { type Router, caller } from './router.js';

const OCTET_STREAM = 'application/octet-stream';

export function mountLegacyApi(router: Router, { engine, config }: ServerContext): void {
  const legacy = engine.legacy;
  const metrics = legacy.metrics;

  // Import (docs/legacy.md, "Importing"): 202 at once with the document's id and the job. On a
  // node that does not serve the document platform now (s3) the router's gate answers 503.
  router.on('POST', '/v1/legacy/import', (call) => {
    const principal = caller(call);
    // Answered once per Idempotency-Key (server/idempotent.ts): the answer commits with the mapping and the job.
    const keyed = keyedRequest(call.req, call.ex.method);
    return answerOnce(call.ex, engine.idempotency, scopeOf(principal.tenant, principal), keyed, async () => (await call.body).digest, async (keep) => {
      const { value } = await call.body;
      const answerOf = (r: ImportAnswer) => jsonAnswer(202, { jobId: r.jobId, documentId: r.documentId, alreadyImported: r.alreadyImported }, { Location: `/v1/jobs/${r.jobId}` });
      return answerOf(await engine.legacyImports.request(principal, parseImportRequest(value), keep(answerOf)));
    });
  }, { name: '/v1/legacy/import', capability: 'legacy.import', body: jsonBody(config.docMaxJsonBytes) });

  // A repository's document ids, a page at a time (the walk of `svc legacy import --all`).
  router.on('GET', '/legacy/:repo', async (call) => {
    const { ex, params, query } = call;
    for (const name of query.keys()) if (name !== 'limit' && name !== 'cursor') throw badRequest(`Unknown parameter ${name} (this list takes limit, cursor)`);
    const limit = parseLimit(query.get('limit') ?? undefined);
    const cursor = query.get('cursor');
    const repoName = decode(params[0]!, 'repository name');
    const repo = legacy.get(repoName);
    if (!repo) throw legacyRepoNotFound(repoName);
    // The last id of a page, sealed for this caller and repository (engine/auth/cursor-seal.ts).
    const cursors = engine.cursors.of('legacy-ids', caller(call));
    const page = await repo.listIds(limit, cursors.open(repo.name, cursor ?? undefined));
    const last = page.ids[page.ids.length - 1];
    ex.json(200, page.more && last !== undefined ? { repo: repo.name, ids: page.ids, nextCursor: cursors.seal(repo.name, last) } : { repo: repo.name, ids: page.ids });
  }, { name: '/legacy/:repo', capability: 'legacy.read' });

  // A download: an operation of the caller's tenant, the bytes it serves against the caller's budget.
  router.on(['GET', 'HEAD'], '/legacy/:repo/:docId', async ({ ex, params, chargeBytes }) => {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    const repoName = decode(params[0]!, 'repository name');
    const repo = legacy.get(repoName);
    if (!repo) {
      metrics.failure(UNKNOWN_REPO_LABEL, 'repo_not_found', seconds());
      throw legacyRepoNotFound(repoName);
    }
    let doc: LegacyDocument;
    try {
      doc = await repo.open(parseLegacyDocId(decode(params[1]!, 'document id')));
    } catch (err) {
      if (err instanceof LegacyError) metrics.failure(repo.name, err.reason, seconds());
      throw err;
    }
    const headers = {
      'Content-Type': doc.descriptor.mediaType ?? OCTET_STREAM,
      // Read through with the caller's token: shared caches keep nothing, a client asks again.
      'Cache-Control': 'private, no-cache',
      // The media type comes from legacy metadata: browsers must not guess another.
      'X-Content-Type-Options': 'nosniff',
    };
    if (!ex.live) {
      await doc.close();
      metrics.failure(repo.name, 'client_gone', seconds());
      return;
    }
    try {
      if (ex.method === 'GET') chargeBytes(doc.size);
    } catch (err) {
      await doc.close();
      throw err;
    }
    if (ex.method === 'HEAD' || doc.size === 0) {
      await doc.close();
      if (ex.method === 'HEAD') ex.sendHead(200, headers, doc.size);
      else ex.send(200, headers, '');
      metrics.read(repo.name, 0, seconds());
      return;
    }
    await stream(ex, doc, headers, (outcome, bytes) => {
      if (outcome === 'ok') metrics.read(repo.name, bytes, seconds());
      else metrics.failure(repo.name, outcome, seconds(), bytes);
    });
  }, { name: '/legacy/:repo/:docId', capability: 'legacy.read', operation: true });
}

/** Streams the binary as the socket drains; a failure after the status line closes the connection. */
async function stream(ex: Exchange, doc: LegacyDocument, headers: Record<string, string>, done: (outcome: 'ok' | LegacyFailure, bytes: number) => void): Promise<void> {
  try {
    const { sent, error } = await ex.streamBody(doc.pieces(), doc.size, 200, headers);
    if (error !== undefined) {
      done(error instanceof LegacyError ? error.reason : 'stream_failed', sent);
      if (sent > 0) ex.surface.log.warn('legacy read cut after its status line', { requestId: ex.requestId, repo: doc.repo, docId: doc.docId, sent, size: doc.size, err: String(error) });
    } else done(ex.aborted || sent < doc.size ? 'client_gone' : 'ok', sent);
  } finally {
    await doc.close();
  }
}

/** A path parameter percent-decoded once; malformed encoding is 400. */
function decode(raw: string, what: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw legacyInvalidId(`The ${what} is not valid percent-encoding`);
  }
}
