// SigV4's canonical forms as S3 uses them (AWS "Signature Calculations for the Authorization
// Header"): the path encoded once and not normalized, the query sorted, the signed headers
// trimmed, and the string to sign. Pure functions of the request; server/s3/sigv4.ts verifies.

import { S3_MAX_QUERY_PARAMS } from '../../engine/base/limits.js';
import { S3Error } from './s3-error.js';

/**
 * AWS's URI encoding: every byte of the UTF-8 form but the unreserved `A-Za-z0-9-._~` as `%XX`
 * (upper-case hex), `/` kept when `keepSlash` (a path). encodeURIComponent leaves `!'()*` alone,
 * which AWS encodes.
 */
export function uriEncode(text: string, keepSlash: boolean): string {
  let out = encodeURIComponent(text);
  if (/[!'()*]/.test(out)) out = out.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return keepSlash ? out.replace(/%2F/g, '/') : out;
}

function percentDecode(text: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new S3Error('InvalidArgument', `The ${what} is not valid percent-encoded UTF-8`);
  }
}

const PLAIN_PATH = /^[A-Za-z0-9\-._~/]*$/;

/**
 * The canonical URI of a path as sent: decoded, then encoded again the one way AWS signs it, so a
 * client that sent `$` where another sent `%24` signs the same request. S3 neither normalizes
 * (`.`, `..`, `//` stay) nor encodes twice.
 */
export function canonicalPath(rawPath: string): string {
  if (rawPath === '') return '/';
  // Unreserved characters and slashes only (most paths): decoding and encoding change nothing.
  if (PLAIN_PATH.test(rawPath)) return rawPath;
  return uriEncode(percentDecode(rawPath, 'request path'), true);
}

/**
 * The query as sent → decoded name/value pairs, in order (`+` is a space, as in every form
 * decoder: the operation and the signature then read the same values). A name without `=` has
 * the value ''. At most S3_MAX_QUERY_PARAMS.
 */
export function parseQuery(rawQuery: string): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  if (rawQuery === '') return pairs;
  for (const part of rawQuery.split('&')) {
    if (part === '') continue;
    if (pairs.length === S3_MAX_QUERY_PARAMS) throw new S3Error('InvalidArgument', `A request carries at most ${S3_MAX_QUERY_PARAMS} query parameters`);
    const eq = part.indexOf('=');
    const name = eq < 0 ? part : part.slice(0, eq);
    const value = eq < 0 ? '' : part.slice(eq + 1);
    pairs.push([percentDecode(name.replace(/\+/g, ' '), 'query'), percentDecode(value.replace(/\+/g, ' '), 'query')]);
  }
  return pairs;
}

/** The canonical query string: names and values encoded, sorted by name then value; `omit` (X-Amz-Signature) left out. */
export function canonicalQuery(pairs: ReadonlyArray<readonly [string, string]>, omit?: string): string {
  const encoded: Array<[string, string]> = [];
  for (const [name, value] of pairs) if (name !== omit) encoded.push([uriEncode(name, false), uriEncode(value, false)]);
  // Encoded text is ASCII: comparing UTF-16 units is comparing bytes, as AWS sorts.
  encoded.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return encoded.map(([n, v]) => `${n}=${v}`).join('&');
}

/** A header value as signed: trimmed, every run of white space one space. */
export const canonicalHeaderValue = (value: string): string => value.trim().replace(/\s+/g, ' ');

/**
 * The canonical headers block (`name:value\n` per signed header, in the order given: the
 * SignedHeaders list, which the caller checked is sorted and lower-case). `header` answers a
 * header's value, repeated headers joined with `,`. A signed header the request lacks cannot match.
 */
export function canonicalHeaders(signed: readonly string[], header: (name: string) => string | undefined): string {
  let block = '';
  for (const name of signed) {
    const value = header(name);
    if (value === undefined) throw new S3Error('SignatureDoesNotMatch', `The signed header "${name}" is not in the request`);
    block += `${name}:${canonicalHeaderValue(value)}\n`;
  }
  return block;
}

export interface CanonicalParts {
  method: string;
  path: string;
  query: string;
  headers: string;
  signedHeaders: string;
  payloadHash: string;
}

export const canonicalRequest = (p: CanonicalParts): string =>
  `${p.method}\n${p.path}\n${p.query}\n${p.headers}\n${p.signedHeaders}\n${p.payloadHash}`;
