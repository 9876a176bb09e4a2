// The storage layer's API: the interfaces the engine depends on and the functions that open
// the implementations behind them (backend.ts opens the configured one: block files under
// <SVC_FS_ROOT>/blocks and LMDB under <SVC_FS_ROOT>/catalog, PostgreSQL and S3, or S3 alone).
// Nothing outside engine/store imports lmdb or an implementation module.
export type { BlockStore, BlockStoreLocation, BlockWriter, EmbeddedBlockStore, FsLocation, ListedBlock, ListedObject, MovableBlockStore, PutOutcome, RestoreOutcome, S3Location, StoredBlock } from './block-store.js';
export type { ClusterNode, ForgetOutcome, KeyedBlock, NodeRecord, SharedGcCatalog } from './shared-gc-catalog.js';
export { type BlobBackend, type Dependency, openBlobBackend } from './backend.js';
export { type DocumentsClaim, type DocumentsClaimRead, type DocumentsElsewhere, claimRenewalMs } from './documents-claim.js';
export { type BlobCatalog, type BlockRecord, type EmbeddedBlobCatalog, InvalidCursorError, type Publication, type PublicationGuard, type PublishOptions } from './blob-catalog.js';
export { DEFAULT_TENANT } from './tenants.js';
export type { GcCatalog, Receipt, Tombstone } from './gc-catalog.js';
export { KeyedCatalog } from './keyed-catalog.js';
export type { DevSecretStore } from './dev-secret.js';
export { FileDevSecretStore } from './fs/dev-secret.js';
export { UnitSecretStore } from './unit-secret.js';
export type { ModelRegistration, ModelRegistry, RegistryWatch, RemoveOutcome } from './model-registry.js';
export {
  type CommittedSession, type CommittingSession, type EndedSession, type Lease, type LeaseKind, type LeaseOf, type LeasedSession, type OpenSession, type PartLeasedSession,
  type PartRecord, type SessionRecord, type SessionState, type TailStaging, type TusFacts, type UploadCatalog, packBlocks,
} from './upload-catalog.js';
export { FsTailStaging } from './fs/staging.js';
export { type BlobSummary, type BlockRef, Manifest, type ManifestRecord, pack, summarize } from './manifest.js';
export { CatalogEnv } from './lmdb/env.js';
export { LmdbBlobCatalog } from './lmdb/blob-catalog.js';
export { LmdbUploadCatalog } from './lmdb/upload-catalog.js';
export { LmdbGcCatalog } from './lmdb/gc-catalog.js';
export { LmdbModelRegistry } from './lmdb/model-registry.js';
export { S3OnlyRefused } from './s3-only/refused.js';
export { StartRefused, describePgFailure, describeS3Failure } from './dependency-failure.js';
export { type DataDirLock, DataDirInUse, DataDirLockError, dataDirHolder, lockDataDir } from './data-dir-lock.js';
export { DiskSpace, type FreeSpaceFloor, floorInBytes } from './disk-space.js';
export { syncDirectory } from './fs/sync-directory.js';
export { blockWriter } from './block-writer.js';
export { type Entry, type PointKey, Table, type Unit, UnitConflict, type UnitKey, type UnitRange, type UnitStore, table } from './unit-store.js';
export { CATALOG_SCHEMA, CATALOG_SCHEMA_KEY, CATALOG_SCHEMA_VERSION, CatalogSchemaTooNew, openCatalogSchema } from './catalog-schema.js';
export { LmdbUnitStore } from './lmdb/unit-store.js';
export { PgUnitStore, type PgUnitStoreOptions, UNITS_CHANNEL } from './pg/unit-store.js';
