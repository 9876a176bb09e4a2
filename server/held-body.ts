// A request body taken from its first byte (uWS drops data that arrives before onData is set)
// while the handler still awaits something (token verification): the socket is paused at once
// and what already arrived is kept, then handed over in order to whoever reads it.

import type { BodySource } from './body-feed.js';
import type { RequestBody } from './request-body.js';

export type BodySink = (chunk: Uint8Array, isLast: boolean) => void;

export class HeldBody implements BodySource {
  private held: Uint8Array[] = [];
  private ended = false;
  private sink?: BodySink;

  constructor(private readonly body: RequestBody) {
    body.read((chunk, isLast) => {
      if (this.sink) return this.sink(new Uint8Array(chunk), isLast);
      this.held.push(new Uint8Array(chunk.slice(0)));
      if (isLast) this.ended = true;
    });
    body.pause();
  }

  /** Replays what was held, then passes live chunks once `resume` lets the socket read again. */
  start(sink: BodySink): void {
    this.sink = sink;
    const held = this.held;
    this.held = [];
    held.forEach((chunk, i) => sink(chunk, this.ended && i === held.length - 1));
    if (this.ended && held.length === 0) sink(new Uint8Array(0), true);
  }

  pause(): void {
    this.body.pause();
  }

  resume(): void {
    this.body.resume();
  }
}
