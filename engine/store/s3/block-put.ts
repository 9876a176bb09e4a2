// A block's PutObject without the AWS SDK's middleware stack: one SigV4-signed request on
// node:http(s), over the same keep-alive agents as the store's client. A block PUT is the one
// request the ingest makes per block (about 1,000 per GiB), and the SDK's per-request work
// (endpoint rules, middleware, schema-driven serialization, an exception per refused condition)
// was most of svc's own CPU per GiB on pg-s3 (docs/performance.md). Everything else the store
// does (HEAD, GET, copy, delete, list) goes through the SDK.
//
// The failures are the SDK's: an S3 error answer throws an `S3ServiceException` named by its
// `Code` with `$metadata.httpStatusCode`; a network failure throws node's error (ECONNREFUSED,
// ECONNRESET, ...), so `isUnreachable` and `describeS3Failure` read both alike. The SDK's standard
// retries are kept: up to 3 attempts on a network error, a 5xx, a throttling answer or a timeout
// code, after a random wait up to 100 ms × 2^attempt (500 ms base when throttled).
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { S3ServiceException, type S3Client } from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import { XMLParser } from 'fast-xml-parser';
import { Pool, type Dispatcher } from 'undici';
import { PutSigner, type Credentials } from './put-signer.js';
import type { S3Location } from '../block-store.js';
import { S3_ERROR_ANSWER_MAX_BYTES } from '../../base/limits.js';

const MAX_ATTEMPTS = 3;
const RETRY_BASE_MS = 100;
const THROTTLED_BASE_MS = 500;
const MAX_RETRY_DELAY_MS = 20_000;
const ERROR_PARSER = new XMLParser({ parseTagValue: false, processEntities: true });
const RETRY_STATUS = new Set([429, 500, 502, 503, 504]);
const RETRY_CODES = new Set(['SlowDown', 'Throttling', 'ThrottlingException', 'RequestLimitExceeded', 'RequestThrottled', 'TooManyRequestsException', 'BandwidthLimitExceeded', 'RequestTimeout', 'RequestTimeoutException', 'TimeoutError']);
const RETRY_NETWORK = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** SHA-256 and HMAC-SHA256 in the shape @smithy/signature-v4 asks for, on node:crypto. */
class Sha256 {
  private readonly hash: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.hash.digest());
  }
}

const bytes = (v: string | ArrayBuffer | ArrayBufferView): Buffer =>
  typeof v === 'string' ? Buffer.from(v, 'utf8') : ArrayBuffer.isView(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : Buffer.from(v);

/** A key's path segments encoded as the SDK encodes them (RFC 3986: `!'()*` too). */
const encodeKey = (key: string) => key.split('/').map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)).join('/');

/** Where the bucket is and how requests to it are signed, as the SDK's endpoint rules say. */
interface Target {
  protocol: 'http:' | 'https:';
  hostname: string;
  port?: number;
  /** The path before the key: '/' (virtual-hosted) or '/<bucket>/' (path style). */
  base: string;
  signer: SignatureV4;
  lean: PutSigner;
  origin: string;
}

/** Bench only (bench/block-put-cost.ts): which HTTP client and which signer. */
export interface PutVariant {
  transport: 'node' | 'undici-request' | 'undici-dispatch';
  signer: 'smithy' | 'lean';
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
    private readonly agents: { http: http.Agent; https: https.Agent },
    private readonly variant: PutVariant = { transport: 'node', signer: 'smithy' },
    private readonly connections = 64,
  ) {}

  private pool?: Pool;

  close(): Promise<void> {
    return this.pool?.close() ?? Promise.resolve();
  }

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

  private async resolve(): Promise<Target | undefined> {
    const { bucket, region, endpoint, forcePathStyle } = this.location;
    const config = this.client.config as unknown as {
      endpointProvider: (params: Record<string, unknown>, context: object) => { url: URL; properties?: { authSchemes?: Array<{ name: string; signingName?: string; signingRegion?: string }> } };
      credentials: ConstructorParameters<typeof SignatureV4>[0]['credentials'];
    };
    const resolved = config.endpointProvider({ Bucket: bucket, Region: region, UseFIPS: false, UseDualStack: false, ForcePathStyle: forcePathStyle, Accelerate: false, ...(endpoint ? { Endpoint: endpoint } : {}) }, {});
    const scheme = resolved.properties?.authSchemes?.[0];
    if (scheme && scheme.name !== 'sigv4') return undefined;
    const url = resolved.url;
    if (url.search || (url.protocol !== 'http:' && url.protocol !== 'https:')) return undefined;
    return {
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      base: url.pathname.endsWith('/') ? url.pathname : `${url.pathname}/`,
      signer: new SignatureV4({ service: scheme?.signingName ?? 's3', region: scheme?.signingRegion ?? region, credentials: config.credentials, sha256: Sha256, uriEscapePath: false, applyChecksum: false }),
      lean: new PutSigner(scheme?.signingRegion ?? region, scheme?.signingName ?? 's3', config.credentials as unknown as () => Promise<Credentials>),
      origin: url.origin,
    };
  }

  private async send(target: Target, key: string, hex: string, size: number, pieces: readonly Uint8Array[], ifAbsent: boolean): Promise<Answer> {
    const host = target.port ? `${target.hostname}:${target.port}` : target.hostname;
    const path = `${target.base}${encodeKey(key)}`;
    // The block's name is its SHA-256: the signature takes it instead of hashing the bytes again,
    // and the server checks the body against it.
    const headers: Record<string, string> = { host, 'content-type': 'application/octet-stream', 'content-length': String(size), 'x-amz-content-sha256': hex, ...(ifAbsent ? { 'if-none-match': '*' } : {}) };
    const signed = this.variant.signer === 'lean' ? { headers: await target.lean.sign(path, headers) } : await target.signer.sign({ method: 'PUT', protocol: target.protocol, hostname: target.hostname, port: target.port, path, query: {}, headers });
    if (this.variant.transport !== 'node') {
      this.pool ??= new Pool(target.origin, { connections: this.connections, headersTimeout: 0, bodyTimeout: 0 });
      const body = pieces.length === 1 ? asBuffer(pieces[0]!) : pieces.map(asBuffer);
      try {
        if (this.variant.transport === 'undici-request') return await requestAnswer(this.pool, path, signed.headers, body);
        return await dispatchAnswer(this.pool, path, signed.headers, body);
      } catch (err) {
        throw nodeLike(err);
      }
    }
    const transport = target.protocol === 'https:' ? https : http;
    const agent = target.protocol === 'https:' ? this.agents.https : this.agents.http;
    return new Promise<Answer>((resolve, reject) => {
      const req = transport.request({ method: 'PUT', hostname: target.hostname, port: target.port, path, headers: signed.headers, agent }, (res) => {
        const status = res.statusCode ?? 0;
        const requestId = (res.headers['x-amz-request-id'] as string | undefined) ?? undefined;
        if (status >= 200 && status < 300) {
          res.resume();
          res.once('end', () => resolve({ status, body: '', requestId }));
        } else {
          // An error answer is a small XML document: its first S3_ERROR_ANSWER_MAX_BYTES name the failure, the rest is dropped.
          const parts: Buffer[] = [];
          let kept = 0;
          res.on('data', (d: Buffer) => {
            if (kept >= S3_ERROR_ANSWER_MAX_BYTES) return;
            parts.push(d.subarray(0, S3_ERROR_ANSWER_MAX_BYTES - kept));
            kept += Math.min(d.length, S3_ERROR_ANSWER_MAX_BYTES - kept);
          });
          res.once('end', () => resolve({ status, body: Buffer.concat(parts).toString('utf8'), requestId }));
        }
        res.once('error', reject);
      });
      req.once('error', reject);
      // The pieces are the ingest's memory (shared segments), written in place: no copy.
      for (const p of pieces) req.write(Buffer.from(p.buffer, p.byteOffset, p.byteLength));
      req.end();
    });
  }
}

const asBuffer = (p: Uint8Array) => Buffer.from(p.buffer, p.byteOffset, p.byteLength);

async function requestAnswer(pool: Pool, path: string, headers: Record<string, string>, body: Buffer | Buffer[]): Promise<Answer> {
  const res = await pool.request({ method: 'PUT', path, headers, body: body as Uint8Array });
  const status = res.statusCode;
  const requestId = res.headers['x-amz-request-id'] as string | undefined;
  if (status >= 200 && status < 300) {
    await res.body.dump();
    return { status, body: '', requestId };
  }
  const parts: Buffer[] = [];
  let kept = 0;
  for await (const d of res.body as AsyncIterable<Buffer>) {
    if (kept >= S3_ERROR_ANSWER_MAX_BYTES) continue;
    parts.push(d.subarray(0, S3_ERROR_ANSWER_MAX_BYTES - kept));
    kept += Math.min(d.length, S3_ERROR_ANSWER_MAX_BYTES - kept);
  }
  return { status, body: Buffer.concat(parts).toString('utf8'), requestId };
}

function dispatchAnswer(pool: Pool, path: string, headers: Record<string, string>, body: Buffer | Buffer[]): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    let status = 0;
    let requestId: string | undefined;
    const parts: Buffer[] = [];
    let kept = 0;
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart() {},
      onResponseStart(_c, statusCode, h) {
        status = statusCode;
        requestId = h['x-amz-request-id'] as string | undefined;
      },
      onResponseData(_c, d) {
        if (status >= 200 && status < 300) return;
        if (kept >= S3_ERROR_ANSWER_MAX_BYTES) return;
        parts.push(d.subarray(0, S3_ERROR_ANSWER_MAX_BYTES - kept));
        kept += Math.min(d.length, S3_ERROR_ANSWER_MAX_BYTES - kept);
      },
      onResponseEnd() {
        resolve({ status, body: parts.length ? Buffer.concat(parts).toString('utf8') : '', requestId });
      },
      onResponseError(_c, err) {
        reject(err);
      },
    };
    pool.dispatch({ method: 'PUT', path, headers, body: body as Uint8Array }, handler);
  });
}

/** undici's own socket errors as node:http reports them. */
function nodeLike(err: unknown): unknown {
  const code = (err as { code?: string }).code;
  if (code === 'UND_ERR_SOCKET') return Object.assign(new Error(`socket hang up (${(err as Error).message})`, { cause: err }), { code: 'ECONNRESET' });
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return Object.assign(new Error(`connect ETIMEDOUT (${(err as Error).message})`, { cause: err }), { code: 'ETIMEDOUT' });
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
