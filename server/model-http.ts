// Request/response plumbing of the model runtime listener: bounded body reading, the
// `{ error, message, code }` envelope, and chunked JSON output that waits for the socket.

import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { ModelError } from '../engine/models/errors.js';
import type { Logger } from '../engine/log.js';
import type { FrameBody } from '../engine/models/service.js';
import { JSON_UTF8, endHead, status } from './http.js';
import { RequestBody } from './request-body.js';

/** What every model exchange needs from the listener. */
export interface ModelHttp {
  log: Logger;
  /** SVC_HTTP_LINGER_BYTES (request-body.ts). */
  lingerBytes: number;
}

/** Answers up to this size are written at once, with a Content-Length. */
const SINGLE_WRITE_BYTES = 256 * 1024;

export class ModelExchange {
  aborted = false;
  done = false;
  private readonly head: boolean;
  private readonly body: RequestBody;
  private readonly abortHandlers: Array<() => void> = [];
  private writable: (() => void) | null = null;
  private writableHooked = false;

  constructor(
    readonly res: HttpResponse,
    req: HttpRequest,
    private readonly http: ModelHttp,
    /** Called once with the status when the response is complete (metrics). */
    private readonly onFinish: (code: number, error?: string) => void,
  ) {
    this.head = req.getMethod() === 'head';
    this.body = new RequestBody(res, req, () => this.live);
    res.onAborted(() => {
      this.aborted = true;
      this.done = true;
      for (const h of this.abortHandlers) h();
      this.writable?.();
    });
  }

  onAbort(handler: () => void): void {
    this.abortHandlers.push(handler);
  }

  get live(): boolean {
    return !this.aborted && !this.done;
  }

  /** A whole answer; to HEAD, its headers and Content-Length without the body. */
  send(code: number, contentType: string | undefined, body: string | Uint8Array = '', error?: string): void {
    if (!this.live) return;
    this.done = true;
    this.body.whenAnswerable(this.http.lingerBytes, () => {
      if (this.aborted) return;
      this.res.cork(() => {
        this.writeHead(code, contentType);
        if (this.head) endHead(this.res, typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);
        else this.res.end(body);
      });
    });
    this.onFinish(code, error);
  }

  json(code: number, body: unknown): void {
    this.send(code, JSON_UTF8, JSON.stringify(body));
  }

  /** The envelope for ModelErrors; anything else is logged and answered 500 without its text. */
  error(err: unknown): void {
    if (!this.live) return;
    if (err instanceof ModelError) {
      this.send(err.code, JSON_UTF8, JSON.stringify({ error: err.error, message: err.message, code: err.code }), err.error);
      return;
    }
    const requestId = Math.random().toString(36).slice(2, 10);
    this.http.log.error('model request failed', { requestId, err: String((err as Error)?.stack ?? err) });
    const body = { error: 'InternalError', message: `Internal service error (request ${requestId})`, code: 500 };
    this.send(500, JSON_UTF8, JSON.stringify(body), 'unchecked');
  }

  /**
   * Reads the body (at most `max` bytes, else 413) into one shared buffer, sized by
   * Content-Length when there is one: frames are parsed whole, by workers reading it in place.
   */
  readBody(max: number, declaredLength: string | undefined): Promise<FrameBody> {
    return new Promise((resolve, reject) => {
      const declared = declaredLength === undefined ? undefined : Number(declaredLength);
      if (declared !== undefined && declared > max) {
        reject(new ModelError('PayloadTooLarge', `request body is larger than ${max} bytes (MODEL_MAX_FRAME_BYTES)`, 413));
        return;
      }
      let bytes = new SharedArrayBuffer(declared !== undefined && Number.isSafeInteger(declared) ? declared : 16 * 1024);
      let view = new Uint8Array(bytes);
      let length = 0;
      let failed = false;
      this.onAbort(() => reject(new Error('client went away')));
      this.body.read((chunk, last) => {
        if (failed) return;
        if (length + chunk.byteLength > max) {
          failed = true;
          reject(new ModelError('PayloadTooLarge', `request body is larger than ${max} bytes (MODEL_MAX_FRAME_BYTES)`, 413));
          return;
        }
        if (length + chunk.byteLength > bytes.byteLength) {
          const grown = new SharedArrayBuffer(Math.min(max, Math.max(bytes.byteLength * 2, length + chunk.byteLength)));
          new Uint8Array(grown).set(view.subarray(0, length));
          bytes = grown;
          view = new Uint8Array(grown);
        }
        view.set(new Uint8Array(chunk), length);
        length += chunk.byteLength;
        if (last) resolve({ bytes, length });
      });
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
      return this.send(200, contentType, body);
    }
    await this.stream(contentType, pieces);
  }

  /** Starts a chunked 200 response; `piece` writes wait while the socket is full. */
  async stream(contentType: string, pieces: Iterable<string | Uint8Array>): Promise<void> {
    if (!this.live) return;
    this.res.cork(() => this.writeHead(200, contentType));
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
    this.onFinish(200);
  }

  /** Status and headers; an answer before the body's end also says it closes (request-body.ts). */
  private writeHead(code: number, contentType: string | undefined): void {
    this.res.writeStatus(status(code));
    if (contentType) this.res.writeHeader('Content-Type', contentType);
    if (this.body.unsettled && this.body.beforeAnswer(this.http.lingerBytes)) this.res.writeHeader('Connection', 'close');
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      this.writable = () => {
        this.writable = null;
        resolve();
      };
      if (!this.writableHooked) {
        this.writableHooked = true;
        this.res.onWritable(() => {
          this.writable?.();
          return true;
        });
      }
    });
  }
}
