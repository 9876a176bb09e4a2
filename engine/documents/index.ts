// The document platform: documents, versions, metadata, schemas, migrations, permissions.
export { Documents, type BytesUpload } from './documents.js';
export { Metadata } from './metadata-service.js';
export { DocumentJobs } from './document-jobs.js';
export { DocumentRecords } from './records.js';
export type * from './commands.js';
export type { Created, Finalized, JobAnswer } from './outcomes.js';
export { MetadataRejection } from './metadata.js';
export { MigrationRegistry } from './migrations.js';
export { type PlacementHint, badRequest, isPlainObject, parsePlacement } from './model.js';
export { requireCapability } from './permissions.js';
export { SchemaRegistry } from './schemas.js';
export { BulkMigrations } from './bulk-migration.js';
