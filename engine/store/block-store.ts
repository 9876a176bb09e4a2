// The block store: immutable blocks keyed by (SHA-256 hex, size). A block is written whole or
// not at all. Blocks are written from worker threads (block tasks open the same store from its
// `location`) and read on the main thread. The embedded store (files) also keeps the restorable
// quarantine that the embedded garbage collector moves unreferenced blocks into.
import type { Durability } from '../base/config.js';

export type PutOutcome = 'present' | 'restored' | 'written';
export type RestoreOutcome = 'restored' | 'live' | 'missing';

/** What a worker thread needs to open the same store. */
export type BlockStoreLocation = FsLocation | S3Location;

export interface FsLocation {
  kind: 'fs';
  root: string;
  durability: Durability;
}

/** An S3 bucket (credentials come from the AWS SDK's standard chain in every thread). */
export interface S3Location {
  kind: 's3';
  /** Empty: the AWS default endpoint. */
  endpoint: string;
  region: string;
  bucket: string;
  /** Prepended to every key (empty, or ending with '/'). */
  prefix: string;
  forcePathStyle: boolean;
  /**
   * The server refuses a PUT `If-None-Match: *` over an existing object (probed at start,
   * engine/store/s3/preconditions.ts): a block is then stored by one conditional PUT, no HEAD
   * first. Unset: a HEAD of the live and the quarantine key before the PUT.
   */
  conditionalPut?: boolean;
  /**
   * SVC_S3_TIMEOUT: a request that sends or receives nothing this long, or whose connection does
   * not open within it, is given up (a network failure: retried, then the caller's 503).
   * Absent: S3_DEFAULT_IDLE_TIMEOUT_MS.
   */
  idleTimeoutMs?: number;
}

export interface StoredBlock {
  hex: string;
  size: number;
  checksum: bigint;
  /** Not found on disk: written (or moved back from quarantine) by this store. */
  fresh: boolean;
  /** The bytes were written by this store (not present, not moved back): a failed ingest reclaims them. */
  written?: true;
}

/** A stored block as listed by `listPartition`. */
export interface ListedBlock {
  hex: string;
  size: number;
}

/**
 * The write side, used by block tasks in worker threads. The embedded store answers at once
 * (its calls block only their worker); a remote one answers with promises, and a task then
 * stores its blocks concurrently.
 */
export interface BlockWriter {
  /**
   * Stores a block unless an intact copy exists: 'present' when one was there, 'written' when
   * this call wrote the bytes, 'restored' when a quarantined copy was moved back instead. With
   * `alwaysWrite` a present block is written again all the same (over itself), so that the
   * time a store takes says nothing of what others stored (security on); it stays 'present'.
   */
  put(hex: string, size: number, pieces: readonly Uint8Array[], alwaysWrite?: boolean): PutOutcome | Promise<PutOutcome>;
  /** Reads a whole block (a block task's verify); a quarantined block is read from quarantine. */
  readWhole(hex: string, size: number): Buffer | Promise<Buffer>;
}

/** The whole store, for the engine. */
export interface BlockStore extends BlockWriter {
  readonly location: BlockStoreLocation;
  /** A directory on this node for scratch files (ingest spills, readiness probes). */
  readonly scratchDir: string;
  /** Reads a whole block, into `into` when given; a quarantined block is read from quarantine. */
  read(hex: string, size: number, into?: Buffer): Promise<Buffer>;
  /** Blocks a download reads ahead of the one it sends: a local disk needs one, a remote store more round trips in flight. */
  readonly readAhead: number;
  /** Whether blocks can be written (readiness). */
  probe(): Promise<void>;
}

/**
 * The embedded store's quarantine, for the embedded garbage collector. Its calls are synchronous
 * because GC's steps rely on no publication running between a catalog write and the matching
 * move (engine/gc).
 */
export interface EmbeddedBlockStore extends BlockStore {
  /** Size of the live block, or undefined when there is none. */
  liveSize(hex: string, size: number): number | undefined;
  /** When the live block was last written or restored (ms), or undefined when there is none. */
  lastWrittenMs(hex: string, size: number): Promise<number | undefined>;
  /** Moves a live block into quarantine; false when it is not there. */
  quarantineSync(hex: string, size: number): boolean;
  /** Moves a quarantined block back ('restored'); 'live' when it is already live, 'missing' when neither. */
  restoreSync(hex: string, size: number): RestoreOutcome;
  /** Deletes a quarantined copy; false when it was not there. */
  purgeSync(hex: string, size: number): boolean;
  /** The names of the store's partitions, sorted: GC lists the blocks one partition at a time. */
  listPartitions(): Promise<string[]>;
  listPartition(partition: string): Promise<ListedBlock[]>;
}

/** A block object as listed, with its last write (ms). */
export interface ListedObject extends ListedBlock {
  lastModifiedMs: number;
}

/**
 * A remote store's quarantine, for the collector of a shared catalog (engine/gc/shared-collector.ts):
 * a quarantined block lives under another key, reads fall back to it.
 */
export interface MovableBlockStore extends BlockStore {
  /** Moves a live block into quarantine; false when it is not live. */
  quarantine(hex: string, size: number): Promise<boolean>;
  /** 'live' (a copy in quarantine beside it goes), 'restored' (moved back) or 'missing'. */
  restore(hex: string, size: number): Promise<'live' | 'restored' | 'missing'>;
  /** Deletes a quarantined copy. */
  purge(hex: string, size: number): Promise<void>;
  /** Live or quarantined block objects, a page at a time. */
  list(area: 'blocks' | 'quarantine', after?: string): Promise<{ blocks: ListedObject[]; next?: string }>;
}
