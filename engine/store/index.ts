// The storage layer's API: the interfaces the engine depends on and the functions that open
// today's implementations (block files under <SVC_FS_ROOT>/blocks, LMDB under <SVC_FS_ROOT>/catalog).
// Nothing outside engine/store imports lmdb or an implementation module.
import type { Durability } from '../config.js';
import type { BlockStore } from './block-store.js';
import { FsBlockStore } from './fs/block-store.js';

export type { BlockStore, BlockStoreLocation, BlockWriter, ListedBlock, PutOutcome, RestoreOutcome, StoredBlock } from './block-store.js';
export type { BlobCatalog, BlockRecord, EmbeddedBlobCatalog, Publication, PublicationGuard, PublishOptions } from './blob-catalog.js';
export { DEFAULT_TENANT } from './tenants.js';
export type { GcCatalog, Receipt, Tombstone } from './gc-catalog.js';
export type { KeyedCatalog } from './keyed-catalog.js';
export type { OrderedTable, RangeOptions, TableCatalog, TableKey, TableOptions } from './ordered-table.js';
export { type Lease, type PartRecord, type SessionRecord, type SessionState, type UploadCatalog, packBlocks } from './upload-catalog.js';
export { type BlobSummary, type BlockRef, Manifest, type ManifestRecord, summarize } from './manifest.js';
export { CatalogEnv } from './lmdb/env.js';
export { LmdbBlobCatalog } from './lmdb/blob-catalog.js';
export { LmdbUploadCatalog } from './lmdb/upload-catalog.js';
export { LmdbGcCatalog } from './lmdb/gc-catalog.js';
export { LmdbKeyedCatalog } from './lmdb/keyed-catalog.js';
export { type DataDirLock, DataDirInUse, DataDirLockError, lockDataDir } from './data-dir-lock.js';
export { DiskSpace, type FreeSpaceFloor, floorInBytes } from './disk-space.js';
export { syncDirectory } from './fs/sync-directory.js';
export { blockWriter } from './block-writer.js';

/**
 * The node's block store, made ready: its layout exists and the temp files of interrupted
 * writes are gone. Only the process that holds the data directory's lock may call this.
 */
export function openBlockStore(root: string, durability: Durability): { store: BlockStore; removedTempFiles: number } {
  const { removedTempFiles } = FsBlockStore.prepare(root);
  return { store: new FsBlockStore(root, durability), removedTempFiles };
}
