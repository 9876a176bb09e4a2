// `svc nodes` (the nodes sharing the server's catalog, live or down, and which hold roots) and
// `svc nodes forget ID` (a node that is down is gone for good: GC stops waiting for it), through
// GET and DELETE /api/ops/v1/nodes; `svc nodes release-documents [--force]` (s3: the node of
// --server takes the document platform from a holder that is gone), POST .../release-documents.

import { type Command, type Parsed, SERVER_OPTION, flag, serverUrl } from './args.js';
import { ApiError, UsageError, describe } from './errors.js';
import { call, callJson, readJson } from './http.js';
import { Backoff, retryBudgetMs } from './retry.js';

interface NodeView {
  nodeId: string;
  address: string;
  state: 'live' | 'down';
  lastSeenAt: string;
  rootHolder: boolean;
  self: boolean;
  /** What the node said of itself at its last heartbeat (shared catalogs). */
  summary?: { health?: 'ok' | 'unknown' | { failed: string[] }; traffic?: { requests: number; errors: number }; capacity?: { transfersInFlight: number } };
}

export const nodes: Command = {
  usage: `  svc nodes        the nodes sharing the server's catalog, one line each: id, address,
                   live or down since, root holder (GC waits for it while it is down) or not,
                   health, requests and errors since its start, transfers in flight (from
                   its last heartbeat; '-' where it told nothing)
  svc nodes forget ID
                   declare a node that is down gone for good: GC no longer waits for it, and
                   the references only its data directory held are lost (refused while live)
  svc nodes release-documents [--force]
                   s3: the node of --server takes over the document platform (/v1) from the
                   node that holds it, once that one is gone for good (refused while it is
                   live, unless --force); the documents stay in the old node's data directory
`,
  options: { ...SERVER_OPTION, force: { type: 'boolean' } },
  run: (parsed) => {
    const sub = parsed.positionals[0];
    if (sub !== 'release-documents' && flag(parsed, 'force')) throw new UsageError('--force goes with nodes release-documents only');
    return sub === 'forget' ? forget(parsed) : sub === 'release-documents' ? releaseDocuments(parsed) : list(parsed);
  },
};

const note = (err: unknown, delay: number) => process.stderr.write(`svc nodes: ${describe(err)}; retrying in ${(delay / 1000).toFixed(1)} s\n`);

async function list(parsed: Parsed): Promise<number> {
  if (parsed.positionals.length !== 0) throw new UsageError(`nodes: unknown subcommand "${parsed.positionals[0]}" (nodes, nodes forget ID, or nodes release-documents)`);
  const server = serverUrl(parsed);
  const { json } = await callJson<{ nodes: NodeView[] }>(new Backoff(note, Math.min(retryBudgetMs(), 15_000)), server, '/api/ops/v1/nodes', [200]);
  for (const n of json.nodes) {
    const state = n.state === 'live' ? 'live' : `down since ${n.lastSeenAt}`;
    const said = n.summary;
    const health = said?.health === undefined ? '-' : typeof said.health === 'string' ? said.health : `failed: ${said.health.failed.join(',')}`;
    const traffic = said?.traffic ? `${said.traffic.requests} requests, ${said.traffic.errors} errors` : '-';
    const transfers = said?.capacity ? `${said.capacity.transfersInFlight} transfers` : '-';
    const columns = [n.nodeId, n.address || '-', state, n.rootHolder ? 'root holder' : 'no roots', health, traffic, transfers];
    if (n.self) columns.push('(answered)');
    process.stdout.write(`${columns.join('\t')}\n`);
  }
  return 0;
}

async function forget(parsed: Parsed): Promise<number> {
  if (parsed.positionals.length !== 2) throw new UsageError('nodes forget needs exactly one node ID');
  const id = parsed.positionals[1]!;
  const server = serverUrl(parsed);
  // Not retried once answered: a refusal (409 node_live, 404 node_not_found) is the answer.
  const backoff = new Backoff(note, Math.min(retryBudgetMs(), 15_000));
  for (;;) {
    try {
      const reply = await call(server, `/api/ops/v1/nodes/${encodeURIComponent(id)}`, [200], { method: 'DELETE' });
      const answer = await readJson<{ message: string }>(reply);
      process.stdout.write(`${answer.message}\n`);
      return 0;
    } catch (err) {
      if (err instanceof ApiError) throw err;
      await backoff.wait(err);
    }
  }
}

async function releaseDocuments(parsed: Parsed): Promise<number> {
  if (parsed.positionals.length !== 1) throw new UsageError('nodes release-documents takes no operand (the node of --server takes the document platform)');
  const server = serverUrl(parsed);
  const path = `/api/ops/v1/nodes/release-documents${flag(parsed, 'force') ? '?force=true' : ''}`;
  // Retried only when no answer came: a repeat after a lost answer finds the claim here and says so.
  const backoff = new Backoff(note, Math.min(retryBudgetMs(), 15_000));
  for (;;) {
    try {
      const reply = await call(server, path, [200], { method: 'POST' });
      process.stdout.write(`${(await readJson<{ message: string }>(reply)).message}\n`);
      return 0;
    } catch (err) {
      if (err instanceof ApiError) throw err;
      await backoff.wait(err);
    }
  }
}
