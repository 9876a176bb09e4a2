// POST /v1/legacy/import's body parsed into the engine's ImportRequest (engine/legacy/import.ts).

import { badRequest, isPlainObject, parsePlacement } from '../../engine/documents/index.js';
import { IMPORT_MODES, type ImportRequest, parseLegacyDocId } from '../../engine/legacy/index.js';

/** `{ repo (or legacyRepo), legacyDocId, placementHint?, mode? }`. */
export function parseImportRequest(body: unknown): ImportRequest {
  if (!isPlainObject(body)) throw badRequest('The body must be a JSON object { repo, legacyDocId, placementHint? }');
  for (const key of Object.keys(body)) {
    if (!['repo', 'legacyRepo', 'legacyDocId', 'placementHint', 'mode'].includes(key)) throw badRequest(`unknown field "${key}" (an import takes repo, legacyDocId, placementHint, mode)`);
  }
  if (body.repo !== undefined && body.legacyRepo !== undefined && body.repo !== body.legacyRepo) throw badRequest('repo and legacyRepo name different repositories');
  const repo = body.repo ?? body.legacyRepo;
  if (typeof repo !== 'string' || repo === '') throw badRequest('repo is a required string');
  if (typeof body.legacyDocId !== 'string') throw badRequest('legacyDocId is a required string');
  const legacyDocId = parseLegacyDocId(body.legacyDocId);
  const placementHint = parsePlacement(body.placementHint) ?? 'transient';
  const mode = body.mode;
  if (mode !== undefined && !IMPORT_MODES.includes(mode as ImportRequest['mode'] & string)) throw badRequest(`mode must be one of ${IMPORT_MODES.join(', ')}`);
  return { repo, legacyDocId, placementHint, ...(mode === undefined ? {} : { mode: mode as ImportRequest['mode'] }) };
}
