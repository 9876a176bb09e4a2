// SigV4's primitives (AWS "Signature Version 4 signing process"), shared by the S3 listener, which
// verifies requests (server/s3/sigv4.ts), and the S3 block store, which signs its PUTs
// (engine/store/s3/put-signer.ts): the algorithm's name, the credential scope, the string to
// sign, HMAC-SHA256 and the signing key derived from a secret.

import crypto from 'node:crypto';

export const ALGORITHM = 'AWS4-HMAC-SHA256';
/** SHA-256 of no bytes: the payload hash of a request without a body. */
export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

export const sha256Hex = (data: string | Uint8Array): string => crypto.hash('sha256', data, 'hex');

/** `20130524/us-east-1/s3/aws4_request` */
export const credentialScope = (date: string, region: string, service: string): string => `${date}/${region}/${service}/aws4_request`;

/** `dateTime` is ISO 8601 basic (`20130524T000000Z`); `canonical` the canonical request. */
export const stringToSign = (dateTime: string, scope: string, canonical: string): string =>
  `${ALGORITHM}\n${dateTime}\n${scope}\n${sha256Hex(canonical)}`;

/**
 * A signing key's HMAC pads (RFC 2104: the key, zero-filled to SHA-256's 64-byte block, XOR 0x36
 * and 0x5c): the inner one as latin1 text (the message is appended to it), the outer one with
 * room for the inner digest after it (filled and hashed in one synchronous call: never shared).
 */
interface Pads {
  inner: string;
  outer: Buffer;
}

/** The pads of the keys `deriveSigningKey` answered: made once per key, gone with it. */
const padsOfKey = new WeakMap<Buffer, Pads>();

function padsOf(key: Buffer): Pads {
  const inner = Buffer.alloc(64, 0x36);
  const outer = Buffer.alloc(64 + 32, 0x5c);
  for (let i = 0; i < key.length; i++) {
    inner[i]! ^= key[i]!;
    outer[i]! ^= key[i]!;
  }
  return { inner: inner.toString('latin1'), outer };
}

/**
 * HMAC-SHA256. With a key from `deriveSigningKey` and an ASCII message (every string SigV4 signs
 * is: its algorithm, times, scope and hex digests), HMAC is computed from the key's pads with two
 * one-shot hashes: about half the CPU of a `crypto.createHmac` per call (an object and its key
 * set up each time), which every signed request and aws-chunked chunk pays.
 */
export function hmac(key: crypto.BinaryLike, data: string | Uint8Array): Buffer {
  const pads = padsFor(key, data);
  if (pads === undefined) return crypto.createHmac('sha256', key).update(data).digest();
  return Buffer.from(hmacFromPads(pads, data as string), 'hex');
}

/** hmac as lower-case hex: what a signature is sent and compared as (no digest Buffer made). */
export function hmacHex(key: crypto.BinaryLike, data: string | Uint8Array): string {
  const pads = padsFor(key, data);
  if (pads === undefined) return crypto.createHmac('sha256', key).update(data).digest('hex');
  return hmacFromPads(pads, data as string);
}

const padsFor = (key: crypto.BinaryLike, data: string | Uint8Array): Pads | undefined => {
  const pads = typeof data === 'string' && Buffer.isBuffer(key) ? padsOfKey.get(key) : undefined;
  return pads !== undefined && Buffer.byteLength(data as string, 'utf8') === data.length ? pads : undefined;
};

function hmacFromPads(pads: Pads, ascii: string): string {
  // The inner digest as hex, written into the outer pad's tail; both digests as hex strings.
  pads.outer.write(crypto.hash('sha256', Buffer.from(pads.inner + ascii, 'latin1'), 'hex'), 64, 'hex');
  return crypto.hash('sha256', pads.outer, 'hex');
}

/**
 * The signing key of a secret for a date (YYYYMMDD), region and service: an HMAC chain over them
 * and "aws4_request", keyed by "AWS4" + the secret. Derived afresh; callers keep it for the day.
 */
export function deriveSigningKey(secret: string, date: string, region: string, service: string): Buffer {
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
  padsOfKey.set(key, padsOf(key));
  return key;
}
