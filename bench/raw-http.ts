import net from 'node:net';

/**
 * A minimal keep-alive HTTP/1.1 client over one TCP socket, for load generation: requests are
 * written as prepared bytes (pipelining allowed), responses are parsed in order from a reused
 * read buffer (`onread`), and bodies are only counted unless the caller asks to keep them.
 * Bodies are framed by Content-Length (what uWS sends for whole answers: the fast path, with no
 * per-response allocation beyond the header string) or by `Transfer-Encoding: chunked` (streamed
 * answers such as the model runtime's transforms): chunk-size lines with optional extensions,
 * data, CRLF, the last `0` chunk, optional trailer lines (read and ignored) and the final CRLF.
 * A response with neither (other than 1xx/204/304) is an error, as is a malformed chunk framing.
 */

export interface RawResponse {
  status: number;
  /** The body when the request asked to keep it. */
  body?: Buffer;
  bodyBytes: number;
  /** performance.now() when the request was handed to the socket. */
  sentAt: number;
  /** performance.now() when the last byte of the response was parsed. */
  doneAt: number;
}

export type ResponseHandler = (res: RawResponse) => void;

interface Pending {
  sentAt: number;
  keepBody: boolean;
  handler: ResponseHandler;
  onError?: (err: Error) => void;
}

const CRLF = Buffer.from('\r\n');
const CRLF2 = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)/i;
const CHUNKED = /\r\ntransfer-encoding:[^\r]*chunked/i;
const MAX_HEADER = 64 * 1024;
/** A chunk-size line: hex size, optional whitespace and `;extensions`. */
const CHUNK_SIZE = /^([0-9a-f]+)[ \t]*(?:;.*)?$/i;

/** Where a chunked body is: `none` (a head or a Content-Length body), or what comes next. */
type ChunkState = 'none' | 'size-line' | 'data' | 'data-end' | 'trailer';

export class RawConnection {
  /** Set when the connection failed or closed with requests outstanding. */
  failure: Error | undefined;
  onFailure: (err: Error) => void = () => {};

  private readonly queue: Pending[] = [];
  private queueHead = 0;
  private outgoing: Array<Buffer | string> = [];
  private carry: Buffer | null = null;
  /** The line `takeLine` read last. */
  private line = '';
  /** Body bytes left: of the Content-Length body, or of the current chunk; -1 while reading a head. */
  private remaining = -1;
  private chunk: ChunkState = 'none';
  private current: Pending | undefined;
  private status = 0;
  private bodyParts: Buffer[] | null = null;
  private bodyBytes = 0;
  private closedByUs = false;

  private constructor(private readonly socket: net.Socket) {}

  static connect(port: number, host = '127.0.0.1', readBufferBytes = 64 * 1024): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      let conn: RawConnection | undefined = undefined;
      const socket = net.connect({
        port,
        host,
        onread: {
          buffer: Buffer.allocUnsafe(readBufferBytes),
          callback: (n: number, buf: Uint8Array) => {
            conn!.feed(buf as Buffer, n);
            return true;
          },
        },
      });
      conn = new RawConnection(socket);
      socket.setNoDelay(true);
      const onConnectError = (err: Error) => reject(err);
      socket.once('error', onConnectError);
      socket.once('connect', () => {
        socket.off('error', onConnectError);
        socket.on('error', (err) => conn!.fail(err));
        socket.on('close', () => {
          if (!conn!.closedByUs) conn!.fail(new Error(`server closed the connection with ${conn!.inFlight} request(s) outstanding`));
        });
        resolve(conn!);
      });
    });
  }

  get inFlight(): number {
    return this.queue.length - this.queueHead;
  }

  /** Queue a request (complete HTTP/1.1 request bytes); written on `flush()`. */
  enqueue(request: Buffer | string, handler: ResponseHandler, keepBody = false, onError?: (err: Error) => void): void {
    this.outgoing.push(request);
    this.queue.push({ sentAt: performance.now(), keepBody, handler, onError });
  }

  flush(): void {
    if (this.outgoing.length === 0 || this.failure) return;
    const out = this.outgoing;
    this.outgoing = [];
    if (out.length === 1) this.socket.write(out[0]);
    else {
      this.socket.cork();
      for (const part of out) this.socket.write(part);
      this.socket.uncork();
    }
  }

  /** Send one request and wait for its response (rejecting after `timeoutMs`, if given). */
  request(request: Buffer | string, keepBody = true, timeoutMs?: number): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      if (this.failure) return reject(this.failure);
      let timer: NodeJS.Timeout | undefined;
      if (timeoutMs !== undefined) timer = setTimeout(() => reject(new Error(`no answer to ${requestLine(request)} within ${timeoutMs / 1000} s`)), timeoutMs);
      const onResponse = (res: RawResponse) => {
        clearTimeout(timer);
        resolve(res);
      };
      const onError = (err: Error) => {
        clearTimeout(timer);
        reject(err);
      };
      this.enqueue(request, onResponse, keepBody, onError);
      this.flush();
    });
  }

  /** One request on a new connection, closed afterwards; the body is kept. */
  static async requestOnce(port: number, request: Buffer | string, timeoutMs: number): Promise<RawResponse> {
    const conn = await RawConnection.connect(port);
    try {
      return await conn.request(request, true, timeoutMs);
    } finally {
      conn.close();
    }
  }

  /** Write raw bytes now (e.g. a large body after its headers), returning false on backpressure. */
  writeRaw(chunk: Buffer): boolean {
    return this.socket.write(chunk);
  }

  waitDrain(): Promise<void> {
    return new Promise((resolve) => this.socket.once('drain', resolve));
  }

  close(): void {
    this.closedByUs = true;
    this.socket.destroy();
  }

  private fail(err: Error): void {
    if (this.failure || this.closedByUs) return;
    this.failure = err;
    const waiting = this.current ? [this.current] : [];
    waiting.push(...this.queue.slice(this.queueHead));
    this.current = undefined;
    this.queue.length = 0;
    this.queueHead = 0;
    for (const p of waiting) p.onError?.(err);
    this.onFailure(err);
  }

  private feed(buf: Buffer, end: number): void {
    let pos = 0;
    try {
      while (pos < end && !this.closedByUs && !this.failure) {
        if (this.remaining < 0) {
          const next = this.takeLine(buf, pos, end, CRLF2);
          if (next < 0) return;
          pos = next;
          this.startResponse(this.line);
          if (this.remaining === 0 && this.chunk === 'none') this.finishResponse();
        } else if (this.chunk !== 'none') {
          pos = this.feedChunked(buf, pos, end);
        } else {
          const take = Math.min(this.remaining, end - pos);
          if (this.bodyParts) this.bodyParts.push(Buffer.from(buf.subarray(pos, pos + take)));
          this.bodyBytes += take;
          this.remaining -= take;
          pos += take;
          if (this.remaining === 0) this.finishResponse();
        }
      }
    } catch (err) {
      this.fail(err as Error);
      this.socket.destroy();
      return;
    }
    this.flush();
  }

  /**
   * Reads up to `delimiter` (carrying a partial line across reads) into `this.line`; returns the
   * position after the delimiter, or -1 when the rest of `buf` was carried.
   */
  private takeLine(buf: Buffer, pos: number, end: number, delimiter: Buffer): number {
    const carried = this.carry ? this.carry.length : 0;
    const data = this.carry ? Buffer.concat([this.carry, buf.subarray(pos, end)]) : buf.subarray(pos, end);
    const idx = data.indexOf(delimiter);
    if (idx < 0) {
      if (data.length > MAX_HEADER) throw new Error(delimiter === CRLF2 ? 'response header larger than 64 KiB' : 'chunk-size or trailer line longer than 64 KiB');
      this.carry = Buffer.from(data); // copy: `buf` is reused by the next read
      return -1;
    }
    this.carry = null;
    this.line = data.toString('latin1', 0, idx);
    return pos + idx + delimiter.length - carried;
  }

  /** One step of a chunked body; returns the new position (`end` when it needs more bytes). */
  private feedChunked(buf: Buffer, pos: number, end: number): number {
    if (this.chunk === 'data') {
      const take = Math.min(this.remaining, end - pos);
      if (this.bodyParts) this.bodyParts.push(Buffer.from(buf.subarray(pos, pos + take)));
      this.bodyBytes += take;
      this.remaining -= take;
      if (this.remaining === 0) this.chunk = 'data-end';
      return pos + take;
    }
    const next = this.takeLine(buf, pos, end, CRLF);
    if (next < 0) return end;
    const line = this.line;
    if (this.chunk === 'size-line') {
      const m = CHUNK_SIZE.exec(line);
      if (!m || m[1].length > 12) throw new Error(`bad chunk-size line "${line.slice(0, 60)}"`);
      const size = parseInt(m[1], 16);
      this.remaining = size;
      this.chunk = size === 0 ? 'trailer' : 'data';
    } else if (this.chunk === 'data-end') {
      if (line !== '') throw new Error(`chunk data not followed by CRLF but by "${line.slice(0, 60)}"`);
      this.chunk = 'size-line';
    } else if (line === '') {
      this.finishResponse(); // the empty line after the last chunk and its trailers, if any
    }
    return next;
  }

  private startResponse(head: string): void {
    if (this.queueHead >= this.queue.length) throw new Error(`unexpected response without a request: ${head.slice(0, 200)}`);
    if (!head.startsWith('HTTP/1.')) throw new Error(`malformed status line: ${head.slice(0, 200)}`);
    this.current = this.queue[this.queueHead++];
    if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue.splice(0, this.queueHead);
      this.queueHead = 0;
    }
    this.status = Number(head.slice(9, 12));
    const m = CONTENT_LENGTH.exec(head);
    if (m) {
      this.remaining = Number(m[1]);
    } else if (CHUNKED.test(head)) {
      this.remaining = 0; // not -1: the body has begun, with a chunk-size line
      this.chunk = 'size-line';
    } else if (this.status === 204 || this.status === 304 || (this.status >= 100 && this.status < 200)) {
      this.remaining = 0;
    } else {
      throw new Error(`response with neither Content-Length nor chunked framing: ${head.slice(0, 200)}`);
    }
    this.bodyBytes = 0;
    // Error bodies are kept (small JSON envelopes) so they can be reported.
    this.bodyParts = this.current.keepBody || this.status >= 400 ? [] : null;
  }

  private finishResponse(): void {
    const p = this.current!;
    const res: RawResponse = {
      status: this.status,
      body: this.bodyParts ? Buffer.concat(this.bodyParts) : undefined,
      bodyBytes: this.bodyBytes,
      sentAt: p.sentAt,
      doneAt: performance.now(),
    };
    this.current = undefined;
    this.bodyParts = null;
    this.remaining = -1;
    this.chunk = 'none';
    p.handler(res);
  }
}

export function getRequest(path: string, extraHeaders = ''): string {
  return `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extraHeaders}\r\n`;
}

export function postRequest(path: string, contentType: string, body: Buffer): Buffer {
  return bodyRequest('POST', path, contentType, body);
}

/** A request with a body (POST, PUT, ...); a string body is sent as UTF-8. */
export function bodyRequest(method: string, path: string, contentType: string, body: Buffer | string): Buffer {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const head = `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${contentType}\r\nContent-Length: ${bytes.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), bytes]);
}

/** `METHOD target` of a request, for messages. */
function requestLine(request: Buffer | string): string {
  const start = typeof request === 'string' ? request.slice(0, 300) : request.toString('latin1', 0, 300);
  const end = start.indexOf(' HTTP/1.');
  return end < 0 ? start.slice(0, 80) : start.slice(0, end);
}
