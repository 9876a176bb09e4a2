import { invalidPagination } from '../errors.js';
import { PAGE_DEFAULT, PAGE_MAX } from '../base/limits.js';

// Opaque pagination tokens: "<kind>.<base64url payload>". Clients pass them back unchanged.

export function encodeCursor(kind: string, payload: string): string {
  return `${kind}.${Buffer.from(payload, 'utf8').toString('base64url')}`;
}

/** The payload of a token of `kind`; anything else is 400 invalid_pagination. */
export function decodeCursor(kind: string, token: string): string {
  if (token.length === 0 || token.length > 16384) throw invalidPagination('cursor must be 1..16384 characters');
  const dot = token.indexOf('.');
  const body = token.slice(dot + 1);
  if (dot < 0 || token.slice(0, dot) !== kind || !/^[A-Za-z0-9_-]+$/.test(body)) {
    throw invalidPagination('cursor is not a token issued by this endpoint');
  }
  return Buffer.from(body, 'base64url').toString('utf8');
}

/** `limit` query: a decimal integer 1..1000, default 100. */
export function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return PAGE_DEFAULT;
  if (!/^[0-9]{1,4}$/.test(raw)) throw invalidPagination(`limit must be a decimal integer from 1 to ${PAGE_MAX}`);
  const n = Number(raw);
  if (n < 1 || n > PAGE_MAX) throw invalidPagination(`limit must be a decimal integer from 1 to ${PAGE_MAX}`);
  return n;
}
