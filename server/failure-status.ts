// The one place a failure the engine names becomes HTTP: its status, and the headers its details
// carry (Retry-After, Upload-Offset, Allow, Tus-Version, WWW-Authenticate).

import type { FailureKind, SvcError } from '../engine/base/errors.js';

const STATUS: Record<FailureKind, number> = {
  invalid: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  not_acceptable: 406,
  conflict: 409,
  gone: 410,
  // The model runtime's load, warm-up or request past its limit (MLeap answers 408 too).
  timed_out: 408,
  precondition_failed: 412,
  too_large: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  unprocessable: 422,
  too_many_requests: 429,
  // tus 1.0 checksum extension: a body whose checksum is not the one the client sent.
  checksum_mismatch: 460,
  internal: 500,
  unavailable: 503,
  insufficient_storage: 507,
};

export const statusOf = (err: Pick<SvcError, 'kind'>): number => STATUS[err.kind];

export function headersOf(err: Pick<SvcError, 'kind' | 'details'>): Record<string, string> {
  const { retryAfterSeconds, uploadOffset, allow, supportedVersions } = err.details;
  const headers: Record<string, string> = {};
  if (err.kind === 'unauthenticated') headers['WWW-Authenticate'] = 'Bearer';
  if (retryAfterSeconds !== undefined) headers['Retry-After'] = String(retryAfterSeconds);
  if (uploadOffset !== undefined) headers['Upload-Offset'] = String(uploadOffset);
  if (allow !== undefined) headers.Allow = allow;
  if (supportedVersions !== undefined) headers['Tus-Version'] = supportedVersions;
  return headers;
}
