// Where a request body comes from: the request's own socket, or a HeldBody (the bytes that arrived
// while the handler awaited something, such as a token check, then the rest of the socket).

import type { Exchange } from './exchange.js';
import type { RequestBody } from './request-body.js';

/** Receives a body's chunks (each valid only during the call). */
type BodySink = (chunk: Uint8Array, isLast: boolean) => void;

export interface BodySource {
  /** Starts delivering chunks. */
  start(sink: BodySink): void;
  pause(): void;
  resume(): void;
}

/** The request's own socket. */
export class SocketBody implements BodySource {
  constructor(private readonly ex: Exchange) {}

  start(sink: BodySink): void {
    this.ex.body.read((chunk, isLast) => sink(new Uint8Array(chunk), isLast));
  }

  pause(): void {
    this.ex.body.pause();
  }

  resume(): void {
    this.ex.body.resume();
  }
}

/**
 * A body taken from its first byte (uWS drops data that arrives before onData is set) while the
 * handler still awaits something: what arrives is kept, then handed over in order to whoever
 * reads it. The socket is paused at the first chunk that is not the body's last, so a body that
 * came whole with its head (a small upload) never pauses and resumes its socket, and what is held
 * stays what uWS had read already, as it would be after a pause at once.
 */
export class HeldBody implements BodySource {
  private held: Uint8Array[] = [];
  private ended = false;
  private sink?: BodySink;

  constructor(private readonly body: RequestBody) {
    body.read((chunk, isLast) => {
      if (this.sink) return this.sink(new Uint8Array(chunk), isLast);
      this.held.push(new Uint8Array(chunk.slice(0)));
      if (isLast) this.ended = true;
      else body.pause();
    });
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
