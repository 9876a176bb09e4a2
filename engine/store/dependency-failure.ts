// What went wrong with S3 or PostgreSQL, in words: the AWS SDK's and node-postgres's errors
// (a code, an HTTP status, a socket error, sometimes only `UnknownError`) turned into one phrase
// that names the cause and where. Readiness reports these phrases; at start a cause is a
// StartRefused, which `svc serve` prints as one line (`svc: VARIABLE: cause`) and exits 2.

/** A configuration that cannot work, found while opening the backend: the variable to fix and the cause. */
export class StartRefused extends Error {
  constructor(
    readonly variable: string,
    readonly reason: string,
  ) {
    super(`${variable}: ${reason}`);
    this.name = 'StartRefused';
  }
}

/** Where an S3 request went: for the words. */
export interface S3Target {
  endpoint: string;
  bucket: string;
}

interface SdkError {
  name?: string;
  Code?: string;
  code?: string;
  message?: string;
  errno?: number;
  address?: string;
  port?: number;
  hostname?: string;
  errors?: unknown[];
  cause?: unknown;
  $metadata?: { httpStatusCode?: number };
}

const SOCKET_WORDS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'the connection was reset',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'no route to the host',
  ENETUNREACH: 'the network is unreachable',
  ENOTFOUND: 'the host name is not known',
  EAI_AGAIN: 'the host name could not be resolved now',
  EPIPE: 'the connection was closed',
};

/** A socket-level failure (refused, reset, unknown host...) of `err` or of what it wraps, in words; undefined when it is none. */
function socketFailure(err: unknown): string | undefined {
  for (let e = err as SdkError | undefined, depth = 0; e && depth < 4; e = e.cause as SdkError | undefined, depth++) {
    const inner = Array.isArray(e.errors) ? (e.errors[0] as SdkError | undefined) : undefined;
    const code = e.code ?? inner?.code;
    if (code && SOCKET_WORDS[code]) return SOCKET_WORDS[code];
  }
  return undefined;
}

/** host:port of an endpoint URL (the AWS default when empty). */
function hostOf(endpoint: string, fallback: string): string {
  if (!endpoint) return fallback;
  try {
    const url = new URL(endpoint);
    return url.port ? `${url.hostname}:${url.port}` : url.hostname;
  } catch {
    return endpoint;
  }
}

const GENERIC_NAMES = new Set(['UnknownError', 'Unknown', 'Error', 'NotFound', 'Forbidden', 'BadRequest', 'MovedPermanently', 'S3ServiceException']);

const where = (t: S3Target) => t.endpoint || 'the AWS default endpoint';

/**
 * An S3 failure of `operation` (HeadBucket, PutObject...) on `target`: the variable it points at
 * and the cause in words. Never the SDK's `UnknownError`: a HEAD answer has no body, so its
 * status alone says what happened.
 */
export function describeS3Failure(err: unknown, operation: string, target: S3Target): { variable: string; cause: string } {
  const e = (err ?? {}) as SdkError;
  const socket = socketFailure(err);
  if (socket) return { variable: 'SVC_S3_ENDPOINT', cause: `cannot connect to ${hostOf(target.endpoint, 'the AWS S3 endpoint')}: ${socket}` };
  if (e.name === 'CredentialsProviderError') {
    return { variable: 'AWS_ACCESS_KEY_ID', cause: `no S3 credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an AWS profile): ${e.message}` };
  }
  const status = e.$metadata?.httpStatusCode;
  // A HEAD answer has no body: the SDK then names the error after the status or `UnknownError`, which says nothing more.
  const code = e.Code ?? (e.name && !GENERIC_NAMES.has(e.name) ? e.name : undefined);
  const answered = `the S3 server answered ${status ?? 'without a status'} to ${operation}${code ? ` (${code})` : ''}`;
  if (code === 'NoSuchBucket' || (status === 404 && operation === 'HeadBucket' && !code)) {
    return { variable: 'SVC_S3_BUCKET', cause: `the bucket "${target.bucket}" does not exist at ${where(target)} (${code ?? `${status} to ${operation}`})` };
  }
  if (code === 'InvalidAccessKeyId' || code === 'SignatureDoesNotMatch' || code === 'InvalidToken' || code === 'ExpiredToken') {
    return { variable: 'AWS_ACCESS_KEY_ID', cause: `the S3 server at ${where(target)} refused the credentials (${code})` };
  }
  if (code === 'AccessDenied' || status === 403) {
    return { variable: 'AWS_ACCESS_KEY_ID', cause: `the S3 server at ${where(target)} refused access to the bucket "${target.bucket}" with these credentials (${code ?? `403 to ${operation}`})` };
  }
  if (code === 'PermanentRedirect' || code === 'AuthorizationHeaderMalformed' || status === 301) {
    return { variable: 'SVC_S3_REGION', cause: `the bucket "${target.bucket}" is in another region than the one asked (${code ?? `301 to ${operation}`})` };
  }
  if (e.name === 'TimeoutError') return { variable: 'SVC_S3_ENDPOINT', cause: `no answer from ${where(target)} in time to ${operation}` };
  const said = e.message && e.message !== 'UnknownError' && e.message !== code ? `: ${e.message}` : '';
  return { variable: 'SVC_S3_ENDPOINT', cause: `${answered} for the bucket "${target.bucket}" at ${where(target)}${said}` };
}

/** PostgreSQL's error codes that say the login or the database is wrong (SQLSTATE class 28, 3D000). */
const PG_LOGIN = /^28/;

/**
 * A PostgreSQL failure at `url`, in words: the connection (refused, unknown host, timed out),
 * the login (password, role) or the database. The URL's password is never repeated.
 */
export function describePgFailure(err: unknown, url: string): string {
  let target = 'PostgreSQL';
  let database = '';
  try {
    const u = new URL(url);
    target = `${u.hostname}:${u.port || '5432'}`;
    database = decodeURIComponent(u.pathname.replace(/^\//, ''));
  } catch {
    // The URL was checked by the configuration; keep the plain word.
  }
  // The pool wraps connection failures (catalog_unavailable) with the original as their cause.
  let e = err as SdkError | undefined;
  while (e && (e as { name?: string }).name === 'SvcError' && e.cause) e = e.cause as SdkError;
  const socket = socketFailure(e);
  if (socket) return `cannot connect to ${target}: ${socket}`;
  const message = (e?.message ?? String(err)).split('\n')[0]!;
  if (e?.code === '3D000') return `the database "${database}" does not exist at ${target}`;
  if (e?.code && PG_LOGIN.test(e.code)) return `PostgreSQL at ${target} refused the login: ${message}`;
  if (/timeout exceeded when trying to connect|due to connection timeout/.test(message)) return `cannot connect to ${target}: no answer within the connection timeout`;
  if (/^Connection terminated/.test(message)) return `the connection to ${target} was lost (${message})`;
  if (e?.code === '57P03') return `PostgreSQL at ${target} is starting up or shutting down (${message})`;
  return `PostgreSQL at ${target}: ${message}`;
}

/** An S3 failure met while opening a backend, as a StartRefused. */
export function s3StartRefused(err: unknown, operation: string, target: S3Target): StartRefused {
  const { variable, cause } = describeS3Failure(err, operation, target);
  return new StartRefused(variable, cause);
}

/** Whether `err` came from S3 (a service answer, a socket failure or the credential chain), so that it can be put in words. */
export function isS3Failure(err: unknown): boolean {
  const e = err as SdkError | undefined;
  return !!e && (e.$metadata !== undefined || socketFailure(err) !== undefined || e.name === 'CredentialsProviderError' || e.name === 'TimeoutError');
}

/** Whether a PostgreSQL failure says the server, the login or the database cannot be reached (not a fault of svc's statements). */
export function isPgConnectionFailure(err: unknown): boolean {
  let e = err as SdkError | undefined;
  while (e && (e as { name?: string }).name === 'SvcError' && e.cause) e = e.cause as SdkError;
  if (!e) return false;
  if ((e as { code?: string }).code === 'catalog_unavailable') return true;
  if (socketFailure(e)) return true;
  if (e.code === '3D000' || (e.code && PG_LOGIN.test(e.code)) || e.code === '57P03' || e.code?.startsWith('08')) return true;
  return /^(Connection terminated|timeout exceeded when trying to connect)/.test(e.message ?? '');
}
