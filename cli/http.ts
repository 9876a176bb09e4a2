// HTTP exchanges with the server over node:http (bodies streamed both ways, nothing collected
// that is not small JSON), and a retrying wrapper for the requests that carry no body.

import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { ApiError, CliError } from './errors.js';
import type { Backoff } from './retry.js';

/** A connection that moves no byte for this long is given up (and retried). */
const IDLE_TIMEOUT_MS = Number(process.env.SVC_CLIENT_IDLE_TIMEOUT_MS || 60_000);
/**
 * For requests where the server may work a long time in silence: a commit, or the first part
 * after a server restart (the server hashes everything staged so far before it reads the body).
 */
export const SLOW_TIMEOUT_MS = Math.max(IDLE_TIMEOUT_MS, 5 * 60_000);

const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 4 }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 4 }),
};

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: IncomingMessage;
}

interface RequestOptions {
  method?: string;
  headers?: Record<string, string | number | undefined>;
  /** A stream sent as the body; its Content-Length must be in `headers` if the server needs one. */
  body?: Readable;
  /** Idle limit of the connection (default SVC_CLIENT_IDLE_TIMEOUT_MS, 60 s). */
  timeoutMs?: number;
}

/** Whether any request of this run got an answer: a refused connection before that means no server. */
let serverReached = false;

/**
 * One request. Resolves at the status line (the body is left to the caller), rejects when the
 * connection fails first. An answer that arrives before the whole body was sent (an early
 * refusal) wins: the rest of the body is dropped, and errors of that connection are ignored.
 * A refused connection before the server ever answered is a CliError (no server there, not
 * retried); after that, it is a server restarting, and retried like a dropped connection.
 */
/** The bearer token of this run (--token / SVC_TOKEN), sent with every request. */
let bearerToken: string | undefined;

export function useToken(token: string): void {
  bearerToken = token;
}

export function request(base: string, path: string, options: RequestOptions = {}): Promise<Reply> {
  const url = new URL(path, `${base}/`);
  const headers: Record<string, string> = bearerToken ? { Authorization: `Bearer ${bearerToken}` } : {};
  for (const [k, v] of Object.entries(options.headers ?? {})) if (v !== undefined) headers[k] = String(v);
  const lib = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = lib.request(url, { method: options.method ?? 'GET', headers, agent: agents[url.protocol as 'http:' | 'https:'] });
    const idle = options.timeoutMs ?? IDLE_TIMEOUT_MS;
    req.setTimeout(idle, () => req.destroy(Object.assign(new Error(`no data for ${idle / 1000} s`), { code: 'ETIMEDOUT' })));
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (answered) return;
      // Also an AggregateError of every address tried (localhost: ::1 and 127.0.0.1), with the same code.
      if (err.code === 'ECONNREFUSED' && !serverReached) {
        reject(new CliError(`no server at ${url.host} (connection refused): start one (svc serve), or point --server or SVC_SERVER at it`));
      } else reject(err);
    });
    req.on('response', (res) => {
      answered = true;
      serverReached = true;
      if (options.body && !options.body.readableEnded) {
        // Answered before the whole body went out: the connection cannot carry another request.
        options.body.unpipe(req);
        options.body.destroy();
        res.once('end', () => req.destroy());
      }
      // A failure while the caller reads the body surfaces on the body stream.
      req.on('error', (err) => res.destroy(err));
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res });
    });
    if (options.body) {
      options.body.on('error', (err) => req.destroy(err));
      options.body.pipe(req);
    } else {
      req.end();
    }
  });
}

/** Reads a small body whole (error envelopes, status JSON, inventory pages). */
async function readText(reply: Reply, limit = 16 * 1024 * 1024): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of reply.body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      reply.body.destroy();
      throw new Error(`answer larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function readJson<T = any>(reply: Reply): Promise<T> {
  const text = await readText(reply);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`the server answered ${reply.status} with a body that is not JSON`);
  }
}

/** Discards the body so the connection can be reused. */
export function drain(reply: Reply): void {
  reply.body.resume();
}

/** The ApiError for an unexpected answer, with the `{error, message}` envelope when there is one. */
export async function apiError(reply: Reply): Promise<ApiError> {
  let code: string | undefined;
  let message: string | undefined;
  try {
    const body = JSON.parse(await readText(reply, 1024 * 1024));
    if (body && typeof body.error === 'string') {
      code = body.error;
      message = typeof body.message === 'string' ? body.message : '';
      // The model runtime's envelope carries its status as `code`: a client aimed at the wrong port.
      if (reply.status === 404 && body.code === 404) message += ' (this is the model runtime\'s port, HTTP_PORT; the blob API listens on SVC_HTTP_PORT, 8081 by default)';
    }
  } catch {
    // no envelope (HEAD, 412, a proxy's page): the status alone
  }
  return new ApiError(reply.status, code, message, reply.headers);
}

/** A body-less request answered with one of `ok`, else ApiError (connection errors pass through). */
export async function call(base: string, path: string, ok: number[], options: RequestOptions = {}): Promise<Reply> {
  const reply = await request(base, path, options);
  if (!ok.includes(reply.status)) throw await apiError(reply);
  return reply;
}

/** `call`, then the JSON body; retried (through `backoff`) while the failure is retryable. */
export async function callJson<T = any>(backoff: Backoff, base: string, path: string, ok: number[], options: RequestOptions = {}): Promise<{ reply: Reply; json: T }> {
  return backoff.retry(async () => {
    const reply = await call(base, path, ok, options);
    return { reply, json: await readJson<T>(reply) };
  });
}

/** Lets the process end: closes the idle keep-alive connections. */
export function closeConnections(): void {
  agents['http:'].destroy();
  agents['https:'].destroy();
}

export function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}
