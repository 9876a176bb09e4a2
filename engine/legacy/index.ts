// Legacy repositories read through (SVC_LEGACY_REPOS): XML metadata and hash-partitioned binaries
// on disk, resolved safely under each root. No HTTP here: server/legacy-api.ts answers.
export { parseLegacyDocId } from './doc-id.js';
export { LegacyError, type LegacyFailure, legacyInvalidId, legacyRepoNotFound } from './errors.js';
export { UNKNOWN_REPO_LABEL } from './metrics.js';
export { LegacyDocument } from './repository.js';
export { LegacyRepositories } from './repositories.js';
export { IMPORT_MODES, type ImportAnswer, type ImportRequest, LegacyImports } from './import.js';
