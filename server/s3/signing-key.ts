// SigV4's signing key (an HMAC-SHA256 chain over the date, region, service and "aws4_request",
// keyed by "AWS4" + the secret) and the comparison of signatures. A key serves every request of
// its access key on that day: it is remembered, in a bounded LRU, per access key, date, region
// and service, and only for keys the keys file holds (an unknown key is refused before this).

import crypto from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { S3_SIGNING_KEYS_CACHED } from '../../engine/base/limits.js';

/**
 * A signing key's HMAC pads (RFC 2104: the key, zero-filled to SHA-256's 64-byte block, XOR 0x36
 * and 0x5c): the inner one as latin1 text (the message is appended to it), the outer one with
 * room for the inner digest after it (filled and hashed in one synchronous call: never shared).
 */
interface Pads {
  inner: string;
  outer: Buffer;
}

/** The pads of the signing keys `signingKey` answers: one per remembered key, made once. */
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
 * HMAC-SHA256. With a signing key of `signingKey` and an ASCII message (every string SigV4 signs
 * is: its algorithm, times, scope and hex digests), HMAC is computed from the key's pads with two
 * one-shot hashes: about half the CPU of a `crypto.createHmac` per call (an object and its
 * key set up each time), which every signed request and aws-chunked chunk pays.
 */
export function hmac(key: crypto.BinaryLike, data: string | Uint8Array): Buffer {
  const pads = padsFor(key, data);
  if (pads === undefined) return crypto.createHmac('sha256', key).update(data).digest();
  return Buffer.from(hmacFromPads(pads, data as string), 'hex');
}

/** hmac as lower-case hex: what a signature is compared as (no digest Buffer made: each costs ~0.6 us). */
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

/** The signing key, derived afresh (what the cache holds). */
export function deriveSigningKey(secret: string, date: string, region: string, service: string): Buffer {
  return hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
}

interface Remembered {
  /** The secret the key was derived from: a reloaded keys file may change an access key's secret. */
  secret: string;
  key: Buffer;
}

const keys = new LRUCache<string, Remembered>({ max: S3_SIGNING_KEYS_CACHED });
let last: (Remembered & { id: string }) | undefined;

/** The signing key of `accessKeyId` (whose secret is `secret`) for a date (YYYYMMDD), region and service. */
export function signingKey(accessKeyId: string, secret: string, date: string, region: string, service: string): Buffer {
  const id = `${accessKeyId}/${date}/${region}/${service}`;
  // The key asked for last (a run of one key's requests) without the LRU's bookkeeping.
  if (last !== undefined && last.id === id && last.secret === secret) return last.key;
  const known = keys.get(id);
  if (known && known.secret === secret) {
    last = { id, ...known };
    return known.key;
  }
  const key = deriveSigningKey(secret, date, region, service);
  padsOfKey.set(key, padsOf(key));
  keys.set(id, { secret, key });
  last = { id, secret, key };
  return key;
}

const HEX_SIGNATURE = /^[0-9a-fA-F]{64}$/;

/** Whether a signature the client sent (hex, either case) is `expected` (lower-case hex), compared in constant time. */
export function signaturesEqual(provided: string, expected: string): boolean {
  // No pattern test: once lower-cased, a character that is no hex digit differs from every one.
  if (expected.length !== provided.length) return false;
  const lower = provided.toLowerCase();
  if (lower.length !== expected.length) return false;
  let diff = 0;
  for (let i = 0; i < lower.length; i++) diff |= lower.charCodeAt(i) ^ expected.charCodeAt(i);
  return diff === 0;
}

export const isHexSignature = (text: string): boolean => HEX_SIGNATURE.test(text);
