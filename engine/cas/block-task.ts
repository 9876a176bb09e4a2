// Block tasks (worker side): store consecutive blocks of an upload, verify a blob.
import { createHash } from 'node:crypto';
import { Xxh64, xxh64 } from '@node-rs/xxhash';
import type { StoredBlock } from '../store/block-store.js';
import { blockWriter } from '../store/block-writer.js';
import type { StoreTask, StoreTaskResult, VerifyTask, VerifyTaskResult } from './protocol.js';
import type { SegmentWindow } from './segment-ring.js';
import { SegmentedBytes } from './segmented-bytes.js';

const view = (w: SegmentWindow) => new SegmentedBytes(w.segments, w.segmentSize, w.first, w.end);

function sha256Hex(pieces: Uint8Array[]): string {
  const sha = createHash('sha256');
  for (const p of pieces) sha.update(p);
  return sha.digest('hex');
}

export function runStoreTask(task: StoreTask): StoreTaskResult {
  const data = view(task);
  const store = blockWriter(task.store);
  const blocks: StoredBlock[] = [];
  try {
    for (let i = 0; i + 1 < task.bounds.length; i++) {
      const pieces = data.pieces(task.bounds[i], task.bounds[i + 1]);
      const hex = task.hexes?.[i] ?? sha256Hex(pieces);
      const checksum = pieces.length === 1 ? xxh64(pieces[0]) : pieces.reduce((h, p) => h.update(p), new Xxh64()).digest();
      const size = task.bounds[i + 1] - task.bounds[i];
      const outcome = store.putSync(hex, size, pieces, task.alwaysWrite);
      blocks.push(outcome === 'written' ? { hex, size, checksum, fresh: true, written: true } : { hex, size, checksum, fresh: outcome === 'restored' });
    }
  } catch (err) {
    // The blocks written before the failure are reported: the failed ingest reclaims them.
    return { blocks, error: String((err as Error)?.stack ?? err) };
  }
  return { blocks };
}

/**
 * Re-reads every block of a blob and recomputes the whole-object SHA-256 (worker side). Only when
 * that fails is each block hashed again, to name the corrupt ones.
 */
export function runVerifyTask(task: VerifyTask): VerifyTaskResult {
  const store = blockWriter(task.store);
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
      if (sha256Hex([store.readSync(hex, size)]) !== hex) corruptBlocks.push(`sha-256:${hex}:${size}`);
    }
  }
  return { digestHex, bytesRead, corruptBlocks };
}
