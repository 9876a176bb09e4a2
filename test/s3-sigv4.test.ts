// SigV4 verification of the S3 API (issue 39): AWS's published S3 examples (GET Object, PUT
// Object, GET lifecycle, list objects, the presigned URL, the chunked upload with and without a
// signed trailer), the refusals with S3's codes, and requests signed by the AWS SDK's own signer
// (@smithy/signature-v4, installed with @aws-sdk/client-s3) verified by ours: headers, presigned
// and aws-chunked with an unsigned CRC trailer as the SDK sends it.

import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { createChecksum } from '../dist/engine/s3/checksums.js';
import type { S3Key } from '../dist/engine/s3/keys.js';
import { AwsChunkedDecoder, AwsChunkedStream, storedContentEncoding, type ChunkedOptions } from '../dist/server/s3/aws-chunked.js';
import { S3Error } from '../dist/server/s3/s3-error.js';
import { canonicalPath, canonicalQuery, parseQuery, uriEncode } from '../dist/server/s3/sigv4-canonical.js';
import { rememberedAuthorizations, verifyRequest, type SignedRequest, type Verified } from '../dist/server/s3/sigv4.js';
import { S3_AUTHORIZATIONS_CACHED } from '../dist/engine/base/limits.js';
import { deriveSigningKey, hmac, hmacHex } from '../dist/engine/base/sigv4-primitives.js';
import { signaturesEqual, signingKey } from '../dist/server/s3/signing-key.js';
import { Sha256 } from './helpers/s3-client.js';

// The credentials of AWS's S3 SigV4 examples.
const AKID = 'AKIAIOSFODNN7EXAMPLE';
const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const AT = Date.UTC(2013, 4, 24);
const EMPTY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const key: S3Key = { accessKeyId: AKID, secretAccessKey: SECRET, displayName: 'example', principal: { tenant: 't1', subject: 'alice', scopes: ['blob.read'], roles: [] } };
const keys = { find: (id: string) => (id === AKID ? key : undefined) };

function request(method: string, target: string, headers: Record<string, string>): SignedRequest {
  const q = target.indexOf('?');
  const lower = new Map(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return {
    method,
    rawPath: q < 0 ? target : target.slice(0, q),
    rawQuery: q < 0 ? '' : target.slice(q + 1),
    header: (name) => lower.get(name),
    headerNames: () => lower.keys(),
  };
}

const authorization = (signed: string, signature: string) =>
  `AWS4-HMAC-SHA256 Credential=${AKID}/20130524/us-east-1/s3/aws4_request,SignedHeaders=${signed},Signature=${signature}`;

function verify(req: SignedRequest, now = AT, region = 'us-east-1'): Verified {
  return verifyRequest(req, { keys, region, now });
}

function refusal(run: () => unknown): S3Error {
  try {
    run();
  } catch (err) {
    if (err instanceof S3Error) return err;
    throw err;
  }
  throw new Error('no refusal');
}

/** The signature with one hex digit changed. */
const flip = (hex: string) => (hex[0] === '0' ? '1' : '0') + hex.slice(1);

const GET_OBJECT = {
  host: 'examplebucket.s3.amazonaws.com',
  range: 'bytes=0-9',
  'x-amz-content-sha256': EMPTY,
  'x-amz-date': '20130524T000000Z',
};
const GET_OBJECT_SIGNATURE = 'f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41';

describe('AWS S3 SigV4 examples (Authorization header)', () => {
  it('GET Object with a Range', () => {
    const ok = verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: authorization('host;range;x-amz-content-sha256;x-amz-date', GET_OBJECT_SIGNATURE) }));
    expect(ok.key.principal.subject).toBe('alice');
    expect(ok.payload).toEqual({ kind: 'sha256', sha256: EMPTY });
    expect(ok.presigned).toBe(false);
  });

  it('PUT Object: a key with $ (sent as %24 or as $), the Date header signed beside x-amz-date', () => {
    const headers = {
      date: 'Fri, 24 May 2013 00:00:00 GMT',
      host: 'examplebucket.s3.amazonaws.com',
      'x-amz-content-sha256': '44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072',
      'x-amz-date': '20130524T000000Z',
      'x-amz-storage-class': 'REDUCED_REDUNDANCY',
      authorization: authorization('date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class', '98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd'),
    };
    for (const path of ['/test%24file.text', '/test$file.text']) {
      expect(verify(request('PUT', path, headers)).payload).toEqual({ kind: 'sha256', sha256: headers['x-amz-content-sha256'] });
    }
    expect(refusal(() => verify(request('PUT', '/test%24file.text', { ...headers, 'x-amz-storage-class': 'STANDARD' }))).code).toBe('SignatureDoesNotMatch');
  });

  it('GET bucket lifecycle (a parameter without a value) and a list with two parameters', () => {
    const headers = { host: 'examplebucket.s3.amazonaws.com', 'x-amz-content-sha256': EMPTY, 'x-amz-date': '20130524T000000Z' };
    const signed = 'host;x-amz-content-sha256;x-amz-date';
    verify(request('GET', '/?lifecycle', { ...headers, authorization: authorization(signed, 'fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543') }));
    const list = verify(request('GET', '/?max-keys=2&prefix=J', { ...headers, authorization: authorization(signed, '34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7') }));
    expect(list.query).toEqual([['max-keys', '2'], ['prefix', 'J']]);
    // The order of the parameters as sent does not matter; their values do.
    verify(request('GET', '/?prefix=J&max-keys=2', { ...headers, authorization: authorization(signed, '34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7') }));
    expect(refusal(() => verify(request('GET', '/?max-keys=3&prefix=J', { ...headers, authorization: authorization(signed, '34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7') }))).code).toBe('SignatureDoesNotMatch');
  });

  it('a changed signature, path, method or signed header is SignatureDoesNotMatch, with the string to sign', () => {
    const auth = authorization('host;range;x-amz-content-sha256;x-amz-date', GET_OBJECT_SIGNATURE);
    const cases = [
      request('GET', '/test.txt', { ...GET_OBJECT, authorization: authorization('host;range;x-amz-content-sha256;x-amz-date', flip(GET_OBJECT_SIGNATURE)) }),
      request('GET', '/test.txu', { ...GET_OBJECT, authorization: auth }),
      request('HEAD', '/test.txt', { ...GET_OBJECT, authorization: auth }),
      request('GET', '/test.txt', { ...GET_OBJECT, range: 'bytes=0-10', authorization: auth }),
      request('GET', '/test.txt?x=1', { ...GET_OBJECT, authorization: auth }),
    ];
    for (const req of cases) {
      const err = refusal(() => verify(req));
      expect(err.code).toBe('SignatureDoesNotMatch');
      expect(err.status).toBe(403);
      expect(err.extra.StringToSign).toMatch(/^AWS4-HMAC-SHA256\n20130524T000000Z\n20130524\/us-east-1\/s3\/aws4_request\n[0-9a-f]{64}$/);
    }
  });

  it('an Authorization header remembered parsed (after a verified request) still has its signature, date and form checked', () => {
    const signed = 'host;range;x-amz-content-sha256;x-amz-date';
    const good = request('GET', '/test.txt', { ...GET_OBJECT, authorization: authorization(signed, GET_OBJECT_SIGNATURE) });
    for (let i = 0; i < 3; i++) expect(verify(good).key.accessKeyId).toBe(AKID);
    // Same text before the signature: another signature, a signature that is not 64 hex digits, a field after it.
    expect(refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: authorization(signed, flip(GET_OBJECT_SIGNATURE)) }))).code).toBe('SignatureDoesNotMatch');
    expect(refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: authorization(signed, GET_OBJECT_SIGNATURE.slice(1)) }))).code).toBe('AuthorizationHeaderMalformed');
    expect(refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: `${authorization(signed, GET_OBJECT_SIGNATURE)},Extra=1` }))).code).toBe('AuthorizationHeaderMalformed');
    // The credential's date against the request's, and the clock, are the request's own.
    expect(refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, 'x-amz-date': '20130525T000000Z', authorization: authorization(signed, GET_OBJECT_SIGNATURE) }))).code).toBe('AuthorizationHeaderMalformed');
    expect(refusal(() => verify(good, AT + 16 * 60_000)).code).toBe('RequestTimeTooSkewed');
  });

  it('refuses an unknown key, a skewed clock, another region, an unsigned x-amz-* header and malformed headers', () => {
    const auth = authorization('host;range;x-amz-content-sha256;x-amz-date', GET_OBJECT_SIGNATURE);
    const unknown = refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: auth.replace(AKID, 'AKIDUNKNOWN') })));
    expect([unknown.code, unknown.status, unknown.extra.AWSAccessKeyId]).toEqual(['InvalidAccessKeyId', 403, 'AKIDUNKNOWN']);
    // 15 minutes either way is accepted; a second more is not.
    verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: auth }), AT + 15 * 60_000);
    verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: auth }), AT - 15 * 60_000);
    for (const now of [AT + 15 * 60_000 + 1000, AT - 15 * 60_000 - 1000]) {
      const skewed = refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: auth }), now));
      expect([skewed.code, skewed.status, skewed.extra.RequestTime]).toEqual(['RequestTimeTooSkewed', 403, '20130524T000000Z']);
    }
    const region = refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: auth }), AT, 'eu-west-1'));
    expect([region.code, region.status, region.extra.Region]).toEqual(['AuthorizationHeaderMalformed', 400, 'eu-west-1']);
    const extra = refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, 'x-amz-meta-owner': 'mallory', authorization: auth })));
    expect([extra.code, extra.extra.HeadersNotSigned]).toEqual(['AccessDenied', 'x-amz-meta-owner']);
    const malformed = [
      'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range',
      `AWS4-HMAC-SHA256 Credential=${AKID}/20130525/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=${GET_OBJECT_SIGNATURE}`,
      `AWS4-HMAC-SHA256 Credential=${AKID}/20130524/us-east-1/ec2/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=${GET_OBJECT_SIGNATURE}`,
      `AWS4-HMAC-SHA256 Credential=${AKID}/20130524/us-east-1/s3/aws4_request,SignedHeaders=range;host;x-amz-content-sha256;x-amz-date,Signature=${GET_OBJECT_SIGNATURE}`,
      `AWS4-HMAC-SHA256 Credential=${AKID}/20130524/us-east-1/s3/aws4_request,SignedHeaders=range;x-amz-content-sha256;x-amz-date,Signature=${GET_OBJECT_SIGNATURE}`,
    ];
    for (const value of malformed) expect(refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: value }))).code).toBe('AuthorizationHeaderMalformed');
    expect(refusal(() => verify(request('GET', '/test.txt', { ...GET_OBJECT, authorization: 'AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=' }))).code).toBe('InvalidRequest');
    const { 'x-amz-content-sha256': _, ...noHash } = GET_OBJECT;
    expect(refusal(() => verify(request('GET', '/test.txt', { ...noHash, authorization: authorization('host;range;x-amz-date', GET_OBJECT_SIGNATURE) }))).code).toBe('InvalidRequest');
    expect(refusal(() => verify(request('GET', '/test.txt', { host: 'examplebucket.s3.amazonaws.com' }))).code).toBe('AccessDenied');
  });
});

describe('AWS S3 SigV4 example: the presigned URL', () => {
  const url =
    '/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request' +
    '&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404';
  const host = { host: 'examplebucket.s3.amazonaws.com' };

  it('verifies within its 86400 s, then AccessDenied "Request has expired"', () => {
    const ok = verify(request('GET', url, host), AT + 86_400_000);
    expect([ok.presigned, ok.payload.kind]).toEqual([true, 'unsigned']);
    const expired = refusal(() => verify(request('GET', url, host), AT + 86_401_000));
    expect([expired.code, expired.status, expired.message]).toEqual(['AccessDenied', 403, 'Request has expired']);
    expect(refusal(() => verify(request('GET', url, host), AT - 16 * 60_000)).message).toBe('Request is not valid yet');
  });

  it('refuses a changed signature, an extra parameter, a longer expiry, an unsigned x-amz-* header, a missing parameter', () => {
    expect(refusal(() => verify(request('GET', url.replace('X-Amz-Signature=a', 'X-Amz-Signature=b'), host))).code).toBe('SignatureDoesNotMatch');
    expect(refusal(() => verify(request('GET', `${url}&response-content-type=text/html`, host))).code).toBe('SignatureDoesNotMatch');
    expect(refusal(() => verify(request('GET', url.replace('Expires=86400', 'Expires=86401'), host))).code).toBe('SignatureDoesNotMatch');
    expect(refusal(() => verify(request('GET', url.replace('Expires=86400', 'Expires=604801'), host))).code).toBe('AuthorizationQueryParametersError');
    expect(refusal(() => verify(request('GET', url, { ...host, 'x-amz-copy-source': '/b/k' }))).extra.HeadersNotSigned).toBe('x-amz-copy-source');
    expect(refusal(() => verify(request('GET', url.replace(/&X-Amz-Date=[^&]*/, ''), host))).code).toBe('AuthorizationQueryParametersError');
    expect(refusal(() => verify(request('GET', url, { ...host, authorization: 'AWS4-HMAC-SHA256 x' }))).code).toBe('InvalidArgument');
    expect(refusal(() => verify(request('GET', `${url}&X-Amz-Security-Token=abc`, host))).code).toBe('InvalidToken');
  });
});

// ---- aws-chunked: AWS's chunked upload examples (65536 + 1024 bytes of "a") ----

const BODY = Buffer.alloc(66_560, 'a');

function chunkedBody(signatures: string[], trailer = ''): Buffer {
  return Buffer.concat([
    Buffer.from(`10000;chunk-signature=${signatures[0]}\r\n`),
    BODY.subarray(0, 65_536),
    Buffer.from(`\r\n400;chunk-signature=${signatures[1]}\r\n`),
    BODY.subarray(65_536),
    Buffer.from(`\r\n0;chunk-signature=${signatures[2]}\r\n${trailer}\r\n`),
  ]);
}

const SIGNED_CHUNKS = ['ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648', '0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497', 'b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9'];
const TRAILER_CHUNKS = ['b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2', '1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7', '2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992'];
const TRAILER = 'x-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n';

function seedRequest(trailer: boolean): SignedRequest {
  const headers: Record<string, string> = {
    'content-encoding': 'aws-chunked',
    host: 's3.amazonaws.com',
    'x-amz-content-sha256': trailer ? 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER' : 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
    'x-amz-date': '20130524T000000Z',
    'x-amz-decoded-content-length': '66560',
    'x-amz-storage-class': 'REDUCED_REDUNDANCY',
  };
  if (trailer) headers['x-amz-trailer'] = 'x-amz-checksum-crc32c';
  else headers['content-length'] = '66824';
  const signed = Object.keys(headers).sort().join(';');
  const seed = trailer ? '106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e' : '4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9';
  return request('PUT', '/examplebucket/chunkObject.txt', { ...headers, authorization: authorization(signed, seed) });
}

function chunkedOptions(verified: Verified): ChunkedOptions {
  if (verified.payload.kind !== 'chunked') throw new Error(`not chunked: ${verified.payload.kind}`);
  return { decodedLength: verified.payload.decodedLength, signing: verified.payload.signing, trailers: verified.payload.trailers };
}

/** Decodes `body` written `step` bytes at a time; the decoded bytes and trailers. */
function decode(options: ChunkedOptions, body: Buffer, step = body.length): { data: Buffer; trailers: Map<string, string> } {
  const decoder = new AwsChunkedDecoder(options);
  const out: Buffer[] = [];
  for (let at = 0; at < body.length; at += step) decoder.write(body.subarray(at, at + step), (d) => out.push(Buffer.from(d)));
  const trailers = decoder.end();
  return { data: Buffer.concat(out), trailers };
}

describe('aws-chunked with chunk signatures (AWS examples)', () => {
  it('verifies the seed and every chunk, in any write sizes', () => {
    const options = chunkedOptions(verify(seedRequest(false)));
    const body = chunkedBody(SIGNED_CHUNKS);
    expect(body.length).toBe(66_824); // the example's Content-Length
    for (const step of [body.length, 8192, 97, 1]) expect(decode(options, body, step).data.equals(BODY)).toBe(true);
  });

  it('a changed byte of data, a changed chunk signature, chunks out of order fail', () => {
    const options = chunkedOptions(verify(seedRequest(false)));
    const body = chunkedBody(SIGNED_CHUNKS);
    const changed = Buffer.from(body);
    changed[200] = 'b'.charCodeAt(0);
    expect(refusal(() => decode(options, changed, 4096)).code).toBe('SignatureDoesNotMatch');
    expect(refusal(() => decode(options, chunkedBody([SIGNED_CHUNKS[0]!, flip(SIGNED_CHUNKS[1]!), SIGNED_CHUNKS[2]!]))).code).toBe('SignatureDoesNotMatch');
    expect(refusal(() => decode(options, chunkedBody([SIGNED_CHUNKS[1]!, SIGNED_CHUNKS[0]!, SIGNED_CHUNKS[2]!]))).code).toBe('SignatureDoesNotMatch');
  });

  it('refuses malformed framing clearly, with bounded lines', () => {
    const options = chunkedOptions(verify(seedRequest(false)));
    const body = chunkedBody(SIGNED_CHUNKS);
    const truncated = refusal(() => decode(options, body.subarray(0, 40_000)));
    expect([truncated.code, truncated.message]).toEqual(['IncompleteBody', 'The aws-chunked body ended inside a chunk']);
    expect(refusal(() => decode(options, Buffer.concat([body, Buffer.from('x')]))).message).toMatch(/bytes follow the end/);
    const longLine = refusal(() => decode(options, Buffer.alloc(5000, '1')));
    expect([longLine.code, longLine.message]).toEqual(['InvalidRequest', 'aws-chunked body: a chunk or trailer line is longer than 1024 bytes']);
    expect(refusal(() => decode(options, Buffer.from('zz;chunk-signature=00\r\n'))).message).toMatch(/is not <hex size>;chunk-signature=<signature>/);
    const wrongSize = Buffer.from(body.toString('latin1').replace('400;chunk', '3ff;chunk'), 'latin1');
    expect(refusal(() => decode(options, wrongSize)).message).toMatch(/not followed by CRLF/);
    const tooLong = Buffer.from(body.toString('latin1').replace('400;chunk', '401;chunk'), 'latin1');
    expect(refusal(() => decode({ ...options, decodedLength: 66_560 }, tooLong)).message).toMatch(/more than x-amz-decoded-content-length/);
    expect(refusal(() => decode({ ...options, decodedLength: 70_000 }, body)).code).toBe('IncompleteBody');
  });

  it('streams: the Transform passes bytes on as they come and fails the pipeline on a bad chunk', async () => {
    const options = chunkedOptions(verify(seedRequest(false)));
    const body = chunkedBody(SIGNED_CHUNKS);
    const pieces = (b: Buffer) => Readable.from(Array.from({ length: Math.ceil(b.length / 1000) }, (_, i) => b.subarray(i * 1000, i * 1000 + 1000)));
    // Bytes come out as they come in: the first 1000 bytes of a 64 KiB chunk give its first 912.
    const decoder = new AwsChunkedDecoder(options);
    let early = 0;
    decoder.write(body.subarray(0, 1000), (d) => (early += d.length));
    expect(early).toBe(1000 - '10000;chunk-signature=\r\n'.length - 64);
    let seen = 0;
    await pipeline(pieces(body), new AwsChunkedStream(options), async function* (decoded: AsyncIterable<Buffer>) {
      for await (const d of decoded) seen += d.length;
      yield* [];
    });
    expect(seen).toBe(66_560);
    const changed = Buffer.from(body);
    changed[66_000] ^= 1; // a byte of the second chunk
    await expect(pipeline(pieces(changed), new AwsChunkedStream(options), async function* (d: AsyncIterable<Buffer>) {
      for await (const _ of d);
      yield* [];
    })).rejects.toMatchObject({ code: 'SignatureDoesNotMatch' });
  });
});

describe('aws-chunked with signed chunks and a signed trailer (AWS example)', () => {
  it('verifies the chunks, the trailer signature and the CRC32C the trailer carries', async () => {
    const verified = verify(seedRequest(true));
    const options = chunkedOptions(verified);
    expect(options.trailers).toEqual(['x-amz-checksum-crc32c']);
    const { data, trailers } = decode({ ...options, checksum: await createChecksum('CRC32C') }, chunkedBody(TRAILER_CHUNKS, TRAILER), 1000);
    expect(data.equals(BODY)).toBe(true);
    expect(trailers.get('x-amz-checksum-crc32c')).toBe('sOO8/Q==');
  });

  it('a changed trailer value, a changed trailer signature or a missing one fail', async () => {
    const options = chunkedOptions(verify(seedRequest(true)));
    expect(refusal(() => decode(options, chunkedBody(TRAILER_CHUNKS, TRAILER.replace('sOO8/Q==', 'sOO8/R=='))))).toMatchObject({ code: 'SignatureDoesNotMatch' });
    expect(refusal(() => decode(options, chunkedBody(TRAILER_CHUNKS, TRAILER.replace('trailer-signature:d', 'trailer-signature:e'))))).toMatchObject({ code: 'SignatureDoesNotMatch' });
    expect(refusal(() => decode(options, chunkedBody(TRAILER_CHUNKS, 'x-amz-checksum-crc32c:sOO8/Q==\r\n')))).toMatchObject({ code: 'MalformedTrailerError' });
    expect(refusal(() => decode(options, chunkedBody(TRAILER_CHUNKS, 'x-amz-checksum-sha1:sOO8/Q==\r\n')))).toMatchObject({ code: 'MalformedTrailerError' });
  });
});

// ---- the AWS SDK's signer against our verifier ----

const signer = new SignatureV4({ credentials: { accessKeyId: AKID, secretAccessKey: SECRET }, region: 'us-east-1', service: 's3', sha256: Sha256, uriEscapePath: false, applyChecksum: false });

interface SdkRequest {
  method: string;
  protocol: string;
  hostname: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
}

/** The request as our side receives it: the path and query as the SDK's HTTP handler writes them. */
function received(r: SdkRequest): SignedRequest {
  const query = Object.entries(r.query).map(([k, v]) => `${uriEncode(k, false)}=${uriEncode(v, false)}`).join('&');
  return request(r.method, query ? `${r.path}?${query}` : r.path, r.headers);
}

const sdkRequest = (over: Partial<SdkRequest>): SdkRequest => ({ method: 'GET', protocol: 'http:', hostname: 'localhost', path: '/bucket/key', query: {}, headers: { host: 'localhost:9000' }, ...over });

describe('requests signed by @smithy/signature-v4', () => {
  const signingDate = new Date(AT + 3_000);

  it('header form: keys that need encoding, query parameters, user metadata', async () => {
    const paths = ['/bucket/plain.txt', `/bucket/${uriEncode("dir/a b+c!'()*~ é€ 😀.txt", true)}`, '/bucket/'];
    for (const path of paths) {
      const r = sdkRequest({
        method: 'PUT',
        path,
        query: { 'x-id': 'PutObject', tagging: '', prefix: 'a b/c' },
        headers: { host: 'localhost:9000', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'x-amz-meta-owner': '  Ada   Lovelace ', 'content-type': 'text/plain' },
      });
      const signed = (await signer.sign(r as never, { signingDate })) as unknown as SdkRequest;
      const ok = verify(received(signed), AT);
      expect(ok.payload.kind).toBe('unsigned');
      expect(ok.query).toContainEqual(['prefix', 'a b/c']);
      const tampered = received({ ...signed, headers: { ...signed.headers, 'x-amz-meta-owner': 'Mallory' } });
      expect(refusal(() => verify(tampered, AT)).code).toBe('SignatureDoesNotMatch');
    }
  });

  it('remembers at most S3_AUTHORIZATIONS_CACHED Authorization headers, however many distinct ones verify', async () => {
    const n = S3_AUTHORIZATIONS_CACHED + 40;
    let largest = 0;
    for (let i = 0; i < n; i++) {
      // Each signs its own header set: a distinct Authorization before its signature.
      const r = sdkRequest({ headers: { host: 'localhost:9000', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', [`x-amz-meta-n${i}`]: 'x' } });
      const signed = (await signer.sign(r as never, { signingDate })) as unknown as SdkRequest;
      verify(received(signed), AT);
      largest = Math.max(largest, rememberedAuthorizations());
    }
    expect(largest).toBe(S3_AUTHORIZATIONS_CACHED);
    expect(rememberedAuthorizations()).toBeLessThanOrEqual(S3_AUTHORIZATIONS_CACHED);
    // A header too long to remember is verified and not remembered.
    const before = rememberedAuthorizations();
    const names = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`x-amz-meta-a-rather-long-header-name-${String(i).padStart(2, '0')}`, 'x']));
    const long = (await signer.sign(sdkRequest({ headers: { host: 'localhost:9000', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...names } }) as never, { signingDate })) as unknown as SdkRequest;
    expect((long.headers.authorization as string).length).toBeGreaterThan(1024);
    verify(received(long), AT);
    expect(rememberedAuthorizations()).toBe(before);
  });

  it('presigned: verified until it expires', async () => {
    const r = sdkRequest({ headers: { host: 'localhost:9000', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } });
    const signed = (await signer.presign(r as never, { signingDate, expiresIn: 900 })) as unknown as SdkRequest;
    const ok = verify(received(signed), AT + 900_000);
    expect(ok.presigned).toBe(true);
    expect(refusal(() => verify(received(signed), AT + 904_000)).message).toBe('Request has expired');
    expect(refusal(() => verify(received({ ...signed, path: '/bucket/other' }), AT)).code).toBe('SignatureDoesNotMatch');
  });

  it('aws-chunked with an unsigned CRC32 trailer, framed as the SDK frames it', async () => {
    const data = crypto.randomBytes(150_000);
    const crc = await createChecksum('CRC32');
    crc.update(data);
    const value = crc.digest();
    const r = sdkRequest({
      method: 'PUT',
      headers: {
        host: 'localhost:9000',
        'content-encoding': 'aws-chunked',
        'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
        'x-amz-decoded-content-length': String(data.length),
        'x-amz-trailer': 'x-amz-checksum-crc32',
        'x-amz-sdk-checksum-algorithm': 'CRC32',
      },
    });
    const signed = (await signer.sign(r as never, { signingDate })) as unknown as SdkRequest;
    const verified = verify(received(signed), AT);
    const options = chunkedOptions(verified);
    expect(options.signing).toBeNull();
    // As @smithy's getAwsChunkedEncodingStream writes it: `<hex>\r\n<bytes>\r\n` per piece, `0\r\n`, the trailer, `\r\n`.
    const frame = (pieces: Buffer[], trailer: string) =>
      Buffer.concat([...pieces.flatMap((p) => [Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n')]), Buffer.from(`0\r\n${trailer}`)]);
    const pieces = [data.subarray(0, 65_536), data.subarray(65_536, 131_072), data.subarray(131_072)];
    const good = frame(pieces, `x-amz-checksum-crc32:${value}\r\n\r\n`);
    const decoded = decode({ ...options, checksum: await createChecksum('CRC32') }, good, 5000);
    expect(decoded.data.equals(data)).toBe(true);
    expect(decoded.trailers.get('x-amz-checksum-crc32')).toBe(value);
    const bad = Buffer.from(good);
    bad[100] ^= 1;
    const fresh = await createChecksum('CRC32');
    expect(refusal(() => decode({ ...options, checksum: fresh }, bad))).toMatchObject({ code: 'BadDigest', status: 400 });
    expect(refusal(() => decode(options, frame(pieces, '')))).toMatchObject({ code: 'MalformedTrailerError' });
    // Without a checksum the SDK ends with `0\r\n` alone.
    const plain = { ...options, trailers: [] };
    expect(decode(plain, frame(pieces, '')).data.equals(data)).toBe(true);
  });

  it('the content encoding to store drops aws-chunked', () => {
    expect(storedContentEncoding('aws-chunked')).toBeUndefined();
    expect(storedContentEncoding('aws-chunked,gzip')).toBe('gzip');
    expect(storedContentEncoding('gzip, aws-chunked')).toBe('gzip');
  });
});

describe('canonical forms', () => {
  it('encodes paths once, AWS-style, and sorts the query by name then value', () => {
    expect(canonicalPath('/a%20b/c+d/%E2%82%AC/~x')).toBe('/a%20b/c%2Bd/%E2%82%AC/~x');
    expect(canonicalPath('')).toBe('/');
    expect(canonicalQuery(parseQuery('b=2&a=2&a=1&c'))).toBe('a=1&a=2&b=2&c=');
    expect(canonicalQuery(parseQuery('prefix=a+b%2Fc&x=%21'))).toBe('prefix=a%20b%2Fc&x=%21');
    expect(() => parseQuery('a=%E2%82')).toThrow(S3Error);
    expect(() => parseQuery(Array.from({ length: 65 }, (_, i) => `p${i}=1`).join('&'))).toThrow(/at most 64 query parameters/);
  });
});

describe('HMAC-SHA256 of a signing key (its pads made once)', () => {
  it('is node:crypto HMAC for ASCII and other messages, any length, called again and again', () => {
    const signing = signingKey(AKID, SECRET, '20130524', 'us-east-1', 's3');
    expect(signing.equals(deriveSigningKey(SECRET, '20130524', 'us-east-1', 's3'))).toBe(true);
    const messages = ['', 'AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n' + EMPTY, 'x'.repeat(200), 'caf\u00e9 \u2603', '\u00ff'.repeat(70)];
    for (let round = 0; round < 2; round++) {
      for (const message of messages) {
        expect(hmac(signing, message).toString('hex')).toBe(crypto.createHmac('sha256', signing).update(message).digest('hex'));
        expect(hmacHex(signing, message)).toBe(crypto.createHmac('sha256', signing).update(message).digest('hex'));
      }
    }
    // Keys that are no signing key of the cache (another length too), and bytes: node:crypto's own HMAC.
    const other = crypto.randomBytes(80);
    expect(hmac(other, 'abc').equals(crypto.createHmac('sha256', other).update('abc').digest())).toBe(true);
    expect(hmac(signing, Buffer.from('abc')).equals(crypto.createHmac('sha256', signing).update('abc').digest())).toBe(true);
    expect(hmacHex(other, 'abc')).toBe(crypto.createHmac('sha256', other).update('abc').digest('hex'));
  });

  it('compares signatures as hex of either case, and nothing else', () => {
    const expected = hmacHex(signingKey(AKID, SECRET, '20130524', 'us-east-1', 's3'), 'x');
    expect(signaturesEqual(expected, expected)).toBe(true);
    expect(signaturesEqual(expected.toUpperCase(), expected)).toBe(true);
    expect(signaturesEqual(flip(expected), expected)).toBe(false);
    expect(signaturesEqual(expected.slice(1), expected)).toBe(false);
    expect(signaturesEqual(`${expected.slice(0, 63)}g`, expected)).toBe(false);
    expect(signaturesEqual(`${expected.slice(0, 63)}\u0130`, expected)).toBe(false);
  });
});
