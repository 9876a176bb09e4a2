// One request and its answer, for every surface: HEAD answered with a GET's headers and no body,
// early answers that settle the request body first (request-body.ts), the surface's error
// envelope, and bodies written piece by piece as the socket drains.

import { STATUS_CODES } from 'node:http';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { RequestBody } from './request-body.js';
import { requestIdOf } from './request-id.js';
import type { Surface } from './surface.js';

/** Reason phrases: RFC 9110's names where Node's table keeps older ones, and tus's 460. */
const STATUS_TEXT: Record<number, string> = { 413: 'Content Too Large', 422: 'Unprocessable Content', 460: 'Checksum Mismatch' };

export const status = (code: number) => `${code} ${STATUS_TEXT[code] ?? STATUS_CODES[code] ?? 'Unknown'}`;

export const JSON_UTF8 = 'application/json; charset=utf-8';

export type Headers = Record<string, string | undefined>;

/** What handlers read of a request: uWS's own (valid only during the callback) or a copy that outlives it. */
export type RequestHead = Pick<HttpRequest, 'getHeader' | 'getUrl' | 'getQuery' | 'getMethod' | 'getCaseSensitiveMethod' | 'getParameter' | 'forEach'>;

/** Answers up to this size are written at once, with a Content-Length (sendPieces). */
const SINGLE_WRITE_BYTES = 256 * 1024;

/** Per-request state: the response object is unusable once aborted or ended. */
export class Exchange {
  aborted = false;
  done = false;
  readonly method: string;
  /** The request body: read it through this, never through `res.onData`. */
  readonly body: RequestBody;
  private abortHandlers: Array<() => void> = [];
  private readonly started = performance.now();
  /** The request's `X-Request-Id` when valid, else one minted here; every answer carries it. */
  readonly requestId: string;
  /** The failure's name, for the surface's metrics. */
  private errorName?: string;

  constructor(
    readonly res: HttpResponse,
    req: HttpRequest,
    /** The route's name, a metrics label. */
    readonly route: string,
    readonly surface: Surface,
    /** Headers every answer of this route carries (CORS). */
    readonly baseHeaders: ReadonlyArray<[string, string]> = [],
    /** The request's id, when the caller read it already (the S3 listener also sends it as x-amz-request-id). */
    requestId: string = requestIdOf(req.getHeader('x-request-id')),
  ) {
    this.method = req.getCaseSensitiveMethod();
    this.requestId = requestId;
    this.body = new RequestBody(res, req, () => this.live);
    surface.begin();
    res.onAborted(() => {
      // Before an answer: the client went away or the connection timed out.
      if (!this.done && surface.log.enabled('debug')) surface.log.debug('aborted', { requestId: this.requestId, method: this.method, route: this.route, ms: Math.round(performance.now() - this.started), body: this.body.progress() });
      this.aborted = true;
      this.done = true;
      for (const h of this.abortHandlers) h();
      this.finished();
    });
  }

  private finishers?: Array<() => void>;

  /** Runs `handler` once the answer is written whole or the client went away (whichever first). */
  onFinish(handler: () => void): void {
    (this.finishers ??= []).push(handler);
  }

  private finished(): void {
    const finishers = this.finishers;
    this.finishers = undefined;
    if (finishers) for (const f of finishers) f();
  }

  onAbort(handler: () => void): void {
    this.abortHandlers.push(handler);
  }

  /** When the request arrived, ms since the epoch. */
  get receivedAt(): number {
    return Math.round(performance.timeOrigin + this.started);
  }

  get live(): boolean {
    return !this.aborted && !this.done;
  }

  /** Status line and headers; call inside cork. An answer before the body's end also says it closes. */
  head(code: number, headers: Headers): void {
    this.res.writeStatus(status(code));
    this.res.writeHeader('X-Request-Id', this.requestId);
    for (const [k, v] of this.baseHeaders) this.res.writeHeader(k, v);
    for (const k in headers) {
      const v = headers[k];
      if (v !== undefined) this.res.writeHeader(k, v);
    }
    if (this.body.unsettled && this.body.beforeAnswer(this.surface.lingerBytes)) this.res.writeHeader('Connection', 'close');
    const seconds = (performance.now() - this.started) / 1000;
    this.surface.observe(this.route, this.method, code, seconds, this.errorName);
    if (this.surface.log.enabled('debug')) this.surface.log.debug('answer', { requestId: this.requestId, method: this.method, route: this.route, status: code, ms: Math.round(seconds * 1e4) / 10 });
  }

  /** A whole answer. To HEAD, the same headers (Content-Length of `body` included) and no body. */
  send(code: number, headers: Headers, body?: string | Uint8Array): void {
    if (!this.live) return;
    this.done = true;
    this.body.whenAnswerable(this.surface.lingerBytes, () => this.writeWhole(code, headers, body));
  }

  private writeWhole(code: number, headers: Headers, body?: string | Uint8Array): void {
    if (this.aborted) return;
    this.res.cork(() => {
      this.head(code, headers);
      // 204 and 304 carry no Content-Length at all (RFC 9110 8.6); other bodiless answers say 0.
      if (body === undefined && (code === 204 || code === 304)) this.res.endWithoutBody();
      else if (this.method === 'HEAD') endHead(this.res, body === undefined ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);
      else this.res.end(body ?? '');
    });
    this.finished();
  }

  /** A HEAD answer: the headers a GET would carry, Content-Length included, and no body. */
  sendHead(code: number, headers: Headers, contentLength: number): void {
    if (!this.live) return;
    this.done = true;
    this.res.cork(() => {
      this.head(code, headers);
      endHead(this.res, contentLength);
    });
    this.finished();
  }

  json(code: number, body: unknown, headers: Headers = {}): void {
    this.send(code, { 'Content-Type': JSON_UTF8, ...headers }, JSON.stringify(body));
  }

  /** The surface's error envelope. Unknown errors are logged and answered 500 with `fallbackCode`, never their text. */
  error(err: unknown, fallbackCode = 'storage_failure'): void {
    if (!this.live) return;
    let answer = this.surface.known(err);
    if (!answer) {
      this.surface.log.error('request failed', { requestId: this.requestId, method: this.method, route: this.route, err: String((err as Error)?.stack ?? err) });
      answer = this.surface.internal(this.requestId, fallbackCode);
    }
    this.errorName = answer.errorName;
    this.send(answer.status, { 'Content-Type': JSON_UTF8, ...answer.headers }, JSON.stringify(answer.body));
  }

  /**
   * Streams `pieces` (`total` bytes in all) as the body of a `code` answer, the status line going
   * out with the first piece, each piece written once the socket took the last. Never rejects: a
   * failure before the status line is answered as an error; after it, closing the connection is
   * the only way to tell the client. Resolves with the bytes sent and the failure, if any.
   */
  async streamBody(pieces: AsyncIterable<Uint8Array>, total: number, code: number, headers: Headers): Promise<{ sent: number; error?: unknown }> {
    let sent = 0;
    try {
      for await (const piece of pieces) {
        if (!this.live) break;
        await this.write(piece, total, sent === 0 ? () => this.head(code, headers) : undefined);
        sent += piece.length;
      }
      return { sent };
    } catch (error) {
      if (sent === 0) this.error(error);
      else if (this.live) {
        this.done = true;
        this.res.close();
      }
      return { sent, error };
    }
  }

  /**
   * Writes one piece of a body of `total` bytes; resolves once uWS has taken all of it, so
   * at most one piece per response waits in memory (socket backpressure).
   */
  write(piece: Uint8Array, total: number, headers?: () => void): Promise<void> {
    return new Promise((resolve) => {
      if (!this.live) return resolve();
      const res = this.res;
      let startOffset = 0;
      let ok = false;
      let responded = false;
      res.cork(() => {
        headers?.();
        startOffset = res.getWriteOffset();
        [ok, responded] = res.tryEnd(piece, total);
      });
      if (responded) {
        this.done = true;
        this.finished();
      }
      if (ok || responded) return resolve();
      this.blocked = { piece, startOffset, total, resolve };
      this.hookWritable();
    });
  }

  /** A 200 of `pieces`: one write with Content-Length when small, else chunked as the socket drains. */
  async sendPieces(contentType: string, pieces: Array<string | Uint8Array>): Promise<void> {
    let size = 0;
    for (const p of pieces) size += typeof p === 'string' ? Buffer.byteLength(p) : p.byteLength;
    if (size <= SINGLE_WRITE_BYTES) {
      const body = Buffer.allocUnsafe(size);
      let at = 0;
      for (const p of pieces) at += typeof p === 'string' ? body.write(p, at, 'utf8') : (body.set(p, at), p.byteLength);
      return this.send(200, { 'Content-Type': contentType }, body);
    }
    await this.stream(contentType, pieces);
  }

  /** A chunked 200 of `pieces`; each write waits while the socket is full. */
  async stream(contentType: string, pieces: Iterable<string | Uint8Array>): Promise<void> {
    if (!this.live) return;
    this.res.cork(() => this.head(200, { 'Content-Type': contentType }));
    for (const piece of pieces) {
      if (!this.live) return;
      let ok = true;
      this.res.cork(() => {
        ok = this.res.write(piece);
      });
      if (!ok) await this.drained();
    }
    if (!this.live) return;
    this.done = true;
    this.res.cork(() => this.res.end());
    this.finished();
  }

  private blocked: { piece: Uint8Array; startOffset: number; total: number; resolve: () => void } | null = null;
  private waiting: (() => void) | null = null;
  private writableHooked = false;

  /** uWS keeps calling the first handler registered on a response, so register one only. */
  private hookWritable(): void {
    if (this.writableHooked) return;
    this.writableHooked = true;
    this.onAbort(() => this.unblock());
    this.res.onWritable((offset) => this.drain(offset));
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.hookWritable();
    });
  }

  private drain(offset: number): boolean {
    const b = this.blocked;
    if (!b || !this.live) {
      this.unblock();
      return true;
    }
    const [ok, responded] = this.res.tryEnd(b.piece.subarray(offset - b.startOffset), b.total);
    if (responded) {
      this.done = true;
      this.finished();
    }
    if (ok || responded) this.unblock();
    return ok;
  }

  private unblock(): void {
    const b = this.blocked;
    const waiting = this.waiting;
    this.blocked = null;
    this.waiting = null;
    b?.resolve();
    waiting?.();
  }
}

/**
 * Ends an answer to HEAD: `contentLength` in the header, no body. uWS's endWithoutBody(n) would
 * leave the response pending (waiting for n bytes), so the connection's next request never ran.
 */
function endHead(res: HttpResponse, contentLength: number): void {
  res.writeHeader('Content-Length', String(contentLength));
  res.endWithoutBody();
}

/** A header value or undefined when absent (uWS returns '' for both absent and empty). */
export function header(req: Pick<HttpRequest, 'getHeader'>, name: string): string | undefined {
  const v = req.getHeader(name);
  return v === '' ? undefined : v;
}
