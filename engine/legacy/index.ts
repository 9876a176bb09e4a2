// Legacy repositories read through (SVC_LEGACY_REPOS): XML metadata and hash-partitioned binaries
// on disk, resolved safely under each root. No HTTP here: server/legacy-api.ts answers.
export { parseLegacyDocId, MAX_DOC_ID_BYTES } from './doc-id.js';
export { type LegacyDescriptor, HASH_HEX_LENGTHS, parseDescriptor } from './descriptor.js';
export { LegacyError, type LegacyFailure, legacyInvalidId, legacyRepoNotFound } from './errors.js';
export { LegacyMetrics, UNKNOWN_REPO_LABEL } from './metrics.js';
export { LegacyDocument, LegacyRepository, MAX_METADATA_BYTES } from './repository.js';
export { LegacyRepositories } from './repositories.js';
export { LegacyImports, LEGACY_IMPORT_KIND, LEGACY_SYSTEM, legacyDocumentId } from './import.js';
