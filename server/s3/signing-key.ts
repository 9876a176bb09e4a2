// SigV4's signing key (an HMAC-SHA256 chain over the date, region, service and "aws4_request",
// keyed by "AWS4" + the secret) and the comparison of signatures. A key serves every request of
// its access key on that day: it is remembered, in a bounded LRU, per access key, date, region
// and service, and only for keys the keys file holds (an unknown key is refused before this).

import crypto from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { S3_SIGNING_KEYS_CACHED } from '../../engine/base/limits.js';

export const hmac = (key: crypto.BinaryLike, data: string | Uint8Array): Buffer => crypto.createHmac('sha256', key).update(data).digest();

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

/** The signing key of `accessKeyId` (whose secret is `secret`) for a date (YYYYMMDD), region and service. */
export function signingKey(accessKeyId: string, secret: string, date: string, region: string, service: string): Buffer {
  const id = `${accessKeyId}/${date}/${region}/${service}`;
  const known = keys.get(id);
  if (known && known.secret === secret) return known.key;
  const key = deriveSigningKey(secret, date, region, service);
  keys.set(id, { secret, key });
  return key;
}

const HEX_SIGNATURE = /^[0-9a-fA-F]{64}$/;

/** Whether a signature the client sent (hex) is `expected` (hex), compared in constant time. */
export function signaturesEqual(provided: string, expected: string): boolean {
  if (!HEX_SIGNATURE.test(provided)) return false;
  return crypto.timingSafeEqual(Buffer.from(provided, 'hex'), Buffer.from(expected, 'hex'));
}

export const isHexSignature = (text: string): boolean => HEX_SIGNATURE.test(text);
