// The benches' lean SigV4 signer (bench/s3-signer.ts) signs every request shape the benches send
// exactly as the AWS SDK's own signer (@smithy/signature-v4) does: same headers, same
// Authorization. Otherwise bench:s3 would measure servers on requests no real client sends.
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { S3Signer, UNSIGNED_PAYLOAD, sha256Hex } from '../dist/bench/s3-signer.js';
import { Sha256 } from './helpers/s3-client.js';

const KEY = { accessKeyId: 'AKIASVCBENCH00000001', secretAccessKey: 'svc-bench-secret-0123456789abcdefghijklmn' };
const ENDPOINT = 'http://127.0.0.1:9000';

/** What the SDK's signer makes of the same request, as name → value. */
async function sdkHeaders(method: string, target: string, headers: Record<string, string>, payloadHash: string, at: Date): Promise<Record<string, string>> {
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: KEY, sha256: Sha256, uriEscapePath: false, applyChecksum: false });
  const [path, rawQuery] = target.split('?', 2) as [string, string | undefined];
  const query: Record<string, string> = {};
  if (rawQuery) for (const [k, v] of new URLSearchParams(rawQuery)) query[k] = v;
  const signed = await signer.sign(
    { method, protocol: 'http:', hostname: '127.0.0.1:9000', path, query, headers: { host: '127.0.0.1:9000', 'x-amz-content-sha256': payloadHash, ...headers } },
    { signingDate: at },
  );
  return Object.fromEntries(Object.entries(signed.headers).map(([k, v]) => [k.toLowerCase(), v]));
}

/** The lean signer's head, parsed back into its request line and headers. */
function leanHeaders(head: string): { line: string; headers: Record<string, string> } {
  const [line, ...rest] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of rest) if (l) headers[l.slice(0, l.indexOf(':'))] = l.slice(l.indexOf(':') + 2);
  return { line: line!, headers };
}

describe('bench S3 signer', () => {
  const at = new Date('2026-12-02T15:04:05.678Z');
  const body = Buffer.from('four kibibytes, or so');
  const shapes: Array<[string, string, Record<string, string>, string]> = [
    ['GET', '/bench/g/17', {}, sha256Hex(Buffer.alloc(0))],
    ['PUT', '/bench/p/1', { 'content-type': 'application/octet-stream', 'content-length': String(body.length) }, sha256Hex(body)],
    ['HEAD', '/bench/g/3', {}, UNSIGNED_PAYLOAD],
    ['PUT', '/bench/big', { 'content-length': '1073741824', 'content-type': 'application/octet-stream' }, UNSIGNED_PAYLOAD],
    ['GET', '/bench?list-type=2&prefix=a%20b&max-keys=10', { 'user-agent': 'bench', 'x-amz-meta-Note': '  two  spaces ' }, UNSIGNED_PAYLOAD],
    ['PUT', '/bench/k%20with%2Fslash', {}, sha256Hex(Buffer.alloc(0))],
  ];
  for (const [method, target, headers, payloadHash] of shapes) {
    it(`signs ${method} ${target} as @smithy/signature-v4 does`, async () => {
      const lean = leanHeaders(new S3Signer(ENDPOINT, KEY).head(method, target, headers, payloadHash, at));
      expect(lean.line).toBe(`${method} ${target} HTTP/1.1`);
      expect(lean.headers).toEqual(await sdkHeaders(method, target, headers, payloadHash, at));
    });
  }

  it('derives the signing key again on another day', async () => {
    const signer = new S3Signer(ENDPOINT, KEY);
    const next = new Date('2026-12-03T00:00:01Z');
    signer.head('GET', '/bench/a', {}, UNSIGNED_PAYLOAD, at);
    expect(leanHeaders(signer.head('GET', '/bench/a', {}, UNSIGNED_PAYLOAD, next)).headers).toEqual(await sdkHeaders('GET', '/bench/a', {}, UNSIGNED_PAYLOAD, next));
  });
});
