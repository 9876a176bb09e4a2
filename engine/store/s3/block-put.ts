// A block's PutObject without the AWS SDK's middleware stack: one SigV4-signed request on an undici
// Pool of its own. A block PUT is the one request the ingest makes per block (about 1,000 per GiB),
// and the SDK's per-request work (endpoint rules, middleware, schema-driven serialization, an
// exception per refused condition) was most of svc's own CPU per GiB on pg-s3 (docs/performance.md).
// Everything else the store does (HEAD, GET, copy, delete, list) goes through the SDK.
//
// Signed by ./put-signer.ts, sent by undici's `dispatch` (no response stream): both cut svc's CPU
// per PUT against @smithy/signature-v4 on node:http (bench/block-put-cost.ts has the figures).
//
// The failures are the SDK's: an S3 error answer throws an `S3ServiceException` named by its
// `Code` with `$metadata.httpStatusCode`; a network failure throws node's error (ECONNREFUSED,
// ECONNRESET, ...; undici's own socket errors are given node's codes), so `isUnreachable` and
// `describeS3Failure` read both alike. The SDK's standard retries are kept: up to 3 attempts on a
// network error, a 5xx, a throttling answer or a timeout code, after a random wait up to
// 100 ms × 2^attempt (500 ms base when throttled).
import { S3ServiceException, type S3Client } from '@aws-sdk/client-s3';
import { XMLParser } from 'fast-xml-parser';
import { Pool, type Dispatcher } from 'undici';
import type { S3Location } from '../block-store.js';
import { S3_ERROR_ANSWER_MAX_BYTES } from '../../base/limits.js';
import { type Credentials, PutSigner } from './put-signer.js';

const MAX_ATTEMPTS = 3;
const RETRY_BASE_MS = 100;
const THROTTLED_BASE_MS = 500;
const MAX_RETRY_DELAY_MS = 20_000;
const ERROR_PARSER = new XMLParser({ parseTagValue: false, processEntities: true });
const RETRY_STATUS = new Set([429, 500, 502, 503, 504]);
const RETRY_CODES = new Set(['SlowDown', 'Throttling', 'ThrottlingException', 'RequestLimitExceeded', 'RequestThrottled', 'TooManyRequestsException', 'BandwidthLimitExceeded', 'RequestTimeout', 'RequestTimeoutException', 'TimeoutError']);
const RETRY_NETWORK = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** A key's path segments encoded as the SDK encodes them (RFC 3986: `!'()*` too). */
const encodeKey = (key: string) => key.split('/').map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)).join('/');

/** Where the bucket is and how requests to it are signed, as the SDK's endpoint rules say. */
interface Target {
  /** The Host header: host[:port]. */
  host: string;
  /** The path before the key: '/' (virtual-hosted) or '/<bucket>/' (path style). */
  base: string;
  signer: PutSigner;
  pool: Pool;
}

interface Answer {
  status: number;
  body: string;
  requestId?: string;
}

export class BlockPuts {
  private target?: Promise<Target | undefined>;

  constructor(
    private readonly client: S3Client,
    private readonly location: S3Location,
    /** Connections to the endpoint at most (kept alive); beyond it requests queue. */
    private readonly connections: number,
    /** SVC_S3_TIMEOUT. */
    private readonly idleTimeoutMs: number,
  ) {}

  /**
   * Whether this path can serve the bucket: a plain SigV4 endpoint (not S3 Express, not a
   * multi-region access point). Resolved once, by the SDK's own endpoint rules.
   */
  available(): Promise<boolean> {
    this.target ??= this.resolve().catch(() => undefined);
    return this.target.then((t) => t !== undefined);
  }

  /** PUTs the block's pieces under `key`; with `ifAbsent`, `If-None-Match: *` and 'present' on 412. */
  async put(key: string, hex: string, size: number, pieces: readonly Uint8Array[], ifAbsent: boolean): Promise<'written' | 'present'> {
    const target = await this.target;
    if (!target) throw new Error('BlockPuts.put before available()');
    for (let attempt = 1; ; attempt++) {
      let answer: Answer;
      try {
        answer = await this.send(target, key, hex, size, pieces, ifAbsent);
      } catch (err) {
        if (attempt >= MAX_ATTEMPTS || !RETRY_NETWORK.has((err as { code?: string }).code ?? '')) throw err;
        await wait(attempt, false);
        continue;
      }
      if (answer.status >= 200 && answer.status < 300) return 'written';
      if (ifAbsent && answer.status === 412) return 'present';
      const failure = s3Failure(answer, attempt);
      if (attempt >= MAX_ATTEMPTS || !(RETRY_STATUS.has(answer.status) || RETRY_CODES.has(failure.name))) throw failure;
      await wait(attempt, answer.status === 429 || failure.name === 'SlowDown' || failure.name.startsWith('Throttl'));
    }
  }

  /** Closes the connections (once the PUTs under way are answered). */
  async close(): Promise<void> {
    const target = await this.target;
    if (target && !target.pool.closed) await target.pool.close();
  }

  private async resolve(): Promise<Target | undefined> {
    const { bucket, region, endpoint, forcePathStyle } = this.location;
    const config = this.client.config as unknown as {
      endpointProvider: (params: Record<string, unknown>, context: object) => { url: URL; properties?: { authSchemes?: Array<{ name: string; signingName?: string; signingRegion?: string }> } };
      credentials: () => Promise<Credentials>;
    };
    const resolved = config.endpointProvider({ Bucket: bucket, Region: region, UseFIPS: false, UseDualStack: false, ForcePathStyle: forcePathStyle, Accelerate: false, ...(endpoint ? { Endpoint: endpoint } : {}) }, {});
    const scheme = resolved.properties?.authSchemes?.[0];
    if (scheme && scheme.name !== 'sigv4') return undefined;
    const url = resolved.url;
    if (url.search || (url.protocol !== 'http:' && url.protocol !== 'https:')) return undefined;
    return {
      host: url.host,
      base: url.pathname.endsWith('/') ? url.pathname : `${url.pathname}/`,
      signer: new PutSigner(scheme?.signingRegion ?? region, scheme?.signingName ?? 's3', config.credentials),
      // SVC_S3_TIMEOUT bounds the connect, the wait for the answer's head and each gap in its body (a timeout is ETIMEDOUT: retried).
      pool: new Pool(url.origin, { connections: this.connections, connectTimeout: this.idleTimeoutMs, headersTimeout: this.idleTimeoutMs, bodyTimeout: this.idleTimeoutMs }),
    };
  }

  private async send(target: Target, key: string, hex: string, size: number, pieces: readonly Uint8Array[], ifAbsent: boolean): Promise<Answer> {
    const path = `${target.base}${encodeKey(key)}`;
    // The block's name is its SHA-256: the signature takes it instead of hashing the bytes again,
    // and the server checks the body against it.
    const headers: Record<string, string> = { host: target.host, 'content-type': 'application/octet-stream', 'content-length': String(size), 'x-amz-content-sha256': hex };
    if (ifAbsent) headers['if-none-match'] = '*';
    const signed = await target.signer.sign(path, headers);
    // The pieces are the ingest's memory (shared segments), written in place: undici writes a
    // Buffer, or each Buffer of an array, to the socket as it is (no copy).
    const body = pieces.length === 1 ? asBuffer(pieces[0]!) : pieces.map(asBuffer);
    try {
      return await dispatch(target.pool, path, signed, body);
    } catch (err) {
      throw nodeError(err);
    }
  }
}

const asBuffer = (p: Uint8Array) => Buffer.from(p.buffer, p.byteOffset, p.byteLength);

/** One PUT on `pool`: the status, the request id, and of an error answer its first S3_ERROR_ANSWER_MAX_BYTES. */
function dispatch(pool: Pool, path: string, headers: Record<string, string>, body: Buffer | Buffer[]): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    let status = 0;
    let requestId: string | undefined;
    const parts: Buffer[] = [];
    let kept = 0;
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart() {},
      onResponseStart(_controller, statusCode, answerHeaders) {
        status = statusCode;
        const id = answerHeaders['x-amz-request-id'];
        requestId = typeof id === 'string' ? id : undefined;
      },
      onResponseData(_controller, chunk) {
        // An error answer is a small XML document: its first S3_ERROR_ANSWER_MAX_BYTES name the failure, the rest is dropped.
        if ((status >= 200 && status < 300) || kept >= S3_ERROR_ANSWER_MAX_BYTES) return;
        const part = chunk.subarray(0, S3_ERROR_ANSWER_MAX_BYTES - kept);
        parts.push(part);
        kept += part.length;
      },
      onResponseEnd() {
        resolve({ status, body: parts.length ? Buffer.concat(parts).toString('utf8') : '', requestId });
      },
      onResponseError(_controller, err) {
        reject(err);
      },
    };
    // undici's types name a Buffer body only; an array (an iterable of Buffers) is written piece by piece.
    pool.dispatch({ method: 'PUT', path, headers, body: body as Buffer }, handler);
  });
}

/**
 * undici's own socket errors as node:http reports them: a connection closed under a request is
 * ECONNRESET ("socket hang up"), a timeout (connect, the answer's head, a gap in its body:
 * SVC_S3_TIMEOUT) ETIMEDOUT. node's errors (ECONNREFUSED, a reset, EPIPE...) pass as they are.
 */
function nodeError(err: unknown): unknown {
  const code = (err as { code?: unknown }).code;
  if (code === 'UND_ERR_SOCKET') return Object.assign(new Error(`socket hang up (${(err as Error).message})`, { cause: err }), { code: 'ECONNRESET' });
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') return Object.assign(new Error(`ETIMEDOUT (${(err as Error).message})`, { cause: err }), { code: 'ETIMEDOUT' });
  return err;
}

/** An S3 error answer as the SDK throws it: named by its Code, with the status. */
function s3Failure(answer: Answer, attempts: number): S3ServiceException {
  const error = errorFields(answer.body);
  const field = (name: 'Code' | 'Message' | 'RequestId') => (typeof error[name] === 'string' || typeof error[name] === 'number' ? String(error[name]) : undefined);
  const name = field('Code') ?? (answer.status === 404 ? 'NotFound' : `HTTP${answer.status}`);
  return new S3ServiceException({
    name,
    $fault: answer.status >= 500 ? 'server' : 'client',
    $metadata: { httpStatusCode: answer.status, requestId: answer.requestId ?? field('RequestId'), attempts },
    message: field('Message') ?? `PutObject answered HTTP ${answer.status}`,
  });
}

/** The fields of an S3 error document (`<Error><Code/><Message/>…</Error>`), none when the body is not one. */
function errorFields(body: string): Record<string, unknown> {
  try {
    const parsed = ERROR_PARSER.parse(body) as { Error?: unknown };
    return typeof parsed.Error === 'object' && parsed.Error !== null ? (parsed.Error as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function wait(attempt: number, throttled: boolean): Promise<void> {
  const base = throttled ? THROTTLED_BASE_MS : RETRY_BASE_MS;
  return new Promise((r) => setTimeout(r, Math.random() * Math.min(MAX_RETRY_DELAY_MS, base * 2 ** attempt)));
}
