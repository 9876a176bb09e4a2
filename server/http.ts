import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { SvcError } from '../engine/errors.js';
import type { Engine } from '../engine/engine.js';
import type { Metrics } from '../engine/ops/metrics.js';
import { RequestBody } from './request-body.js';

/** What every handler needs: the engine and the metrics it reports to. */
export interface ServerContext {
  engine: Engine;
  metrics: Metrics;
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 204: 'No Content', 206: 'Partial Content', 304: 'Not Modified', 308: 'Permanent Redirect',
  400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed',
  409: 'Conflict', 410: 'Gone', 412: 'Precondition Failed', 413: 'Content Too Large', 415: 'Unsupported Media Type', 416: 'Range Not Satisfiable',
  429: 'Too Many Requests', 500: 'Internal Server Error', 503: 'Service Unavailable', 507: 'Insufficient Storage',
};

export const status = (code: number) => `${code} ${STATUS_TEXT[code] ?? 'Unknown'}`;

export const JSON_UTF8 = 'application/json; charset=utf-8';

/** Per-request state: the response object is unusable once aborted or ended. */
export class Exchange {
  aborted = false;
  done = false;
  readonly method: string;
  /** The request body: read it through this, never through `res.onData`. */
  readonly body: RequestBody;
  private abortHandlers: Array<() => void> = [];
  private readonly started = performance.now();

  constructor(
    readonly res: HttpResponse,
    req: HttpRequest,
    /** The route pattern, a metrics label. */
    readonly route: string,
    readonly ctx: ServerContext,
    /** Headers every response of this route carries (CORS). */
    readonly baseHeaders: ReadonlyArray<[string, string]> = [],
  ) {
    this.method = req.getCaseSensitiveMethod();
    this.body = new RequestBody(res, req, () => this.live);
    ctx.engine.stats.requests++;
    res.onAborted(() => {
      this.aborted = true;
      this.done = true;
      for (const h of this.abortHandlers) h();
    });
  }

  onAbort(handler: () => void): void {
    this.abortHandlers.push(handler);
  }

  get live(): boolean {
    return !this.aborted && !this.done;
  }

  /** Status line and headers; call inside cork. An answer before the body's end also says it closes. */
  head(code: number, headers: Record<string, string | undefined>): void {
    this.res.writeStatus(status(code));
    for (const [k, v] of this.baseHeaders) this.res.writeHeader(k, v);
    for (const k in headers) {
      const v = headers[k];
      if (v !== undefined) this.res.writeHeader(k, v);
    }
    if (this.body.unsettled && this.body.beforeAnswer(this.ctx.engine.config.httpLingerBytes)) this.res.writeHeader('Connection', 'close');
    if (code >= 400) this.ctx.engine.stats.errors++;
    this.ctx.metrics.observeHttp(`${this.method} ${this.route}`, code, (performance.now() - this.started) / 1000);
  }

  /** A whole answer. To HEAD, the same headers (Content-Length of `body` included) and no body. */
  send(code: number, headers: Record<string, string | undefined>, body?: string | Uint8Array): void {
    if (!this.live) return;
    this.done = true;
    this.body.whenAnswerable(this.ctx.engine.config.httpLingerBytes, () => this.writeWhole(code, headers, body));
  }

  private writeWhole(code: number, headers: Record<string, string | undefined>, body?: string | Uint8Array): void {
    if (this.aborted) return;
    this.res.cork(() => {
      this.head(code, headers);
      // 204 and 304 carry no Content-Length at all (RFC 9110 8.6); other bodiless answers say 0.
      if (body === undefined && (code === 204 || code === 304)) this.res.endWithoutBody();
      else if (this.method === 'HEAD') endHead(this.res, body === undefined ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);
      else this.res.end(body ?? '');
    });
  }

  /** A HEAD answer: the headers a GET would carry, Content-Length included, and no body. */
  sendHead(code: number, headers: Record<string, string | undefined>, contentLength: number): void {
    if (!this.live) return;
    this.done = true;
    this.res.cork(() => {
      this.head(code, headers);
      endHead(this.res, contentLength);
    });
  }

  json(code: number, body: unknown, headers: Record<string, string | undefined> = {}): void {
    this.send(code, { 'Content-Type': JSON_UTF8, ...headers }, JSON.stringify(body));
  }

  /** The error envelope. Unknown errors are logged and answered with `fallbackCode`, never their text. */
  error(err: unknown, fallbackCode = 'storage_failure'): void {
    if (err instanceof SvcError) {
      this.send(err.status, { 'Content-Type': JSON_UTF8, ...err.headers }, JSON.stringify({ error: err.code, message: err.message }));
      return;
    }
    const requestId = Math.random().toString(36).slice(2, 10);
    this.ctx.engine.log.error('request failed', { requestId, method: this.method, route: this.route, err: String((err as Error)?.stack ?? err) });
    this.send(500, { 'Content-Type': JSON_UTF8 }, JSON.stringify({ error: fallbackCode, message: `Internal error (request ${requestId})` }));
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
      if (responded) this.done = true;
      if (ok || responded) return resolve();
      this.blocked = { piece, startOffset, total, resolve };
      if (!this.writableHooked) {
        // uWS keeps calling the first handler registered on a response, so register one only.
        this.writableHooked = true;
        this.onAbort(() => this.unblock());
        res.onWritable((offset) => this.drain(offset));
      }
    });
  }

  private blocked: { piece: Uint8Array; startOffset: number; total: number; resolve: () => void } | null = null;
  private writableHooked = false;

  private drain(offset: number): boolean {
    const b = this.blocked;
    if (!b || !this.live) {
      this.unblock();
      return true;
    }
    const [ok, responded] = this.res.tryEnd(b.piece.subarray(offset - b.startOffset), b.total);
    if (responded) this.done = true;
    if (ok || responded) this.unblock();
    return ok;
  }

  private unblock(): void {
    const b = this.blocked;
    this.blocked = null;
    b?.resolve();
  }
}

/**
 * Ends an answer to HEAD: `contentLength` in the header, no body. uWS's endWithoutBody(n) would
 * leave the response pending (waiting for n bytes), so the connection's next request never ran.
 */
export function endHead(res: HttpResponse, contentLength: number): void {
  res.writeHeader('Content-Length', String(contentLength));
  res.endWithoutBody();
}

export function query(req: HttpRequest): URLSearchParams {
  return new URLSearchParams(req.getQuery() ?? '');
}

/** A header value or undefined when absent (uWS returns '' for both absent and empty). */
export function header(req: HttpRequest, name: string): string | undefined {
  const v = req.getHeader(name);
  return v === '' ? undefined : v;
}
