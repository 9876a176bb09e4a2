import { invalidPagination } from '../base/errors.js';
import { PAGE_DEFAULT, PAGE_MAX } from '../base/limits.js';

// The page size of every list. Cursors are sealed for one caller and one query by
// engine/auth/cursor-seal.ts.

/** `limit` query: a decimal integer 1..1000, default 100. */
export function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return PAGE_DEFAULT;
  if (!/^[0-9]{1,4}$/.test(raw)) throw invalidPagination(`limit must be a decimal integer from 1 to ${PAGE_MAX}`);
  const n = Number(raw);
  if (n < 1 || n > PAGE_MAX) throw invalidPagination(`limit must be a decimal integer from 1 to ${PAGE_MAX}`);
  return n;
}
