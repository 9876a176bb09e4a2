// A request body fed into an ingest with backpressure: the source pauses while the ingest is
// full and resumes when it drains.

import type { Ingest } from '../engine/cas/index.js';
import type { Stats } from '../engine/ops/index.js';
import type { BodySource } from './body-sources.js';
import type { Exchange } from './exchange.js';

interface FeedHandlers {
  /** Sees each chunk before the ingest takes it (a second hash). */
  chunk?: (chunk: Uint8Array) => void;
  /** The whole body was pushed. */
  last: () => void;
  /** The ingest or a handler failed. */
  fail: (err: unknown) => void;
  /** The client went away. */
  abort: () => void;
}

/** Feeds `source` into `ingest`; with `ready`, the ingest is admitted only once it resolves (bytes wait in its backlog). */
export function feedIngest(ex: Exchange, source: BodySource, ingest: Ingest, stats: Stats, h: FeedHandlers, ready?: Promise<void>): void {
  ex.onAbort(h.abort);
  ingest.onResume = () => source.resume();
  ingest.onError = h.fail;
  source.start((chunk, isLast) => {
    if (!ex.live) return;
    try {
      if (chunk.length) {
        // Counted as they arrive, so the rate moves while a large upload streams in.
        stats.recordBodyBytes(chunk.length);
        h.chunk?.(chunk);
        if (!ingest.push(chunk)) source.pause();
      }
      if (isLast) {
        // The body is in: the socket's pause was for it alone. A part acknowledged before its
        // ingest drains (uploads) would otherwise leave the keep-alive connection paused, and
        // the client's next request unread.
        ingest.onResume = () => {};
        source.resume();
        h.last();
      }
    } catch (err) {
      h.fail(err);
    }
  });
  const admit = () => {
    ingest.admit(() => source.resume());
    if (!ingest.isAdmitted) source.pause();
  };
  if (!ready) return admit();
  source.pause();
  ready.then(admit, h.fail);
}
