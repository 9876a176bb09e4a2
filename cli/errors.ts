// Errors of the command-line client, each with the exit code it ends the program with.

import { STATUS_CODES, type IncomingHttpHeaders } from 'node:http';

/** Bad command line: exit code 2. */
export class UsageError extends Error {
  readonly exitCode = 2;
}

/** A failure the client itself detected (mismatch, unreadable file, ...): exit code 1. */
export class CliError extends Error {
  readonly exitCode = 1;
}

/** An HTTP answer the client did not expect, with the server's `{error, message}` envelope when it sent one. */
export class ApiError extends Error {
  readonly exitCode = 1;

  constructor(
    readonly status: number,
    readonly code: string | undefined,
    readonly detail: string | undefined,
    readonly headers: IncomingHttpHeaders = {},
  ) {
    super(code === undefined ? `${status} ${STATUS_CODES[status] ?? 'HTTP error'}` : `${status} ${code}: ${detail ?? ''}`);
  }
}

/** Answers worth trying again: the server is restarting, overloaded or the session is briefly held. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof UsageError || err instanceof CliError) return false;
  if (err instanceof ApiError) {
    if (err.status === 409) return err.code === 'upload_busy';
    return err.status === 408 || err.status === 429 || (err.status >= 500 && err.status !== 501 && err.status !== 505 && err.status !== 507);
  }
  // Connection failures: refused, reset, closed early, timed out, network away.
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && NETWORK_CODES.has(code);
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'EHOSTDOWN',
  'ENETUNREACH', 'ENETDOWN', 'ENETRESET', 'EAI_AGAIN', 'ERR_STREAM_PREMATURE_CLOSE',
]);

/** One line for the user, without the `svc: ` prefix. */
export function describe(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    if (err instanceof ApiError || err instanceof UsageError || err instanceof CliError) return err.message;
    return code && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}
