// The blob catalog: published manifests, the inventory (publication order), the block index
// (one record per stored block, for GC's ages) and inline blobs. Publication is atomic: the
// manifest, its inventory entry and its block records are committed together, or nothing.
import type { StoredBlock } from './block-store.js';
import type { BlobSummary, Manifest, ManifestRecord } from './manifest.js';

/** A page cursor that the catalog did not issue (the caller answers 400 invalid_pagination). */
export class InvalidCursorError extends Error {
  constructor(message = 'cursor is not a token issued by this endpoint') {
    super(message);
    this.name = 'InvalidCursorError';
  }
}

/** The sequence number a cursor of a sequence-ordered catalog (LMDB, PostgreSQL) names. */
export function seqOfCursor(cursor: string): number {
  if (!/^[1-9][0-9]{0,15}$/.test(cursor)) throw new InvalidCursorError();
  return Number(cursor);
}

export interface BlockRecord {
  size: number;
  createdAt: number;
  /** Last publication that referenced the block (refreshed at most once a minute); absent = createdAt. */
  touchedAt?: number;
}

/**
 * Called inside every publication's atomic step for each block it references (garbage
 * collection: marks the block live while a run is active; moves back a block it quarantined,
 * or throws when the block is gone, so that no manifest ever names a missing block).
 */
export interface PublicationGuard {
  referencedSync(key: Buffer, hex: string, size: number): void;
}

export interface PublishOptions {
  /** Whose blob it is (default: DEFAULT_TENANT). */
  tenant?: string;
  /** Tell which blocks are new to the tenant (`newToTenant`), recording them as its own. */
  tenantBlocks?: boolean;
  /**
   * The tenant's retained-byte quota: a blob new to it that would take its retained bytes past
   * this is not published (`quotaExceeded` is thrown from inside the atomic step).
   */
  quotaBytes?: number;
  /** The refusal, told the tenant's retained bytes in this catalog as the step read them. */
  quotaExceeded?: (retainedBytes: number) => Error;
}

export interface Publication {
  /** The manifest as the tenant published it. */
  manifest: Manifest;
  /** The tenant held it already (a repeat: nothing changed). */
  existed: boolean;
  /** With `tenantBlocks`: per block, whether the tenant had never referenced it. */
  newToTenant?: boolean[];
}

/**
 * Manifests are stored once and held by tenants: a tenant sees, lists and deletes only what it
 * holds (another tenant's blob is absent to it), and a manifest goes with its last holder.
 * Every call may go to another process (PostgreSQL, S3): reads are asynchronous too.
 */
export interface BlobCatalog {
  /** The tenant's manifest: at once when the catalog can (embedded: the 4 KiB GET path stays synchronous), else a promise. */
  get(id: string, tenant?: string): Manifest | undefined | Promise<Manifest | undefined>;
  /** The bytes of an inline blob. */
  inlineBytes(id: string): Promise<Buffer | undefined>;
  /**
   * Publishes a manifest once its blocks are durable. An id that is already published keeps its
   * first manifest (same bytes, same id) and that one is returned. With `inlineBytes` the blob's
   * one block is kept in the catalog instead of the block store.
   */
  publish(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[], inlineBytes?: Uint8Array, options?: PublishOptions): Promise<Publication>;
  /**
   * A manifest record kept by its caller instead of published (document content): the block
   * records are written as for a publication, nothing enters the manifests or the inventory.
   */
  recordUnlisted(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[]): Promise<{ id: string; record: ManifestRecord }>;
  /** Removes the tenant's hold; the manifest goes with the last one; blocks stay for GC. False when the tenant does not hold it. */
  remove(id: string, tenant?: string): Promise<boolean>;
  /**
   * The tenant's blobs, most recently published first, starting after `cursor`: a position this
   * kind of catalog returned as `next` (opaque to the caller: a sequence number in LMDB and
   * PostgreSQL, an object key in S3). A cursor it cannot read throws InvalidCursorError.
   * `next` is absent on the last page.
   */
  page(limit: number, cursor?: string, tenant?: string): Promise<{ summaries: BlobSummary[]; next?: string }>;
  /** The bytes of the distinct blobs the tenant holds (kept with every publication and removal). */
  retainedBytes(tenant: string): Promise<number>;
  /**
   * The tenant's distinct blobs and their bytes together (GET /api/v1/usage). Cheap: the bytes
   * are a kept total; the count is a count over the tenant's own index range (LMDB, PostgreSQL)
   * or the kept count of its ledger (s3), never a scan of other tenants' blobs.
   */
  tenantUsage(tenant: string): Promise<{ bytes: number; objects: number }>;
  /** Published manifests and recorded blocks; bytes of the blocks recorded (quarantined ones not counted): what svc stores. */
  totals(): Promise<{ blobs: number; blocks: number; storedBytes: number }>;
  /** Whether the catalog answers (readiness). */
  probe(): Promise<void>;
}

/**
 * The embedded catalog's hooks for the embedded garbage collector (engine/gc): its steps are
 * synchronous LMDB transactions that also move block files, so no publication runs between a
 * catalog write and the matching move.
 */
export interface EmbeddedBlobCatalog extends BlobCatalog {
  /** GC's hook into every publication. */
  setGuard(guard: PublicationGuard): void;
  /** A block's record (GC: its age), read in the caller's atomic step if any. */
  blockRecord(key: Buffer): BlockRecord | undefined;
  /** Inside GC's atomic step: the record of a block moved to quarantine goes. */
  forgetBlockSync(key: Buffer): void;
  /** Inside GC's atomic step: the record of a block moved back from quarantine. */
  restoreBlockSync(key: Buffer, record: BlockRecord): void;
  /**
   * GC marking: the block digests of up to about `maxDigests` published manifests' blocks,
   * starting after manifest id `after`; `next` is where to go on (undefined at the end).
   */
  referencedPage(after: string | undefined, maxDigests: number): { digests: Buffer[]; next?: string };
}
