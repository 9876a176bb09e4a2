// A request's body as the exchange sees it: how much was declared and read, whether the socket is
// paused, and what an answer given before the body's end (an early answer) does with the rest.
//
// Closing the socket right after an early answer makes the kernel reset the connection while the
// client still sends, and most clients (Node's http, Python's http.client) then lose the answer
// to EPIPE/ECONNRESET. So the socket is never closed with the answer; as nginx's lingering close:
// - a rest of at most `lingerBytes` is read and dropped (uWS goes on parsing the body after the
//   answer; chunks no longer reach the handler), so a client that reads only once it has sent
//   everything still gets the answer, and the connection then serves its next request. When the
//   request asked to close the connection, uWS closes it with the answer, so the answer waits until
//   that rest is read;
// - a larger rest, or one of unknown length (chunked), is not read: the socket is paused and the
//   answer says `Connection: close`; the client reads it and closes (curl, Node, browsers do),
//   else uWS's idle timeout (10 s without progress) closes the connection.
// uWS forbids touching a response once it is answered, so the choice is made before answering.

import type { HttpRequest, HttpResponse } from 'uWebSockets.js';

/** Below uWS's 10 s idle timeout, which it checks every 4 s. */
const KEEP_ALIVE_MS = 3000;

export class RequestBody {
  /** Declared length; undefined for a chunked body. */
  private readonly declared: number | undefined;
  private received = 0;
  private complete: boolean;
  private paused = false;
  private reading = false;
  /** The request said `Connection: close`: uWS closes the connection with the answer. */
  private readonly closeAsked: boolean;
  /** An answer waiting for the body's end (see above). */
  private deferred?: () => void;
  /** From the first pause until the answer: re-arms uWS's idle timeout (rearmIdleTimeout). */
  private keepAlive?: NodeJS.Timeout;

  constructor(
    private readonly res: HttpResponse,
    req: HttpRequest,
    /** False once the response is answered or aborted: uWS then forbids pause and resume. */
    private readonly live: () => boolean,
  ) {
    const length = req.getHeader('content-length');
    // uWS has already refused a Content-Length that is not digits, and one beside Transfer-Encoding.
    this.declared = length !== '' ? Number(length) : req.getHeader('transfer-encoding') !== '' ? undefined : 0;
    this.complete = this.declared === 0;
    // Only an unfinished body can make an answer wait (whenAnswerable): a GET skips the header.
    this.closeAsked = !this.complete && /\bclose\b/i.test(req.getHeader('connection'));
  }

  /** Delivers the body's chunks (each valid only during the call) until the request is answered. */
  read(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    if (this.held) return this.replay(handler);
    this.reading = true;
    this.res.onData((chunk, isLast) => {
      this.received += chunk.byteLength;
      if (isLast) this.complete = true;
      if (this.live()) handler(chunk, isLast);
      else if (isLast && this.deferred) this.deferred();
    });
  }

  /** Chunks taken while the request waited for its handler (hold), and where they go once it reads. */
  private held?: { chunks: ArrayBuffer[]; ended: boolean; sink?: (chunk: ArrayBuffer, isLast: boolean) => void };

  /**
   * Takes the body from its first byte while the handler cannot run yet (a token being
   * verified): uWS drops data that arrives before onData is set. What arrives is kept and handed
   * over in order when the handler reads; the socket is paused at the first chunk that is not the
   * last (a body that came whole with its head never pauses its socket, nor starts the keep-alive timer).
   */
  hold(): void {
    if (this.held || this.complete) return;
    const held: NonNullable<RequestBody['held']> = (this.held = { chunks: [], ended: false });
    this.reading = true;
    this.res.onData((chunk, isLast) => {
      this.received += chunk.byteLength;
      if (isLast) this.complete = true;
      if (!this.live()) {
        if (isLast && this.deferred) this.deferred();
        return;
      }
      if (held.sink) return held.sink(chunk, isLast);
      held.chunks.push(chunk.slice(0));
      if (isLast) held.ended = true;
      else this.setPaused(true);
    });
  }

  private replay(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    const held = this.held!;
    const chunks = held.chunks;
    held.chunks = [];
    held.sink = handler;
    chunks.forEach((chunk, i) => handler(chunk, held.ended && i === chunks.length - 1));
    if (held.ended && chunks.length === 0) handler(new ArrayBuffer(0), true);
    // The rest comes as it arrives; a reader that cannot take it pauses again.
    if (!held.ended) this.resume();
  }

  /**
   * Runs `answer` (which writes the whole response) now, or once the body is in when the request
   * asked to close and its rest will be read (see above). The caller checks the response is alive.
   */
  whenAnswerable(lingerBytes: number, answer: () => void): void {
    if (!this.closeAsked || this.complete || this.rest() > lingerBytes) return answer();
    this.deferred = answer;
    if (!this.reading) this.read(() => {});
    this.setPaused(false);
  }

  private rest(): number {
    return this.complete ? 0 : this.declared === undefined ? Infinity : this.declared - this.received;
  }

  pause(): void {
    if (this.live()) this.setPaused(true);
  }

  resume(): void {
    if (this.live()) this.setPaused(false);
  }

  /** uWS misbehaves on resume() without a pause() before it, so the state is tracked. */
  private setPaused(paused: boolean): void {
    if (paused !== this.paused) this.res[paused ? 'pause' : 'resume']();
    this.paused = paused;
    // One timer from the first pause until the answer: an upload under backpressure pauses and
    // resumes many times a second, and a timer per pause would be made and cleared as often.
    if (paused && !this.keepAlive && this.live()) {
      this.keepAlive = setInterval(() => this.rearmIdleTimeout(), KEEP_ALIVE_MS);
      this.keepAlive.unref();
    }
  }

  /**
   * uWS's idle timeout (10 s without a byte received) runs on while a socket is paused, and once a
   * socket has been paused and resumed it also runs after the body's end, until the answer
   * (measured: a request paused and resumed before its last byte, then answered 13 s later, is
   * aborted at 12 s). An upload that waits longer for memory, for its turn or for its publication
   * would be reset. Every resume re-arms the timeout, so from the first pause until the answer a
   * pause and a resume in one tick re-arm it (no byte gets in or is held up by them). A socket
   * paused after an early answer is left for the timeout to close.
   */
  private rearmIdleTimeout(): void {
    if (!this.live()) return this.stopKeepAlive();
    if (this.paused) {
      this.res.resume();
      this.res.pause();
    } else {
      this.res.pause();
      this.res.resume();
    }
  }

  private stopKeepAlive(): void {
    clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }

  /** Where the body stood (the debug log of an aborted request). */
  progress(): { declared?: number; received: number; complete: boolean; paused: boolean; keptAlive: boolean } {
    return { declared: this.declared, received: this.received, complete: this.complete, paused: this.paused, keptAlive: this.keepAlive !== undefined };
  }

  /** True when an answer must first settle the socket (beforeAnswer): a body still coming, or a paused socket. */
  get unsettled(): boolean {
    return !this.complete || this.paused;
  }

  /**
   * Called just before an answer is written: sets the socket to read on (dropping the rest of an
   * unfinished body) or to stop reading (see above); true when the answer must say `Connection: close`.
   */
  beforeAnswer(lingerBytes: number): boolean {
    // A socket paused for the body alone must read again (the connection's next request).
    const drop = this.rest() <= lingerBytes;
    this.setPaused(!drop);
    // Answered: the idle timeout is uWS's again (it closes a socket left paused).
    this.stopKeepAlive();
    return !drop;
  }
}
