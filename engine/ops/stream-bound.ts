// How many operator event streams one principal holds open (SVC_OPS_MAX_STREAMS): a stream holds
// a socket and a subscriber for as long as the client wants, so one token could otherwise hold
// the server's sockets and snapshot writes for everyone.

import { SvcError } from '../base/errors.js';

/** A refused stream's Retry-After: a dashboard tab closed is seen at once, so a second is enough. */
const RETRY_AFTER_S = 1;

export class StreamBound {
  /** Open streams by holder; a holder with none is not kept. */
  private readonly open = new Map<string, number>();

  constructor(private readonly max: number) {}

  /** One more stream of `holder`: its release (call once, when the stream closes); 429 too_many_streams when it holds `max`. */
  take(holder: string): () => void {
    const held = this.open.get(holder) ?? 0;
    if (held >= this.max) {
      throw new SvcError('too_many_requests', 'too_many_streams', `This principal holds ${this.max} open event streams (SVC_OPS_MAX_STREAMS); close one first`, { retryAfterSeconds: RETRY_AFTER_S });
    }
    this.open.set(holder, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(holder) ?? 1) - 1;
      if (left > 0) this.open.set(holder, left);
      else this.open.delete(holder);
    };
  }

  /** Streams `holder` holds open. */
  held(holder: string): number {
    return this.open.get(holder) ?? 0;
  }
}
