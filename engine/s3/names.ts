// Bucket names and object keys as the S3 index checks, stores and orders them.
//
// Keys are stored in the units store's ordered-binary keys (LMDB; bytea of the same bytes on
// PostgreSQL), and S3 lists keys in UTF-8 binary order. ordered-binary writes a string as its
// UTF-8 bytes except that it escapes characters U+0000-U+0004 (only in strings under 64
// characters), prefixes a string whose first character is below U+001C, and separates array
// elements with a 0 byte: so control characters would break both the order and the separator.
// `encodeKey` therefore writes U+0000-U+001F as two characters, U+001F then U+0020 + c, and
// every other character as itself. The result has no character below U+001F, so ordered-binary
// writes it as plain UTF-8; the map is order-preserving and prefix-preserving (a key's prefix
// encodes to a prefix of its encoding), which listing relies on to seek past common prefixes.

import { S3_KEY_MAX_BYTES, S3_KEY_MAX_CONTROL_CHARS } from '../base/limits.js';
import { s3Refusal } from './errors.js';

/** The index's stored form of an object key (see the header). */
export function encodeKey(key: string): string {
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u001f]/.test(key) ? key.replace(/[\u0000-\u001f]/g, (c) => `\u001f${String.fromCharCode(0x20 + c.charCodeAt(0))}`) : key;
}

/** The object key of a stored form. */
export function decodeKey(stored: string): string {
  return stored.includes('\u001f') ? stored.replace(/\u001f(.)/gs, (_, c: string) => String.fromCharCode(c.charCodeAt(0) - 0x20)) : stored;
}

/** Above every stored key: 257 times U+10FFFF outsorts any key of at most 1024 UTF-8 bytes (a range's exclusive end). */
export const KEY_HIGH = '\u{10ffff}'.repeat(257);

/** The least string above every string that starts with `s` (undefined: none, `s` is all U+10FFFF): where a seek past a prefix lands. */
export function successor(s: string): string | undefined {
  const points = [...s];
  while (points.length > 0) {
    const cp = points.pop()!.codePointAt(0)!;
    if (cp < 0x10ffff) return points.join('') + String.fromCodePoint(cp + 1 === 0xd800 ? 0xe000 : cp + 1);
  }
  return undefined;
}

/** The least stored key above `stored` (the start of what follows it: no stored character is below U+001F). */
export const afterStored = (stored: string) => `${stored}\u001f`;

/** S3's order of keys: their UTF-8 bytes (JavaScript compares UTF-16 units, which differs above U+FFFF). */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The common prefix `key` rolls up into (prefix, then up to and including the first delimiter after it), if any. */
export function groupOf(key: string, prefix: string, delimiter: string | undefined): string | undefined {
  if (!delimiter) return undefined;
  const at = key.indexOf(delimiter, prefix.length);
  return at < 0 ? undefined : key.slice(0, at + delimiter.length);
}

/** An object key S3 accepts: 1 to 1024 UTF-8 bytes (and, ours, at most 512 control characters). */
export function checkKey(key: string): void {
  if (key.length === 0) throw s3Refusal('InvalidArgument', 'An object key must not be empty');
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > S3_KEY_MAX_BYTES) throw s3Refusal('KeyTooLongError', `Your key is too long: ${bytes} bytes of UTF-8, at most ${S3_KEY_MAX_BYTES}`);
  // eslint-disable-next-line no-control-regex
  const controls = key.match(/[\u0000-\u001f]/g)?.length ?? 0;
  if (controls > S3_KEY_MAX_CONTROL_CHARS) throw s3Refusal('KeyTooLongError', `Your key has ${controls} control characters, at most ${S3_KEY_MAX_CONTROL_CHARS}`);
}

const RESERVED_PREFIXES = ['xn--', 'sthree-', 'amzn-s3-demo-'];
const RESERVED_SUFFIXES = ['-s3alias', '--ol-s3', '.mrap', '--x-s3', '--table-s3'];

/**
 * S3's rules for general purpose bucket names: 3-63 characters of lowercase letters, digits,
 * dots and hyphens, beginning and ending with a letter or digit, no two adjacent dots, not an
 * IPv4 address, none of the reserved prefixes and suffixes. Else 400 InvalidBucketName.
 */
export function checkBucketName(name: string): void {
  const refuse = (why: string) => {
    throw s3Refusal('InvalidBucketName', `The specified bucket is not valid: ${why}`);
  };
  if (name.length < 3 || name.length > 63) refuse('a bucket name has 3 to 63 characters');
  if (!/^[a-z0-9][a-z0-9.-]*[a-z0-9]$/.test(name)) refuse('lowercase letters, digits, dots and hyphens only, beginning and ending with a letter or digit');
  if (name.includes('..')) refuse('no two adjacent dots');
  if (/^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)) refuse('not formatted as an IP address');
  if (RESERVED_PREFIXES.some((p) => name.startsWith(p))) refuse(`the prefixes ${RESERVED_PREFIXES.join(', ')} are reserved`);
  if (RESERVED_SUFFIXES.some((s) => name.endsWith(s))) refuse(`the suffixes ${RESERVED_SUFFIXES.join(', ')} are reserved`);
}
