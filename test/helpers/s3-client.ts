// The S3 API tests' client and their way of reading a refusal (test/s3-api.test.ts,
// test/s3-multipart-api.test.ts): the AWS SDK, path style, no retry (a refusal is the answer).
import crypto from 'node:crypto';
import { S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

/** A client of the S3 listener at `url` (http://127.0.0.1:<port>). */
export function s3Client(url: string, credentials: S3Credentials, more: Record<string, unknown> = {}): S3Client {
  return new S3Client({ endpoint: url, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1, ...more });
}

/** The S3 error a command fails with: its code and HTTP status (an error if it succeeds). */
export async function s3Failure(p: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof S3ServiceException) return { name: err.name, status: err.$metadata.httpStatusCode };
    throw err;
  }
  throw new Error('expected a failure');
}

/** SHA-256 and HMAC-SHA256 as @smithy/signature-v4 asks for them (node:crypto). */
export class Sha256 {
  private readonly hash: crypto.Hash | crypto.Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? crypto.createHash('sha256') : crypto.createHmac('sha256', bytes(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return this.hash.digest();
  }
}

const bytes = (d: string | ArrayBuffer | ArrayBufferView): string | Uint8Array =>
  typeof d === 'string' ? d : d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array(d.buffer, d.byteOffset, d.byteLength);

/** A PutObject signed in its Authorization header with `payloadHash` as its x-amz-content-sha256 (right or not). */
export async function signedPut(s3Url: string, pathAndQuery: string, key: S3Credentials, body: Buffer, payloadHash: string, more: Record<string, string> = {}): Promise<Response> {
  const url = new URL(`${s3Url}${pathAndQuery}`);
  const query: Record<string, string> = {};
  url.searchParams.forEach((v, k) => (query[k] = v));
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: key, sha256: Sha256, uriEscapePath: false, applyChecksum: false });
  const signed = await signer.sign({
    method: 'PUT', protocol: 'http:', hostname: url.hostname, port: Number(url.port), path: url.pathname, query,
    headers: { host: url.host, 'x-amz-content-sha256': payloadHash, 'content-length': String(body.length), ...more },
  });
  const headers = Object.fromEntries(Object.entries(signed.headers).filter(([k]) => k !== 'host' && k !== 'content-length'));
  return fetch(url, { method: 'PUT', headers, body: new Uint8Array(body) });
}

