/**
 * Signed S3 requests as raw HTTP/1.1 bytes for the benches' load generator (bench/s3-api.ts):
 * SigV4 in the Authorization header, signed by @smithy/signature-v4 (the AWS SDK's own signer),
 * so svc and any other S3 server are sent byte-for-byte the same kind of request.
 */
import crypto from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';

export interface S3Key {
  accessKeyId: string;
  secretAccessKey: string;
}

const asBytes = (v: string | ArrayBuffer | ArrayBufferView): Buffer =>
  typeof v === 'string' ? Buffer.from(v, 'utf8') : ArrayBuffer.isView(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : Buffer.from(v);

/** SHA-256 and HMAC-SHA256 in the shape @smithy/signature-v4 asks for, on node:crypto. */
class Sha256 {
  private readonly hash: crypto.Hash | crypto.Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? crypto.createHash('sha256') : crypto.createHmac('sha256', asBytes(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(asBytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.hash.digest());
  }
}

export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
export const sha256Hex = (body: Buffer) => crypto.createHash('sha256').update(body).digest('hex');

/** Signs requests to one S3 endpoint (http://host:port, path style) with one key. */
export class S3Signer {
  private readonly signer: SignatureV4;
  private readonly host: string;

  constructor(
    endpoint: string,
    key: S3Key,
    private readonly region = 'us-east-1',
  ) {
    this.host = new URL(endpoint).host;
    this.signer = new SignatureV4({ service: 's3', region, credentials: key, sha256: Sha256, uriEscapePath: false, applyChecksum: false });
  }

  /**
   * The request's head (request line and headers, ending in the blank line): `target` is the
   * path (its keys already URI-encoded), `payloadHash` the body's SHA-256 hex or UNSIGNED-PAYLOAD.
   */
  async head(method: string, target: string, headers: Record<string, string>, payloadHash: string): Promise<string> {
    const [pathPart, queryPart] = target.split('?', 2) as [string, string | undefined];
    const query: Record<string, string> = {};
    if (queryPart) for (const [k, v] of new URLSearchParams(queryPart)) query[k] = v;
    const signed = await this.signer.sign({
      method,
      protocol: 'http:',
      hostname: this.host,
      path: pathPart,
      query,
      headers: { host: this.host, 'x-amz-content-sha256': payloadHash, ...headers },
    });
    let out = `${method} ${target} HTTP/1.1\r\n`;
    for (const [name, value] of Object.entries(signed.headers)) out += `${name}: ${value}\r\n`;
    return `${out}\r\n`;
  }

  /** A whole request with its body, the body's SHA-256 signed (what the SDK does over http). */
  async request(method: string, target: string, body?: Buffer, headers: Record<string, string> = {}): Promise<Buffer> {
    const payload = body ?? Buffer.alloc(0);
    const all = body ? { ...headers, 'content-length': String(body.length) } : headers;
    const head = await this.head(method, target, all, sha256Hex(payload));
    return body ? Buffer.concat([Buffer.from(head, 'latin1'), body]) : Buffer.from(head, 'latin1');
  }

}
