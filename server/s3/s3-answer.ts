// Every S3 failure as S3 answers it: the XML error document (Code, Message, Resource, RequestId)
// with S3's status, whatever raised it: the listener's S3Error, an index refusal (engine/s3
// errors.ts, S3's code in snake case), or another engine failure (a tenant's limit, a quota, a
// budget), named with the nearest S3 code. HEAD gets the status and headers, never a body.

import { SvcError } from '../../engine/base/errors.js';
import { s3CodeOf } from '../../engine/s3/errors.js';
import { statusOf } from '../failure-status.js';
import type { Exchange } from '../exchange.js';
import { S3Error, type S3ErrorCode } from './s3-error.js';
import { errorXml } from './xml.js';

export const XML = 'application/xml';

/** The S3 code and status of an engine failure that is not one of the index's refusals. */
function fromSvcError(err: SvcError): S3Error & { status: number } {
  const as = (code: S3ErrorCode, status?: number) => Object.assign(new S3Error(code, err.message), status === undefined ? {} : { status });
  switch (err.kind) {
    case 'forbidden':
    case 'unauthenticated':
      return as('AccessDenied');
    case 'too_large':
      return as('EntityTooLarge');
    case 'too_many_requests':
    case 'unavailable':
      return as(err.code === 'slow_down' || err.kind === 'too_many_requests' ? 'SlowDown' : 'ServiceUnavailable');
    case 'not_found':
      return as('NoSuchKey');
    case 'precondition_failed':
      return as('PreconditionFailed');
    case 'range_not_satisfiable':
      return as('InvalidRange');
    case 'invalid':
    case 'unprocessable':
      return as(err.code === 'invalid_cursor' || err.code === 'invalid_pagination' ? 'InvalidArgument' : 'InvalidRequest');
    default:
      // A quota (507) and the rest keep their status under S3's generic codes.
      return as(statusOf(err) >= 500 ? 'ServiceUnavailable' : 'InvalidRequest', statusOf(err));
  }
}

/** The S3 answer of a failure; undefined for an unknown error (logged, answered 500 InternalError). */
export function s3ErrorOf(err: unknown): S3Error | undefined {
  if (err instanceof S3Error) return err;
  const code = s3CodeOf(err);
  if (code !== undefined) return new S3Error(code, (err as Error).message);
  if (err instanceof SvcError) return fromSvcError(err);
  return undefined;
}

/** Answers `err` as S3 does. */
export function answerError(ex: Exchange, resource: string, err: unknown, extraHeaders: Record<string, string> = {}): void {
  if (!ex.live) return;
  let s3 = s3ErrorOf(err);
  if (!s3) {
    ex.surface.log.error('s3 request failed', { requestId: ex.requestId, method: ex.method, err: String((err as Error)?.stack ?? err) });
    s3 = new S3Error('InternalError', `We encountered an internal error (request ${ex.requestId}). Please try again.`);
  }
  const headers: Record<string, string> = { 'Content-Type': XML, ...extraHeaders };
  if (err instanceof SvcError && err.details.retryAfterSeconds !== undefined) headers['Retry-After'] = String(err.details.retryAfterSeconds);
  ex.send(s3.status, headers, errorXml(s3, resource, ex.requestId));
}

