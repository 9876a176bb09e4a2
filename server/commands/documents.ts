// Document requests parsed into typed commands (engine/documents/commands.ts): create, finalize,
// search, migrate one document, migrate many. The refusals are those the engine gave when it read
// the bodies itself (400 invalid_request; search's limit and cursor as the lists').

import type { BulkMigrationRequest, CreateDocument, FinalizeUpload, MigrateDocument } from '../../engine/documents/commands.js';
import type { SearchQuery, SearchValue } from '../../engine/documents/search-request.js';
import { badRequest, isNamespaceUrn, isPlainObject, isSchemaUrn, isUuid, onlyKeys, parseExternalRefs, parseLabels, parsePermissions, parsePlacement } from '../../engine/documents/model.js';
import { parseLimit } from '../../engine/cas/index.js';
import { invalidCursor, invalidPagination } from '../../engine/base/errors.js';
import { SEARCH_MAX_POINTERS } from '../../engine/base/limits.js';
import { readBundle } from './metadata.js';
import { bodyUrns, bundleUrns } from './urns.js';

/** POST /v1/documents: `{ documentId?, placementHint?, externalRefs?, initialMetadata?, initialPermissions? }`. */
export function parseCreateDocument(body: unknown): CreateDocument {
  if (isPlainObject(body)) bundleUrns(body.initialMetadata);
  if (!isPlainObject(body)) throw badRequest('The body must be a JSON object');
  onlyKeys(body, ['documentId', 'placementHint', 'externalRefs', 'initialMetadata', 'initialPermissions'], 'document');
  if (body.documentId !== undefined && !isUuid(body.documentId)) throw badRequest('documentId must be a UUID');
  const placementHint = parsePlacement(body.placementHint);
  const externalRefs = parseExternalRefs(body.externalRefs);
  const permissions = parsePermissions(body.initialPermissions);
  const initialMetadata = body.initialMetadata === undefined ? undefined : readBundle(body.initialMetadata, 'initialMetadata');
  return {
    externalRefs, permissions,
    ...(body.documentId === undefined ? {} : { documentId: body.documentId }),
    ...(placementHint === undefined ? {} : { placementHint }),
    ...(initialMetadata === undefined ? {} : { initialMetadata }),
  };
}

/** POST /v1/uploads/{id}/finalize: `{ labels?, reason? }`, or no body. */
export function parseFinalize(body: unknown): FinalizeUpload {
  const b = body === undefined ? {} : body;
  if (!isPlainObject(b)) throw badRequest('The body must be a JSON object { labels, reason }');
  onlyKeys(b, ['labels', 'reason'], 'finalize');
  const labels = parseLabels(b.labels);
  if (b.reason !== undefined && typeof b.reason !== 'string') throw badRequest('reason must be a string');
  return { labels, ...(b.reason === undefined ? {} : { reason: b.reason }) };
}

/** POST /v1/documents/{id}/migrate: `{ namespaceUrn, toSchemaUrn, reason }`. */
export function parseMigrateDocument(body: unknown): MigrateDocument {
  if (!isPlainObject(body)) throw badRequest('The body must be { namespaceUrn, toSchemaUrn, reason }');
  onlyKeys(body, ['namespaceUrn', 'toSchemaUrn', 'reason'], 'migrate');
  const { namespaceUrn, toSchemaUrn, reason } = body;
  if (typeof namespaceUrn !== 'string' || typeof toSchemaUrn !== 'string') throw badRequest('namespaceUrn and toSchemaUrn are required strings');
  if (typeof reason !== 'string' || reason.trim() === '') throw badRequest('reason is required');
  return { namespaceUrn, toSchemaUrn, reason };
}

/** POST /v1/migrations/apply: `{ fromSchemaUrn, toSchemaUrn, where?, reason }`. */
export function parseBulkMigration(body: unknown): BulkMigrationRequest {
  bodyUrns(body, ['fromSchemaUrn', 'toSchemaUrn']);
  if (!isPlainObject(body)) throw badRequest('The body must be { fromSchemaUrn, toSchemaUrn, where?, reason }');
  onlyKeys(body, ['fromSchemaUrn', 'toSchemaUrn', 'where', 'reason'], 'bulk migration');
  const { fromSchemaUrn, toSchemaUrn, reason } = body;
  if (!isSchemaUrn(fromSchemaUrn) || !isSchemaUrn(toSchemaUrn)) throw badRequest('fromSchemaUrn and toSchemaUrn must be urn:svc:schema:<name>@<semver>');
  if (typeof reason !== 'string' || reason.trim() === '') throw badRequest('reason is required');
  return { fromSchemaUrn, toSchemaUrn, where: parseWhere(body.where ?? {}), reason };
}

/** RFC 6901: "" or "/"-separated reference tokens, `~` only as `~0` or `~1`. */
const POINTER = /^(?:\/(?:[^~/]|~[01])*)*$/;

/**
 * POST /v1/documents/search: `{ namespaceUrn, where: { <JSON pointer>: <string | number |
 * boolean> }, mode?, limit?, cursor? }`. Anything else is 400 invalid_request; a bad limit is the
 * lists' invalid_pagination, a bad cursor invalid_cursor.
 */
export function parseSearchRequest(body: unknown): SearchQuery {
  if (!isPlainObject(body)) throw badRequest('The body must be a JSON object { namespaceUrn, where, mode?, limit?, cursor? }');
  onlyKeys(body, ['namespaceUrn', 'where', 'mode', 'limit', 'cursor'], 'search');
  const { namespaceUrn, where, mode = 'canonical', limit, cursor } = body;
  if (!isNamespaceUrn(namespaceUrn)) throw badRequest('namespaceUrn must be a namespace URN (urn:svc:<name>)');
  if (mode !== 'canonical' && mode !== 'derived') throw badRequest('mode must be "canonical" or "derived"');
  const pairs = parseWhere(where);
  let pageSize: number;
  if (limit === undefined) pageSize = parseLimit(undefined);
  else if (typeof limit === 'number' && Number.isInteger(limit)) pageSize = parseLimit(String(limit));
  else throw invalidPagination('limit must be an integer from 1 to 1000');
  if (cursor !== undefined && typeof cursor !== 'string') throw invalidCursor('cursor must be a string (a nextCursor of this search)');
  return { namespaceUrn, where: pairs, mode, limit: pageSize, cursor };
}

/** A search's (or a bulk migration's) `where`: JSON pointers to scalars, in the body's order. */
function parseWhere(where: unknown): Array<[string, SearchValue]> {
  if (!isPlainObject(where)) throw badRequest('where must be an object of JSON pointers to strings, numbers or booleans ({} for every document with an entry)');
  const pairs = Object.entries(where);
  if (pairs.length > SEARCH_MAX_POINTERS) throw badRequest(`where takes at most ${SEARCH_MAX_POINTERS} pointers`);
  for (const [pointer, value] of pairs) {
    if (!POINTER.test(pointer)) throw badRequest(`where: "${pointer}" is not a JSON pointer (RFC 6901: "" or "/a/b", "~" only as "~0" or "~1")`);
    const scalar = typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));
    if (!scalar) throw badRequest(`where: the value of "${pointer}" must be a string, a number or a boolean`);
  }
  return pairs as Array<[string, SearchValue]>;
}
