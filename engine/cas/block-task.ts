import { createHash } from 'node:crypto';
import { Xxh64, xxh64 } from '@node-rs/xxhash';
import type { Durability } from '../config.js';
import { FsBlockStore } from '../store/fs-block-store.js';
import { type ChunkerSpec, type ScanState, findCut, freshScanState } from './chunkers.js';
import { SegmentedBytes } from './segmented-bytes.js';

/** One step of an upload's chunking, run on a worker: cut, hash and store every block it can. */
export interface ChunkTask {
  segments: SharedArrayBuffer[];
  segmentSize: number;
  first: number;
  end: number;
  blockStart: number;
  final: boolean;
  spec: ChunkerSpec;
  state: ScanState;
  root: string;
  durability: Durability;
}

export interface StoredBlock {
  hex: string;
  size: number;
  checksum: bigint;
  fresh: boolean;
}

export interface ChunkTaskResult {
  blocks: StoredBlock[];
  blockStart: number;
  state: ScanState;
}

const stores = new Map<string, FsBlockStore>();

function storeFor(root: string, durability: Durability): FsBlockStore {
  const key = `${durability}:${root}`;
  let store = stores.get(key);
  if (!store) stores.set(key, (store = new FsBlockStore(root, durability)));
  return store;
}

export function runChunkTask(task: ChunkTask): ChunkTaskResult {
  const data = new SegmentedBytes(
    task.segments.map((s) => new Uint8Array(s)),
    task.segmentSize,
    task.first,
    task.end,
  );
  const store = storeFor(task.root, task.durability);
  const blocks: StoredBlock[] = [];
  let start = task.blockStart;
  let state = task.state;
  for (;;) {
    const cut = findCut(task.spec, data, start, task.final, state);
    if (cut < 0) break;
    const pieces = data.pieces(start, cut);
    const sha = createHash('sha256');
    for (const p of pieces) sha.update(p);
    const hex = sha.digest('hex');
    const checksum = pieces.length === 1 ? xxh64(pieces[0]) : pieces.reduce((h, p) => h.update(p), new Xxh64()).digest();
    const size = cut - start;
    const fresh = store.putSync(hex, size, pieces);
    blocks.push({ hex, size, checksum, fresh });
    start = cut;
    state = freshScanState();
  }
  return { blocks, blockStart: start, state };
}

export interface VerifyTask {
  root: string;
  blocks: Array<{ hex: string; size: number }>;
}

export interface VerifyTaskResult {
  digestHex: string;
  bytesRead: number;
  /** Blocks whose bytes no longer hash to their id. */
  corruptBlocks: string[];
}

/**
 * Re-reads every block of a blob and recomputes the whole-object SHA-256 (worker side). Only when
 * that fails is each block hashed again, to name the corrupt ones.
 */
export function runVerifyTask(task: VerifyTask & { expectedHex: string }): VerifyTaskResult {
  const store = storeFor(task.root, 'relaxed');
  const whole = createHash('sha256');
  let bytesRead = 0;
  for (const { hex, size } of task.blocks) {
    const bytes = store.readSync(hex, size);
    whole.update(bytes);
    bytesRead += bytes.length;
  }
  const digestHex = whole.digest('hex');
  const corruptBlocks: string[] = [];
  if (digestHex !== task.expectedHex) {
    for (const { hex, size } of task.blocks) {
      if (createHash('sha256').update(store.readSync(hex, size)).digest('hex') !== hex) corruptBlocks.push(`sha-256:${hex}:${size}`);
    }
  }
  return { digestHex, bytesRead, corruptBlocks };
}
