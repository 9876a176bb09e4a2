// `svc legacy import REPO [--all | DOCID...]`: legacy documents moved into the document platform
// through POST /v1/legacy/import, a bounded number at a time, each followed to its job's end.
// The server keeps one document per legacy document, so a run stopped (Ctrl-C) and started again
// asks again for everything and the finished ones answer at once as already imported: no state
// file is needed. Progress on stderr, the report on stdout; exit 1 when any import failed.

import { Readable } from 'node:stream';
import { type Command, type Parsed, SERVER_OPTION, flag, parseCount, serverUrl, stringOption } from './args.js';
import { ApiError, UsageError, describe } from './errors.js';
import { call, callJson, drain, headerValue } from './http.js';
import { formatBytes, formatDuration } from './progress.js';
import { Backoff, retryNote } from './retry.js';

const PAGE = 1000;
/** How long one GET of a job waits for its end (GET /v1/jobs/{id}?wait=). */
const JOB_WAIT_SECONDS = 30;
const REDRAW_MS = 200;
const LINE_EVERY_MS = 5000;

export const legacy: Command = {
  usage: `  svc legacy import REPO (--all | DOCID...) [--concurrency N] [--placement HINT]
                   imports legacy documents (every one of REPO with --all) as documents, N at a
                   time (default 4); a repeat skips those imported; report on stdout, exit 1 if
                   any failed
`,
  options: { ...SERVER_OPTION, all: { type: 'boolean' }, concurrency: { type: 'string' }, placement: { type: 'string' } },
  run: legacyCommand,
};

type Outcome = { kind: 'imported'; bytes: number } | { kind: 'present' } | { kind: 'failed'; reason: string };


async function legacyCommand(parsed: Parsed): Promise<number> {
  const [sub, repo, ...ids] = parsed.positionals;
  if (sub !== 'import') throw new UsageError(sub === undefined ? 'legacy needs a subcommand: import' : `unknown legacy subcommand "${sub}" (there is: import)`);
  if (repo === undefined || repo === '') throw new UsageError('legacy import needs a repository name');
  const all = flag(parsed, 'all');
  if (all && ids.length > 0) throw new UsageError('legacy import takes --all or document ids, not both');
  if (!all && ids.length === 0) throw new UsageError('legacy import needs --all or at least one document id');
  const concurrencyRaw = stringOption(parsed, 'concurrency');
  const concurrency = concurrencyRaw === undefined ? 4 : parseCount(concurrencyRaw, '--concurrency', 1, 64);
  const placement = stringOption(parsed, 'placement');
  if (placement !== undefined && !['transient', 'archival', 'legal_hold'].includes(placement)) throw new UsageError('--placement must be transient, archival or legal_hold');
  const server = serverUrl(parsed);
  const toStderr = retryNote('svc legacy import');
  const backoff = new Backoff((err, delay, attempt) => process.stderr.write(`${toStderr(err, delay, attempt)}\n`));
  const todo = all ? await listAll(server, repo, backoff) : [...new Set(ids)];

  const progress = new DocProgress(repo, todo.length);
  const failures: Array<{ id: string; reason: string }> = [];
  const counts = { imported: 0, present: 0, failed: 0 };
  let next = 0;
  let stopping = false;
  let fatal: unknown;
  const onSigint = () => {
    if (stopping) process.exit(130);
    stopping = true;
    progress.note('svc legacy import: stopping after the imports under way (Ctrl-C again to leave now; a new run skips what is done)');
  };
  process.on('SIGINT', onSigint);
  const worker = async () => {
    while (!stopping && fatal === undefined && next < todo.length) {
      const id = todo[next++]!;
      let outcome: Outcome;
      try {
        outcome = await importOne(server, repo, id, placement, (line) => progress.note(line));
      } catch (err) {
        // The repository is gone, the token lacks the capability: no other document will do better.
        if (err instanceof ApiError && (err.status === 401 || err.status === 403 || err.code === 'legacy_repo_not_found')) {
          fatal = err;
          return;
        }
        outcome = { kind: 'failed', reason: describe(err) };
      }
      if (outcome.kind === 'failed') {
        counts.failed++;
        failures.push({ id, reason: outcome.reason });
      } else counts[outcome.kind]++;
      progress.done(outcome.kind === 'imported' ? outcome.bytes : 0, counts);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, Math.max(1, todo.length)) }, worker));
  } finally {
    process.off('SIGINT', onSigint);
    progress.finish(counts);
  }
  if (fatal !== undefined) throw fatal;
  const notStarted = todo.length - next;
  const out = [`imported: ${counts.imported}`, `already present: ${counts.present}`, `failed: ${counts.failed}`];
  for (const f of failures.sort((a, b) => (a.id < b.id ? -1 : 1))) out.push(`  ${f.id}: ${f.reason}`);
  if (stopping) out.push(`not started (stopped): ${notStarted}`);
  process.stdout.write(`${out.join('\n')}\n`);
  if (counts.failed > 0) return 1;
  return stopping ? 130 : 0;
}

/** Every document id of the repository, page by page. */
async function listAll(server: string, repo: string, backoff: Backoff): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  do {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (cursor) q.set('cursor', cursor);
    const { json } = await callJson<{ ids: string[]; nextCursor?: string }>(backoff, server, `/legacy/${encodeURIComponent(repo)}?${q}`, [200]);
    ids.push(...json.ids);
    cursor = json.nextCursor;
    backoff.reset();
  } while (cursor);
  return ids;
}

/** One import: requested (retried while the server is away), then its job followed to its end. */
async function importOne(server: string, repo: string, id: string, placement: string | undefined, note: (line: string) => void): Promise<Outcome> {
  const toNote = retryNote(`svc legacy import ${id}`);
  const backoff = new Backoff((err, delay, attempt) => note(toNote(err, delay, attempt)));
  const body = Buffer.from(JSON.stringify({ repo, legacyDocId: id, ...(placement ? { placementHint: placement } : {}) }));
  const { json: started } = await callJson<{ jobId: string; documentId: string; alreadyImported?: boolean }>(backoff, server, '/v1/legacy/import', [202], {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Content-Length': body.length },
    body: Readable.from([body]),
  });
  if (started.alreadyImported) return { kind: 'present' };
  for (;;) {
    // The server answers once the job has ended, or after the wait: one request per job, no polling delay.
    const { json: job } = await callJson<{ state: string; error: { code: string; message: string } | null }>(backoff, server, `/v1/jobs/${started.jobId}?wait=${JOB_WAIT_SECONDS}`, [200]);
    if (job.state === 'completed') break;
    if (job.state === 'failed' || job.state === 'dead') return { kind: 'failed', reason: job.error ? `${job.error.code}: ${job.error.message}` : `the job is ${job.state}` };
  }
  const head = await backoff.retry(() => call(server, `/v1/documents/${started.documentId}/content`, [200], { method: 'HEAD' }));
  drain(head);
  return { kind: 'imported', bytes: Number(headerValue(head.headers, 'content-length') ?? 0) };
}

/** Documents done of a known total, bytes imported, rates and ETA: a redrawn line on a terminal, else a line every 5 s. */
class DocProgress {
  private readonly tty = process.stderr.isTTY === true;
  private readonly started = Date.now();
  private finished = 0;
  private bytes = 0;
  private lastDraw = 0;
  private drawn = false;

  constructor(
    private readonly repo: string,
    private readonly total: number,
  ) {}

  done(bytes: number, counts: Record<string, number>): void {
    this.finished++;
    this.bytes += bytes;
    const now = Date.now();
    // The last line is finish()'s.
    if (this.finished >= this.total || now - this.lastDraw < (this.tty ? REDRAW_MS : LINE_EVERY_MS)) return;
    this.lastDraw = now;
    this.write(this.line(counts));
  }

  note(text: string): void {
    if (this.tty && this.drawn) process.stderr.write('\r\x1b[K');
    process.stderr.write(`${text}\n`);
    this.drawn = false;
  }

  finish(counts: Record<string, number>): void {
    this.write(this.line(counts));
    if (this.tty && this.drawn) process.stderr.write('\n');
    this.drawn = false;
  }

  private write(line: string): void {
    if (this.tty) {
      process.stderr.write(`\r\x1b[K${line}`);
      this.drawn = true;
    } else process.stderr.write(`${line}\n`);
  }

  private line(counts: Record<string, number>): string {
    const seconds = Math.max(0.001, (Date.now() - this.started) / 1000);
    const rate = this.finished / seconds;
    const left = this.total - this.finished;
    const eta = rate > 0 ? left / rate : Infinity;
    return `${this.repo}: ${this.finished}/${this.total} documents (imported ${counts.imported}, present ${counts.present}, failed ${counts.failed}), ${formatBytes(this.bytes)}, ${rate.toFixed(1)} docs/s, ${formatBytes(Math.round(this.bytes / seconds))}/s, ETA ${formatDuration(eta)}`;
  }
}

