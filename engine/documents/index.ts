// The document platform: documents, versions, metadata, schemas, migrations, permissions.
export { type Created, DocumentService, type Finalized, type JobAnswer } from './documents.js';
export { MetadataRejection } from './metadata.js';
export { MigrationRegistry } from './migrations.js';
export { type PlacementHint, badRequest, isPlainObject, parsePlacement } from './model.js';
export { requireCapability } from './permissions.js';
export { SchemaRegistry } from './schemas.js';
export { BulkMigrations } from './bulk-migration.js';
