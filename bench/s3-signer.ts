/**
 * Signed S3 requests as raw HTTP/1.1 bytes for the benches' load generator (bench/s3-api.ts):
 * SigV4 in the Authorization header, so svc and any other S3 server are sent byte-for-byte the
 * same kind of request.
 *
 * The signature is computed here, lean (the signing key derived once per day, one SHA-256 of the
 * canonical request and one HMAC per request), not by @smithy/signature-v4: the SDK's signer
 * costs ~0.05 CPU-ms per request (promises, header normalization, its own hashing objects), as
 * much as a 4 KiB GET costs svc, and on this 2-core host the load generator's CPU is taken from
 * the servers it measures. test/bench-s3-signer.test.ts checks that both sign every request shape
 * the benches send identically.
 */
import crypto from 'node:crypto';

export interface S3Key {
  accessKeyId: string;
  secretAccessKey: string;
}

export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
export const sha256Hex = (body: Buffer) => crypto.hash('sha256', body, 'hex');

/** Headers the AWS SDK never signs (@smithy/signature-v4's ALWAYS_UNSIGNABLE_HEADERS): a proxy may change them. */
const UNSIGNABLE = new Set([
  'authorization', 'cache-control', 'connection', 'expect', 'from', 'keep-alive', 'max-forwards', 'pragma', 'referer', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'user-agent', 'x-amzn-trace-id',
]);

/** AWS's URI encoding of a query name or value: all but `A-Za-z0-9-._~` as `%XX`. */
const encode = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

const hmac = (key: crypto.BinaryLike, data: string) => crypto.createHmac('sha256', key).update(data).digest();

/** Signs requests to one S3 endpoint (http://host:port, path style) with one key. */
export class S3Signer {
  private readonly host: string;
  private day = '';
  private signingKey = Buffer.alloc(0);

  constructor(
    endpoint: string,
    private readonly key: S3Key,
    private readonly region = 'us-east-1',
  ) {
    this.host = new URL(endpoint).host;
  }

  /**
   * The request's head (request line and headers, ending in the blank line): `target` is the
   * path (its keys already URI-encoded), `payloadHash` the body's SHA-256 hex or UNSIGNED-PAYLOAD.
   * `now` (tests): the signing time.
   */
  head(method: string, target: string, headers: Record<string, string>, payloadHash: string, now = new Date()): string {
    const [path, rawQuery] = target.split('?', 2) as [string, string | undefined];
    const dateTime = now.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
    const day = dateTime.slice(0, 8);
    const all: Record<string, string> = { host: this.host, 'x-amz-content-sha256': payloadHash, 'x-amz-date': dateTime };
    for (const [name, value] of Object.entries(headers)) all[name.toLowerCase()] = value;
    const signed = Object.keys(all).filter((name) => !UNSIGNABLE.has(name)).sort();
    const query = rawQuery ? [...new URLSearchParams(rawQuery)].map(([n, v]) => [encode(n), encode(v)] as const).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1)) : [];
    const canonical = [
      method,
      path,
      query.map(([n, v]) => `${n}=${v}`).join('&'),
      signed.map((name) => `${name}:${all[name]!.trim().replace(/\s+/g, ' ')}\n`).join(''),
      signed.join(';'),
      payloadHash,
    ].join('\n');
    const scope = `${day}/${this.region}/s3/aws4_request`;
    if (day !== this.day) {
      this.signingKey = hmac(hmac(hmac(hmac(`AWS4${this.key.secretAccessKey}`, day), this.region), 's3'), 'aws4_request');
      this.day = day;
    }
    const signature = crypto.createHmac('sha256', this.signingKey).update(`AWS4-HMAC-SHA256\n${dateTime}\n${scope}\n${crypto.hash('sha256', canonical, 'hex')}`).digest('hex');
    all.authorization = `AWS4-HMAC-SHA256 Credential=${this.key.accessKeyId}/${scope}, SignedHeaders=${signed.join(';')}, Signature=${signature}`;
    let out = `${method} ${target} HTTP/1.1\r\n`;
    for (const [name, value] of Object.entries(all)) out += `${name}: ${value}\r\n`;
    return `${out}\r\n`;
  }

  /** A whole request with its body, the body's SHA-256 signed (what the SDK does over http). */
  request(method: string, target: string, body?: Buffer, headers: Record<string, string> = {}): Buffer {
    const payload = body ?? Buffer.alloc(0);
    const all = body ? { ...headers, 'content-length': String(body.length) } : headers;
    const head = this.head(method, target, all, sha256Hex(payload));
    return body ? Buffer.concat([Buffer.from(head, 'latin1'), body]) : Buffer.from(head, 'latin1');
  }
}
