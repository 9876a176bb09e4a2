// SigV4's signing key (an HMAC-SHA256 chain over the date, region, service and "aws4_request",
// keyed by "AWS4" + the secret) and the comparison of signatures. A key serves every request of
// its access key on that day: it is remembered, in a bounded LRU, per access key, date, region
// and service, and only for keys the keys file holds (an unknown key is refused before this).

import { LRUCache } from 'lru-cache';
import { S3_SIGNING_KEYS_CACHED } from '../../engine/base/limits.js';
import { deriveSigningKey } from '../../engine/base/sigv4-primitives.js';

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
