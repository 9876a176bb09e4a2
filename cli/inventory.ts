// `svc stat ID` (headers and summary of one blob, as JSON) and `svc ls` (the inventory).

import { type Command, type Parsed, SERVER_OPTION, flag, parseCount, serverUrl, stringOption } from './args.js';
import { blobPath, parseBlobId } from './blob-id.js';
import { UsageError, describe } from './errors.js';
import { call, callJson, drain } from './http.js';
import { Backoff, retryBudgetMs } from './retry.js';

/** Quick commands wait less for a server that is away. */
const QUICK_BUDGET_MS = Math.min(retryBudgetMs(), 15_000);

/** Response headers worth showing (hop-by-hop and per-response ones left out). */
const SHOWN = ['content-type', 'content-length', 'etag', 'last-modified', 'cache-control', 'accept-ranges'];

const note = (what: string) => (err: unknown, delay: number) => process.stderr.write(`svc ${what}: ${describe(err)}; retrying in ${(delay / 1000).toFixed(1)} s\n`);

export const stat: Command = {
  usage: `  svc stat ID      the blob's headers and summary as JSON
`,
  options: SERVER_OPTION,
  run: statBlob,
};

export const ls: Command = {
  usage: `  svc ls [--limit N] [--all]
                   the inventory, newest first: id, size, media type, creation time
`,
  options: { ...SERVER_OPTION, limit: { type: 'string' }, all: { type: 'boolean' } },
  run: listBlobs,
};

async function statBlob(parsed: Parsed): Promise<number> {
  if (parsed.positionals.length !== 1) throw new UsageError('stat needs exactly one blob ID');
  const server = serverUrl(parsed);
  const blob = parseBlobId(parsed.positionals[0]);
  const backoff = new Backoff(note('stat'), QUICK_BUDGET_MS);
  // The metadata first: its 404 carries the error envelope, a HEAD's cannot.
  const { json: metadata } = await callJson<{ summary: unknown }>(backoff, server, `${blobPath(blob.id)}/metadata?limit=1`, [200]);
  const head = await backoff.retry(() => call(server, blobPath(blob.id), [200], { method: 'HEAD' }));
  drain(head);
  const headers: Record<string, string> = {};
  for (const name of SHOWN) {
    const v = head.headers[name];
    if (v !== undefined) headers[name] = Array.isArray(v) ? v.join(', ') : v;
  }
  process.stdout.write(`${JSON.stringify({ id: blob.id, status: head.status, headers, summary: metadata.summary }, null, 2)}\n`);
  return 0;
}

interface Summary {
  id: string;
  size: number;
  mediaType: string;
  createdAt: string;
}

async function listBlobs(parsed: Parsed): Promise<number> {
  if (parsed.positionals.length !== 0) throw new UsageError('ls takes no arguments');
  const server = serverUrl(parsed);
  const rawLimit = stringOption(parsed, 'limit');
  const limit = rawLimit === undefined ? undefined : parseCount(rawLimit, '--limit', 1, 1000);
  const all = flag(parsed, 'all');
  const backoff = new Backoff(note('ls'), QUICK_BUDGET_MS);
  let cursor: string | undefined;
  do {
    const query = new URLSearchParams();
    if (limit !== undefined) query.set('limit', String(limit));
    if (cursor !== undefined) query.set('cursor', cursor);
    const qs = query.toString();
    const { json } = await callJson<{ blobs: Summary[]; nextCursor?: string }>(backoff, server, `/api/v1/blobs${qs ? `?${qs}` : ''}`, [200]);
    backoff.reset();
    const lines = json.blobs.map((b) => `${b.id}\t${b.size}\t${b.mediaType}\t${b.createdAt}\n`).join('');
    if (lines && !process.stdout.write(lines)) await new Promise((resolve) => process.stdout.once('drain', resolve));
    cursor = json.nextCursor;
    if (cursor !== undefined && !all) process.stderr.write('svc ls: more blobs follow; --all lists every page\n');
  } while (cursor !== undefined && all);
  return 0;
}
