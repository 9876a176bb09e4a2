// An S3 request's head, read once in the uWS callback (the request does not outlive it): method,
// path and query as sent, headers by lower-case name, and what the request names (a bucket, a key,
// path style or virtual-hosted when SVC_S3_API_DOMAIN is set); plus the parsing of the headers
// every object operation reads (user metadata, conditions).

import type { HttpRequest } from 'uWebSockets.js';
import type { WriteConditions } from '../../engine/s3/objects.js';
import type { ObjectMeta } from '../../engine/s3/records.js';
import { S3Error } from './s3-error.js';
import { parseQuery } from './sigv4-canonical.js';
import type { SignedRequest } from './sigv4.js';
import { storedContentEncoding } from './aws-chunked.js';

export interface S3Head extends SignedRequest {
  /** GET, HEAD, PUT, … as sent. */
  method: string;
  /** The bucket the request names ('' : the service). */
  bucket: string;
  /** The object key, decoded ('' : none). */
  key: string;
  /** The path a refusal names (S3's Resource). */
  resource: string;
}

/** Copies what the handler reads of a uWS request; names the bucket and key. */
export function readHead(req: HttpRequest, domain: string): S3Head {
  const headers = new Map<string, string>();
  req.forEach((name, value) => {
    const known = headers.get(name);
    headers.set(name, known === undefined ? value : `${known},${value}`);
  });
  const rawPath = req.getUrl();
  const rawQuery = req.getQuery() ?? '';
  const head: S3Head = {
    method: req.getCaseSensitiveMethod().toUpperCase(),
    rawPath,
    rawQuery,
    header: (name) => headers.get(name),
    headerNames: () => headers.keys(),
    bucket: '',
    key: '',
    resource: safeDecode(rawPath) ?? rawPath,
  };
  const host = (headers.get('host') ?? '').replace(/:\d+$/, '').toLowerCase();
  const path = rawPath.startsWith('/') ? rawPath.slice(1) : rawPath;
  if (domain !== '' && host.endsWith(`.${domain}`)) {
    head.bucket = host.slice(0, -domain.length - 1);
    head.key = decodePath(path);
    return head;
  }
  const slash = path.indexOf('/');
  head.bucket = decodePath(slash < 0 ? path : path.slice(0, slash));
  head.key = slash < 0 ? '' : decodePath(path.slice(slash + 1));
  return head;
}

function safeDecode(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

function decodePath(text: string): string {
  const decoded = safeDecode(text);
  if (decoded === undefined) throw new S3Error('InvalidArgument', 'The path is not valid percent-encoded UTF-8');
  return decoded;
}

/** The request's query, decoded (the signature covered the same values). */
export const queryOf = (head: S3Head): Map<string, string> => new Map(parseQuery(head.rawQuery));

/** The object metadata a PutObject (or CopyObject with REPLACE) states in its headers. */
export function metaOf(head: S3Head): ObjectMeta {
  const userMetadata: Record<string, string> = {};
  for (const name of head.headerNames()) {
    if (name.startsWith('x-amz-meta-')) userMetadata[name.slice('x-amz-meta-'.length)] = head.header(name)!;
  }
  const meta: ObjectMeta = { userMetadata };
  const set = (field: Exclude<keyof ObjectMeta, 'userMetadata'>, value: string | undefined) => {
    if (value !== undefined && value !== '') meta[field] = value;
  };
  set('contentType', head.header('content-type'));
  set('contentEncoding', storedContentEncoding(head.header('content-encoding')));
  set('contentDisposition', head.header('content-disposition'));
  set('cacheControl', head.header('cache-control'));
  set('expires', head.header('expires'));
  return meta;
}

/** A PutObject's conditional write headers. */
export function writeConditionsOf(head: S3Head): WriteConditions | undefined {
  const ifNoneMatch = head.header('if-none-match');
  const ifMatch = head.header('if-match');
  if (ifNoneMatch === undefined && ifMatch === undefined) return undefined;
  if (ifNoneMatch !== undefined && ifNoneMatch.trim() !== '*') throw new S3Error('NotImplemented', 'If-None-Match on a write accepts only *');
  return { ...(ifNoneMatch !== undefined ? { ifNoneMatch: '*' as const } : {}), ...(ifMatch !== undefined ? { ifMatch: ifMatch.trim() } : {}) };
}

/** Content-Length, when sent: decimal digits. */
export function contentLengthOf(head: S3Head): number | undefined {
  const raw = head.header('content-length');
  if (raw === undefined) return undefined;
  if (!/^\d{1,16}$/.test(raw)) throw new S3Error('InvalidArgument', 'Content-Length must be a number of bytes');
  return Number(raw);
}
