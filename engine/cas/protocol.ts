// The messages between the blob engine and its block tasks (workers/ingest.ts runs
// engine/cas/block-task.ts): the engine owns them, the worker imports them.
import type { BlockStoreLocation, StoredBlock } from '../store/index.js';
import type { SegmentWindow } from './segment-ring.js';

/** Hashing and storing consecutive blocks: block i is [bounds[i], bounds[i + 1]). */
export interface StoreTask extends SegmentWindow {
  bounds: number[];
  /** Block i's SHA-256 in hex when the scanning thread computed it (native pair), else hashed here. */
  hexes?: string[];
  store: BlockStoreLocation;
  /** Write every block even when an intact copy exists (security on: store time tells nothing of others' data). */
  alwaysWrite?: boolean;
}

/** A store task's answer: the blocks stored in order, and, when one failed, why (the blocks before it are stored). */
export interface StoreTaskResult {
  blocks: StoredBlock[];
  error?: string;
}

export interface VerifyTask {
  store: BlockStoreLocation;
  /** The digest the blob's id names. */
  expectedHex: string;
  blocks: Array<{ hex: string; size: number }>;
}

export interface VerifyTaskResult {
  digestHex: string;
  bytesRead: number;
  /** Blocks whose bytes no longer hash to their id. */
  corruptBlocks: string[];
}

