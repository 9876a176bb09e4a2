// A blob's bytes with the full read contract, for every resource that serves stored content (the
// blob API, a document's content): preconditions, one range, validators, and the read path that
// fetches and checks only the blocks needed, written as the socket drains.

import type { Engine } from '../engine/engine.js';
import type { Manifest } from '../engine/store/index.js';
import { evaluate } from './conditional.js';
import { type Exchange, JSON_UTF8, header, type RequestHead } from './exchange.js';

const IMMUTABLE = 'public, max-age=31536000, immutable';

/** The last Last-Modified formatted (answers in a row often name one second; formatting costs ~0.5 µs). */
let lastDate = { ms: Number.NaN, text: '' };
function httpDateOf(ms: number): string {
  if (ms !== lastDate.ms) lastDate = { ms, text: new Date(ms).toUTCString() };
  return lastDate.text;
}

/** How bytes served by another resource differ from the blob's own answer (document content). */
interface ServedAs {
  etag?: string;
  mediaType?: string;
  lastModifiedMs?: number;
  /** null: no Cache-Control (an S3 object may change); absent: the blob's `immutable`. */
  cacheControl?: string | null;
  /** Headers every answer but a refusal carries besides the validators (S3: user metadata, X-Svc-Blob-Id). */
  headers?: Record<string, string>;
  /** Answers a 412 or 416 in the resource's own error form (S3's XML) instead of the blob API's. */
  refuse?: (status: 412 | 416, headers: Record<string, string>) => void;
}

/** The precondition and range headers (read in the handler: uWS requests do not outlive it). */
export function readConditions(req: RequestHead) {
  return {
    ifMatch: header(req, 'if-match'),
    ifNoneMatch: header(req, 'if-none-match'),
    ifModifiedSince: header(req, 'if-modified-since'),
    ifUnmodifiedSince: header(req, 'if-unmodified-since'),
    ifRange: header(req, 'if-range'),
    range: header(req, 'range'),
  };
}

/**
 * A blob's bytes with the full read contract: preconditions, one range, validators, the read
 * path that fetches and checks only the blocks needed. `etag` defaults to the blob id.
 */
export function serveBlob(engine: Engine, ex: Exchange, conditions: ReturnType<typeof readConditions>, manifest: Manifest, headOnly: boolean, view: ServedAs = {}, charge?: (bytes: number) => void): void {
  const size = manifest.record.size;
  const etag = view.etag ?? `"${manifest.id}"`;
  const lastModifiedMs = view.lastModifiedMs === undefined ? manifest.lastModifiedMs : Math.floor(view.lastModifiedMs / 1000) * 1000;
  const httpDate = view.lastModifiedMs === undefined ? manifest.lastModified : httpDateOf(lastModifiedMs);
  const cacheControl = view.cacheControl === null ? undefined : view.cacheControl ?? IMMUTABLE;
  const validators: Record<string, string> = { ETag: etag, 'Last-Modified': httpDate, ...(cacheControl === undefined ? {} : { 'Cache-Control': cacheControl }) };
  const decision = evaluate({ etag, lastModified: lastModifiedMs, size }, conditions);
  switch (decision.status) {
    case 304:
      ex.send(304, validators);
      return;
    case 412:
      if (view.refuse) return view.refuse(412, validators);
      // An error like every other: the envelope (HEAD gets its length), beside the validators.
      ex.send(412, { 'Content-Type': JSON_UTF8, ...validators }, JSON.stringify({ error: 'precondition_failed', message: 'If-Match or If-Unmodified-Since does not hold for the current representation' }));
      return;
    case 416:
      if (view.refuse) return view.refuse(416, { 'Content-Range': `bytes */${size}` });
      ex.send(416, { 'Content-Type': JSON_UTF8, 'Content-Range': `bytes */${size}` }, JSON.stringify({ error: 'invalid_range', message: 'Range is malformed, unsatisfiable or asks for more than one range' }));
      return;
  }
  const [start, end] = decision.status === 206 ? [decision.start, decision.end + 1] : [0, size];
  const headers: Record<string, string> = { 'Content-Type': view.mediaType ?? manifest.record.mediaType, ...validators, 'Accept-Ranges': 'bytes', ...view.headers };
  if (decision.status === 206) headers['Content-Range'] = `bytes ${start}-${end - 1}/${size}`;
  if (headOnly) {
    ex.sendHead(decision.status, headers, end - start);
    return;
  }
  // The bytes this answer serves (a range: only those), against the caller's budget; may refuse (429).
  charge?.(end - start);
  const cached = engine.reader.cachedRange(manifest, start, end);
  if (cached) {
    // Small and already verified in memory: answer at once, without the streaming machinery.
    ex.send(decision.status, headers, cached);
    engine.stats.recordRead(cached.length);
    return;
  }
  void stream(engine, ex, manifest, start, end, decision.status, headers);
}

async function stream(engine: Engine, ex: Exchange, manifest: Manifest, start: number, end: number, code: number, headers: Record<string, string>): Promise<void> {
  const pieces = engine.reader.range(manifest, start, end);
  try {
    const { sent, error } = await ex.streamBody(pieces, end - start, code, headers);
    if (error === undefined) engine.stats.recordRead(sent);
  } finally {
    await pieces.return(undefined);
  }
}
