// The block PUT's own SigV4 signer (engine/store/s3/put-signer.ts) signs as the AWS SDK's signer
// (@smithy/signature-v4, configured as the store configured it before) does: the same headers and
// the same Authorization at a fixed time, for every header set a block PUT sends, path-style and
// virtual-hosted, with and without a session token, across a day's change and a rotated secret.
// That servers accept it is shown by the S3 block-store tests (s3rver and radosgw).
import { createHash } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { type Credentials, PutSigner } from '../engine/store/s3/put-signer.js';
import { Sha256 } from './helpers/s3-client.js';

const KEY: Credentials = { accessKeyId: 'AKIASVCBLOCKPUT00001', secretAccessKey: 'svc-block-put-secret-0123456789abcdefghij' };
const hex = createHash('sha256').update('a block').digest('hex');

async function smithy(region: string, service: string, credentials: Credentials, hostname: string, path: string, headers: Record<string, string>, at: Date): Promise<Record<string, string>> {
  const signer = new SignatureV4({ service, region, credentials, sha256: Sha256, uriEscapePath: false, applyChecksum: false });
  const signed = await signer.sign({ method: 'PUT', protocol: 'https:', hostname, path, query: {}, headers }, { signingDate: at });
  return signed.headers;
}

describe('block PUT signer', () => {
  const at = new Date('2026-12-02T23:59:59.999Z');
  const cases: Array<[string, string, string, Record<string, string>]> = [
    ['path style', '127.0.0.1', '/svc-blocks/pre/blocks/abc/x-65536', { host: '127.0.0.1:7480', 'content-type': 'application/octet-stream', 'content-length': '65536', 'x-amz-content-sha256': hex }],
    ['If-None-Match', '127.0.0.1', '/svc-blocks/blocks/abc/x-1048576', { host: '127.0.0.1:7480', 'content-type': 'application/octet-stream', 'content-length': '1048576', 'x-amz-content-sha256': hex, 'if-none-match': '*' }],
    ['virtual-hosted, an encoded key', 'b.s3.eu-west-3.amazonaws.com', "/p%20q/%21%27%28%29%2A/blocks/x-1", { host: 'b.s3.eu-west-3.amazonaws.com', 'content-type': 'application/octet-stream', 'content-length': '1', 'x-amz-content-sha256': hex, 'if-none-match': '*' }],
  ];
  for (const [name, hostname, path, headers] of cases) {
    for (const credentials of [KEY, { ...KEY, sessionToken: 'FwoGZXIvYXdzEJr//////////wEaDAbc+/token=' }]) {
      it(`${name}${credentials.sessionToken ? ', session token' : ''}: the SDK's headers`, async () => {
        const lean = await new PutSigner('eu-west-3', 's3', () => Promise.resolve(credentials)).sign(path, headers, at);
        expect(lean).toEqual(await smithy('eu-west-3', 's3', credentials, hostname, path, headers, at));
      });
    }
  }

  it('derives the key again for a new day and a rotated secret (the provider is asked per request)', async () => {
    let credentials = KEY;
    const signer = new PutSigner('us-east-1', 's3', () => Promise.resolve(credentials));
    const [, path, headers] = [cases[0]![1], cases[0]![2], cases[0]![3]];
    const days = [at, new Date(at.getTime() + 1), new Date(at.getTime() + 86_400_000)];
    for (const when of days) expect(await signer.sign(path, headers, when)).toEqual(await smithy('us-east-1', 's3', credentials, '127.0.0.1', path, headers, when));
    credentials = { accessKeyId: 'AKIASVCBLOCKPUT00002', secretAccessKey: 'rotated' };
    expect(await signer.sign(path, headers, at)).toEqual(await smithy('us-east-1', 's3', credentials, '127.0.0.1', path, headers, at));
  });
});
