// What a blob backend is: where manifests and block bytes live, and the shared views a backend of
// several nodes adds. The engine depends on this and on the interfaces it names, never on an
// implementation (./backend.ts opens the configured one).
import type { Clock, ReferenceClock } from '../base/clock.js';
import type { BlobBackendKind } from '../base/config.js';
import type { BlobCatalog, EmbeddedBlobCatalog } from './blob-catalog.js';
import type { BlockStore, EmbeddedBlockStore, MovableBlockStore } from './block-store.js';
import type { GcCatalog } from './gc-catalog.js';
import type { SharedGcCatalog } from './shared-gc-catalog.js';
import type { TailStaging, UploadCatalog } from './upload-catalog.js';
import type { ModelRegistry } from './model-registry.js';
import type { DevSecretStore } from './dev-secret.js';
import type { UnitStore } from './unit-store.js';
import type { DocumentsClaim } from './documents-claim.js';

/** A dependency readiness probes, named as the ops snapshot names it. */
export interface Dependency {
  name: 'catalog' | 'blockStore' | 'postgres' | 's3';
  probe(): Promise<void>;
}

export interface BlobBackend {
  readonly kind: BlobBackendKind;
  readonly blocks: BlockStore;
  readonly manifests: BlobCatalog;
  /** The embedded backend's synchronous views and its GC records, for the embedded garbage collector (fs only). */
  readonly embedded?: { blocks: EmbeddedBlockStore; manifests: EmbeddedBlobCatalog; gc: GcCatalog };
  /** A shared backend's views, for the collector of a shared catalog (pg-s3, s3). */
  readonly shared?: { blocks: MovableBlockStore; gc: SharedGcCatalog };
  // Every store below is present for every backend: shared by the nodes where the backend shares
  // it, else kept by this node (its LMDB, its data directory). The engine only wires them.
  /** Resumable sessions: shared between nodes on pg-s3 and s3 (`catalog.shared`); on fs the node's LMDB and data directory keep them. */
  readonly sessions: { catalog: UploadCatalog; staging: TailStaging };
  /** The model registry: shared on pg-s3; else the node's LMDB keeps it. */
  readonly models: ModelRegistry;
  /** The generated development secret: shared on pg-s3; else a file in the data directory keeps it. */
  readonly devSecret: DevSecretStore;
  /** The key that seals cursors (engine/auth/cursor-seal.ts): in the units, except on s3 (the bucket: the units do not reach every node there). */
  readonly cursorKey: DevSecretStore;
  /** Units of work: shared by the cluster's nodes on pg-s3 (`units.shared`); else the node's LMDB holds them. */
  readonly units: UnitStore;
  /**
   * Where only one node may serve the document platform (s3: its records are in that node's
   * LMDB), the claim that says which: a lease (documents-claim.ts); the others answer /v1 503
   * documents_single_node. Undefined: every node serves it.
   */
  readonly documents?: DocumentsClaim;
  /** The node last known to hold `documents` (undefined where every node serves the document platform). */
  readonly documentsNode?: string;
  /**
   * The clock the cluster's records are judged by: the database's on pg-s3, followed by sampling
   * (a ReferenceClock; decisions §5); the system clock elsewhere.
   */
  readonly clock: Clock | ReferenceClock;
  readonly dependencies: readonly Dependency[];
  /** Interrupted block writes cleaned up at open (fs). */
  readonly removedTempFiles: number;
  close(): Promise<void>;
}
