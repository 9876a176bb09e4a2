// The body of POST /v1/documents/search, checked: `{ namespaceUrn, where: { <JSON pointer>:
// <string | number | boolean> }, mode?, limit?, cursor? }` (docs/documents.md, "Search").
// Anything else is 400 invalid_request; a bad limit is the lists' invalid_pagination, a bad cursor invalid_cursor.

import { parseLimit } from '../cas/index.js';
import { invalidCursor, invalidPagination } from '../errors.js';
import { badRequest, isNamespaceUrn, isPlainObject, onlyKeys } from './model.js';
import { SEARCH_MAX_POINTERS } from '../base/limits.js';

export type SearchValue = string | number | boolean;

export interface SearchQuery {
  namespaceUrn: string;
  /** [pointer, value] in the body's order: the first pointer's range is the one scanned. */
  where: Array<[string, SearchValue]>;
  mode: 'canonical' | 'derived';
  limit: number;
  cursor?: string;
}


/** RFC 6901: "" or "/"-separated reference tokens, `~` only as `~0` or `~1`. */
const POINTER = /^(?:\/(?:[^~/]|~[01])*)*$/;

export function parseSearchRequest(body: unknown): SearchQuery {
  if (!isPlainObject(body)) throw badRequest('The body must be a JSON object { namespaceUrn, where, mode?, limit?, cursor? }');
  onlyKeys(body, ['namespaceUrn', 'where', 'mode', 'limit', 'cursor'], 'search');
  const { namespaceUrn, where, mode = 'canonical', limit, cursor } = body;
  if (!isNamespaceUrn(namespaceUrn)) throw badRequest('namespaceUrn must be a namespace URN (urn:svc:<name>)');
  if (mode !== 'canonical' && mode !== 'derived') throw badRequest('mode must be "canonical" or "derived"');
  if (!isPlainObject(where)) throw badRequest('where must be an object of JSON pointers to strings, numbers or booleans ({} for every document with an entry)');
  const pairs = Object.entries(where);
  if (pairs.length > SEARCH_MAX_POINTERS) throw badRequest(`where takes at most ${SEARCH_MAX_POINTERS} pointers`);
  for (const [pointer, value] of pairs) {
    if (!POINTER.test(pointer)) throw badRequest(`where: "${pointer}" is not a JSON pointer (RFC 6901: "" or "/a/b", "~" only as "~0" or "~1")`);
    const scalar = typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));
    if (!scalar) throw badRequest(`where: the value of "${pointer}" must be a string, a number or a boolean`);
  }
  let pageSize: number;
  if (limit === undefined) pageSize = parseLimit(undefined);
  else if (typeof limit === 'number' && Number.isInteger(limit)) pageSize = parseLimit(String(limit));
  else throw invalidPagination('limit must be an integer from 1 to 1000');
  if (cursor !== undefined && typeof cursor !== 'string') throw invalidCursor('cursor must be a string (a nextCursor of this search)');
  return { namespaceUrn, where: pairs as Array<[string, SearchValue]>, mode, limit: pageSize, cursor };
}
