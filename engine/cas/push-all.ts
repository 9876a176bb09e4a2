// Feeding an ingest from the engine itself (not a request body): document content from a file,
// a view's bytes from a worker, an UploadPartCopy's range. The ingest's backpressure is
// respected: while `push` says it is full, the next piece waits for `onResume`.

import type { Ingest } from './ingest.js';

/**
 * Admits `ingest`, then pushes every piece (each seen by `seen` first); rejects with the ingest's
 * failure. `signal` (the client went away): stops waiting for the ingest's admission or for it
 * to take bytes again at once, and a piece being read is the last; rejects with the signal's
 * reason, and the caller aborts the ingest. Leaving the loop closes `pieces` (its `return`).
 */
export async function pushAll(ingest: Ingest, pieces: Iterable<Uint8Array> | AsyncIterable<Uint8Array>, seen?: (piece: Uint8Array) => void, signal?: AbortSignal): Promise<void> {
  let wake: (() => void) | undefined;
  let failure: unknown;
  const resume = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  ingest.onResume = resume;
  ingest.onError = (err) => {
    failure ??= err;
    resume();
  };
  signal?.throwIfAborted();
  const stop = () => {
    failure ??= signal!.reason;
    resume();
  };
  signal?.addEventListener('abort', stop, { once: true });
  try {
    await new Promise<void>((admitted) => {
      wake = admitted;
      ingest.admit(() => {
        wake = undefined;
        admitted();
      });
    });
    if (failure) throw failure;
    for await (const piece of pieces) {
      if (failure) throw failure;
      seen?.(piece);
      // false: full; onResume (never called from inside push) wakes the loop.
      if (!ingest.push(piece)) await new Promise<void>((r) => (wake = r));
    }
    if (failure) throw failure;
    ingest.onResume = () => {};
  } finally {
    signal?.removeEventListener('abort', stop);
  }
}
