// SigV4 verification of an S3 request (decisions §5 "S3-compatible API"): the Authorization header
// form and the presigned query form (X-Amz-Expires). It answers the key that signed the request
// and how its body is to be checked: a SHA-256 the body must have, none (UNSIGNED-PAYLOAD), or an
// `aws-chunked` body whose chunks are signed from the seed signature, or unsigned with a trailing
// checksum (server/s3/aws-chunked.ts decodes and verifies those while they stream).
//
// Refusals, as S3 words them: an unknown key is 403 InvalidAccessKeyId, a wrong signature 403
// SignatureDoesNotMatch, a request dated more than 15 minutes from the server's clock 403
// RequestTimeTooSkewed, an expired presigned URL 403 AccessDenied; a malformed header or query is
// 400 AuthorizationHeaderMalformed / AuthorizationQueryParametersError.

import { S3_AUTHORIZATIONS_CACHED, S3_MAX_CLOCK_SKEW_MS, S3_MAX_SIGNED_HEADERS, S3_PRESIGN_MAX_EXPIRES_S } from '../../engine/base/limits.js';
import type { S3Key, S3KeyLookup } from '../../engine/s3/keys.js';
import { ALGORITHM, credentialScope, hmacHex, stringToSign } from '../../engine/base/sigv4-primitives.js';
import { S3Error } from './s3-error.js';
import { canonicalHeaders, canonicalPath, canonicalQuery, canonicalRequest, parseQuery } from './sigv4-canonical.js';
import { isHexSignature, signaturesEqual, signingKey } from './signing-key.js';
import { parseChunkedPayload, type Payload } from './sigv4-payload.js';

export type { ChunkSigning, Payload } from './sigv4-payload.js';

export const S3_SERVICE = 's3';

/** What verification reads of a request: method, path and query as sent, and its headers. */
export interface SignedRequest {
  method: string;
  /** The path as sent (percent-encoded), without the query. */
  rawPath: string;
  /** The query as sent, without `?` ('' : none). */
  rawQuery: string;
  /** A header's value by lower-case name, repeated headers joined with `,`. */
  header(name: string): string | undefined;
  /** The lower-case names of the request's headers. */
  headerNames(): Iterable<string>;
}

export interface VerifyOptions {
  keys: S3KeyLookup;
  /** SVC_S3_API_REGION: the only region a credential scope may name. */
  region: string;
  /** The server's clock (ms since the epoch). */
  now?: number;
}

export interface Verified {
  key: S3Key;
  /** The query, decoded (what the operation reads: the same values the signature covered). */
  query: Array<[string, string]>;
  presigned: boolean;
  payload: Payload;
}

interface Credential {
  accessKeyId: string;
  date: string;
  region: string;
  service: string;
}

/** Whether the request carries SigV4 credentials at all (header or query). */
export function isSigned(req: SignedRequest): boolean {
  return req.header('authorization') !== undefined || /(^|&)X-Amz-Signature=/.test(req.rawQuery);
}

/** Verifies a request signed in its Authorization header or its query; throws S3Error. */
export function verifyRequest(req: SignedRequest, options: VerifyOptions): Verified {
  const query = parseQuery(req.rawQuery);
  const authorization = req.header('authorization');
  const presigned = query.some(([name]) => name === 'X-Amz-Signature' || name === 'X-Amz-Credential');
  if (authorization !== undefined && presigned) throw new S3Error('InvalidArgument', 'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified');
  if (presigned) return verifyPresigned(req, query, options);
  if (authorization === undefined) throw new S3Error('AccessDenied', 'Access Denied: the request is not signed');
  return verifyHeader(req, authorization, query, options);
}

// ---- the Authorization header ----

function verifyHeader(req: SignedRequest, authorization: string, query: Array<[string, string]>, options: VerifyOptions): Verified {
  const bad = (why: string) => new S3Error('AuthorizationHeaderMalformed', `The authorization header is malformed; ${why}`);
  const auth = parsedAuthorization(authorization, bad);
  const dateTime = requestDateTime(req);
  checkScope(auth.credential, dateTime, options.region, bad);
  const key = findKey(options.keys, auth.credential.accessKeyId);
  const now = options.now ?? Date.now();
  const skew = Math.abs(now - parseDateTime(dateTime));
  if (skew > S3_MAX_CLOCK_SKEW_MS) {
    throw new S3Error('RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.', {
      RequestTime: dateTime,
      ServerTime: new Date(now).toISOString(),
      MaxAllowedSkewMilliseconds: String(S3_MAX_CLOCK_SKEW_MS),
    });
  }
  const payloadHash = req.header('x-amz-content-sha256');
  if (payloadHash === undefined) throw new S3Error('InvalidRequest', 'Missing required header for this request: x-amz-content-sha256');
  checkSignedHeaders(req, auth.signedHeaders, false);
  const scope = credentialScope(auth.credential.date, auth.credential.region, S3_SERVICE);
  const signing = signingKey(key.accessKeyId, key.secretAccessKey, auth.credential.date, auth.credential.region, S3_SERVICE);
  const canonical = canonicalRequest({
    method: req.method,
    path: canonicalPath(req.rawPath),
    query: canonicalQuery(query),
    headers: canonicalHeaders(auth.signedHeaders, (name) => req.header(name)),
    signedHeaders: auth.signedList,
    payloadHash: payloadHash.trim(),
  });
  checkSignature(key, signing, dateTime, scope, canonical, auth.signature);
  rememberAuthorization(authorization, auth);
  const payload = payloadOf(payloadHash.trim(), req, { key: signing, dateTime, scope, seed: auth.signature.toLowerCase() });
  return { key, query, presigned: false, payload };
}

interface ParsedAuthorization {
  credential: Credential;
  signedHeaders: string[];
  /** SignedHeaders as sent (`a;b`): the canonical request's line. */
  signedList: string;
  signature: string;
}

const SIGNATURE_FIELD = 'Signature=';
/** The longest Authorization header (before its signature) remembered parsed: SDKs send ~150-250 characters. */
const REMEMBERED_AUTHORIZATION_CHARS = 1024;
/**
 * Authorization headers of verified requests, parsed, by all they say before their signature (a
 * client's requests of one day repeat it); only those whose signature is the last field.
 */
const parsedBefore = new Map<string, Omit<ParsedAuthorization, 'signature'>>();

/** How many Authorization headers are remembered parsed (tests: at most S3_AUTHORIZATIONS_CACHED). */
export const rememberedAuthorizations = (): number => parsedBefore.size;

/** parseAuthorization, what comes before the signature read once per client and day (`remembered`: so read). */
function parsedAuthorization(value: string, bad: (why: string) => S3Error): ParsedAuthorization & { remembered?: true } {
  const at = value.lastIndexOf(SIGNATURE_FIELD);
  if (at > 0 && at <= REMEMBERED_AUTHORIZATION_CHARS) {
    const known = parsedBefore.get(value.slice(0, at));
    const signature = value.slice(at + SIGNATURE_FIELD.length);
    // The same text with another 64-digit signature parses the same way.
    if (known && isHexSignature(signature)) return { ...known, signature, remembered: true };
  }
  return parseAuthorization(value, bad);
}

/** Remembers a verified request's Authorization header parsed (parsedAuthorization reads it). */
function rememberAuthorization(value: string, parsed: ParsedAuthorization & { remembered?: true }): void {
  if (parsed.remembered) return;
  const at = value.length - parsed.signature.length - SIGNATURE_FIELD.length;
  if (at <= 0 || at > REMEMBERED_AUTHORIZATION_CHARS || !value.endsWith(SIGNATURE_FIELD + parsed.signature)) return;
  if (parsedBefore.size >= S3_AUTHORIZATIONS_CACHED) parsedBefore.clear();
  parsedBefore.set(value.slice(0, at), { credential: parsed.credential, signedHeaders: parsed.signedHeaders, signedList: parsed.signedList });
}

/** `AWS4-HMAC-SHA256 Credential=<id>/<date>/<region>/s3/aws4_request, SignedHeaders=a;b, Signature=<hex>` */
function parseAuthorization(value: string, bad: (why: string) => S3Error): ParsedAuthorization {
  const space = value.indexOf(' ');
  const algorithm = space < 0 ? value : value.slice(0, space);
  if (algorithm !== ALGORITHM) {
    throw new S3Error('InvalidRequest', 'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.');
  }
  const fields = new Map<string, string>();
  for (const part of value.slice(space + 1).split(',')) {
    const item = part.trim();
    const eq = item.indexOf('=');
    if (eq < 0) throw bad(`"${item}" is not name=value`);
    const name = item.slice(0, eq);
    if (fields.has(name)) throw bad(`${name} is given twice`);
    fields.set(name, item.slice(eq + 1));
  }
  const credential = fields.get('Credential');
  const signed = fields.get('SignedHeaders');
  const signature = fields.get('Signature');
  if (credential === undefined || signed === undefined || signature === undefined || fields.size !== 3) {
    throw bad('it must hold Credential, SignedHeaders and Signature');
  }
  if (!isHexSignature(signature)) throw bad('the Signature is not 64 hexadecimal digits');
  return { credential: parseCredential(credential, bad), signedHeaders: parseSignedHeaders(signed, bad), signedList: signed, signature };
}

function parseCredential(value: string, bad: (why: string) => S3Error): Credential {
  const parts = value.split('/');
  if (parts.length !== 5 || parts[4] !== 'aws4_request') throw bad(`the Credential "${value}" is not <access key id>/<date>/<region>/s3/aws4_request`);
  const [accessKeyId, date, region, service] = parts as [string, string, string, string];
  if (accessKeyId === '' || !/^\d{8}$/.test(date)) throw bad(`the Credential "${value}" is not <access key id>/<YYYYMMDD>/<region>/s3/aws4_request`);
  return { accessKeyId, date, region, service };
}

function parseSignedHeaders(value: string, bad: (why: string) => S3Error): string[] {
  const names = value.split(';');
  if (names.length > S3_MAX_SIGNED_HEADERS) throw bad(`SignedHeaders names more than ${S3_MAX_SIGNED_HEADERS} headers`);
  for (let i = 0; i < names.length; i++) {
    if (!/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(names[i]!)) throw bad(`SignedHeaders: "${names[i]}" is not a lower-case header name`);
    if (i > 0 && names[i - 1]! >= names[i]!) throw bad('SignedHeaders must be sorted and name each header once');
  }
  if (!names.includes('host')) throw bad('SignedHeaders must include host');
  return names;
}

function checkScope(credential: Credential, dateTime: string, region: string, bad: (why: string) => S3Error): void {
  if (credential.date !== dateTime.slice(0, 8)) throw bad(`the credential date ${credential.date} is not the date of the request (${dateTime.slice(0, 8)})`);
  if (credential.region !== region) {
    const err = bad(`the region '${credential.region}' is wrong; expecting '${region}'`);
    throw new S3Error(err.code, err.message, { Region: region });
  }
  if (credential.service !== S3_SERVICE) throw bad(`the service '${credential.service}' is wrong; expecting 's3'`);
}

/** The request's time in ISO 8601 basic form: `x-amz-date`, else the `Date` header. */
function requestDateTime(req: SignedRequest): string {
  const amz = req.header('x-amz-date');
  if (amz !== undefined) {
    if (!isDateTime(amz)) throw new S3Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
    return amz;
  }
  const date = req.header('date');
  const ms = date === undefined ? NaN : Date.parse(date);
  if (!Number.isFinite(ms)) throw new S3Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
  return new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

const DATE_TIME = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;

function isDateTime(text: string): boolean {
  return DATE_TIME.test(text) && Number.isFinite(parseDateTime(text));
}

/** The last time parsed (a request reads its own twice; requests of one second share it). */
let lastDateTime = { text: '', ms: NaN };

/** `20130524T000000Z` → ms since the epoch (NaN for a date that does not exist). */
function parseDateTime(text: string): number {
  if (text === lastDateTime.text) return lastDateTime.ms;
  const m = DATE_TIME.exec(text);
  if (!m) return NaN;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  const ms = Date.UTC(y, mo - 1, d, h, mi, s);
  const back = new Date(ms);
  const parsed = back.getUTCMonth() === mo - 1 && back.getUTCDate() === d && h < 24 && mi < 60 && s < 60 ? ms : NaN;
  lastDateTime = { text, ms: parsed };
  return parsed;
}

// ---- shared ----

function findKey(keys: S3KeyLookup, accessKeyId: string): S3Key {
  const key = keys.find(accessKeyId);
  if (!key) throw new S3Error('InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.', { AWSAccessKeyId: accessKeyId });
  return key;
}

/**
 * Every `x-amz-*` header of the request must be signed (S3: otherwise a presigned URL's holder
 * could add `x-amz-copy-source` or `x-amz-meta-*` of its own). A presigned request may carry an
 * unsigned `x-amz-content-sha256`: its payload is UNSIGNED-PAYLOAD whatever it says.
 */
function checkSignedHeaders(req: SignedRequest, signed: readonly string[], presigned: boolean): void {
  const unsigned: string[] = [];
  for (const name of req.headerNames()) {
    if (!name.startsWith('x-amz-') || signed.includes(name)) continue;
    if (presigned && name === 'x-amz-content-sha256') continue;
    unsigned.push(name);
  }
  if (unsigned.length > 0) throw new S3Error('AccessDenied', 'There were headers present in the request which were not signed', { HeadersNotSigned: unsigned.join(', ') });
}

function checkSignature(key: S3Key, signing: Buffer, dateTime: string, scope: string, canonical: string, provided: string): void {
  const toSign = stringToSign(dateTime, scope, canonical);
  if (!signaturesEqual(provided, hmacHex(signing, toSign))) {
    throw new S3Error('SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided. Check your key and signing method.', {
      AWSAccessKeyId: key.accessKeyId,
      StringToSign: toSign,
      SignatureProvided: provided,
      CanonicalRequest: canonical,
    });
  }
}

/** How the body is checked, from `x-amz-content-sha256` (header form) or X-Amz-Content-Sha256 (query form). */
function payloadOf(hash: string, req: SignedRequest, seed: { key: Buffer; dateTime: string; scope: string; seed: string }): Payload {
  if (/^[0-9a-fA-F]{64}$/.test(hash)) return { kind: 'sha256', sha256: hash.toLowerCase() };
  if (hash === 'UNSIGNED-PAYLOAD') return { kind: 'unsigned' };
  return parseChunkedPayload(hash, req, seed);
}

// ---- the presigned query ----

const QUERY_AUTH = ['X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Date', 'X-Amz-Expires', 'X-Amz-SignedHeaders', 'X-Amz-Signature'] as const;

function verifyPresigned(req: SignedRequest, query: Array<[string, string]>, options: VerifyOptions): Verified {
  const bad = (why: string) => new S3Error('AuthorizationQueryParametersError', why);
  const params = new Map<string, string>();
  for (const [name, value] of query) {
    if (!name.startsWith('X-Amz-')) continue;
    if (params.has(name)) throw bad(`${name} is given twice`);
    params.set(name, value);
  }
  if (QUERY_AUTH.some((name) => !params.has(name))) {
    throw bad('Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.');
  }
  if (params.has('X-Amz-Security-Token')) throw new S3Error('InvalidToken', 'The provided token is malformed or otherwise invalid (this service issues no session tokens).');
  if (params.get('X-Amz-Algorithm') !== ALGORITHM) throw bad('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"');
  const dateTime = params.get('X-Amz-Date')!;
  if (!isDateTime(dateTime)) throw bad("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"");
  const expiresText = params.get('X-Amz-Expires')!;
  if (!/^\d{1,7}$/.test(expiresText)) throw bad('X-Amz-Expires should be a number of seconds');
  const expires = Number(expiresText);
  if (expires > S3_PRESIGN_MAX_EXPIRES_S) throw bad(`X-Amz-Expires must be less than a week (in seconds) that is ${S3_PRESIGN_MAX_EXPIRES_S}`);
  const signature = params.get('X-Amz-Signature')!;
  if (!isHexSignature(signature)) throw bad('X-Amz-Signature is not 64 hexadecimal digits');
  const credential = parseCredential(params.get('X-Amz-Credential')!, (why) => bad(`Error parsing the X-Amz-Credential parameter; ${why}`));
  checkScope(credential, dateTime, options.region, (why) => bad(`Error parsing the X-Amz-Credential parameter; ${why}`));
  const signedHeaders = parseSignedHeaders(params.get('X-Amz-SignedHeaders')!, (why) => bad(`X-Amz-SignedHeaders: ${why}`));
  const key = findKey(options.keys, credential.accessKeyId);
  const now = options.now ?? Date.now();
  const signedAt = parseDateTime(dateTime);
  if (now < signedAt - S3_MAX_CLOCK_SKEW_MS) throw new S3Error('AccessDenied', 'Request is not valid yet', { ServerTime: new Date(now).toISOString() });
  if (now > signedAt + expires * 1000) {
    throw new S3Error('AccessDenied', 'Request has expired', { 'X-Amz-Expires': expiresText, Expires: new Date(signedAt + expires * 1000).toISOString(), ServerTime: new Date(now).toISOString() });
  }
  checkSignedHeaders(req, signedHeaders, true);
  const payloadHash = params.get('X-Amz-Content-Sha256') ?? 'UNSIGNED-PAYLOAD';
  if (payloadHash !== 'UNSIGNED-PAYLOAD' && !/^[0-9a-fA-F]{64}$/.test(payloadHash)) throw bad('X-Amz-Content-Sha256 must be UNSIGNED-PAYLOAD or a SHA-256 in hex');
  const scope = credentialScope(credential.date, credential.region, S3_SERVICE);
  const signing = signingKey(key.accessKeyId, key.secretAccessKey, credential.date, credential.region, S3_SERVICE);
  const canonical = canonicalRequest({
    method: req.method,
    path: canonicalPath(req.rawPath),
    query: canonicalQuery(query, 'X-Amz-Signature'),
    headers: canonicalHeaders(signedHeaders, (name) => req.header(name)),
    signedHeaders: signedHeaders.join(';'),
    payloadHash,
  });
  checkSignature(key, signing, dateTime, scope, canonical, signature);
  const payload: Payload = payloadHash === 'UNSIGNED-PAYLOAD' ? { kind: 'unsigned' } : { kind: 'sha256', sha256: payloadHash.toLowerCase() };
  return { key, query, presigned: true, payload };
}
