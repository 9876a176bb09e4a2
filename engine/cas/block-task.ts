// Block tasks: store consecutive blocks of an upload, verify a blob. Worker threads run them; the
// main thread runs the store tasks of an S3 store it takes itself (./local-stores.ts).
import { createHash } from 'node:crypto';
import { Xxh64, xxh64 } from '@node-rs/xxhash';
import type { BlockWriter, PutOutcome, StoredBlock } from '../store/block-store.js';
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

/**
 * Stores the task's blocks. An embedded store writes them one after another on this thread; a
 * remote store's writes (promises) run concurrently, each task's at once. On a worker thread the
 * store is the thread's own for `task.store`; the main thread passes its `writer` (./store-queue.ts).
 */
export async function runStoreTask(task: StoreTask, writer?: BlockWriter): Promise<StoreTaskResult> {
  const data = view(task);
  const store = writer ?? (await blockWriter(task.store));
  const count = task.bounds.length - 1;
  const stored: Array<StoredBlock | undefined> = new Array(count);
  const pending: Promise<void>[] = [];
  let error: string | undefined;
  const fail = (err: unknown) => void (error ??= String((err as Error)?.stack ?? err));
  for (let i = 0; i < count && error === undefined; i++) {
    const pieces = data.pieces(task.bounds[i], task.bounds[i + 1]);
    const hex = task.hexes?.[i] ?? sha256Hex(pieces);
    const checksum = pieces.length === 1 ? xxh64(pieces[0]) : pieces.reduce((h, p) => h.update(p), new Xxh64()).digest();
    const size = task.bounds[i + 1] - task.bounds[i];
    const record = (outcome: PutOutcome) => {
      stored[i] = outcome === 'written' ? { hex, size, checksum, fresh: true, written: true } : { hex, size, checksum, fresh: outcome === 'restored' };
    };
    try {
      const outcome = store.put(hex, size, pieces, task.alwaysWrite);
      if (typeof outcome === 'string') record(outcome);
      else pending.push(outcome.then(record, fail));
    } catch (err) {
      fail(err);
    }
  }
  await Promise.all(pending);
  const blocks = stored.filter((b): b is StoredBlock => b !== undefined);
  // On a failure the blocks stored are reported all the same: the failed ingest reclaims them.
  return error === undefined ? { blocks } : { blocks, error };
}

/**
 * Re-reads every block of a blob and recomputes the whole-object SHA-256 (worker side). Only when
 * that fails is each block hashed again, to name the corrupt ones.
 */
export async function runVerifyTask(task: VerifyTask): Promise<VerifyTaskResult> {
  const store = await blockWriter(task.store);
  const whole = createHash('sha256');
  let bytesRead = 0;
  for (const { hex, size } of task.blocks) {
    const bytes = await store.readWhole(hex, size);
    whole.update(bytes);
    bytesRead += bytes.length;
  }
  const digestHex = whole.digest('hex');
  const corruptBlocks: string[] = [];
  if (digestHex !== task.expectedHex) {
    for (const { hex, size } of task.blocks) {
      if (sha256Hex([await store.readWhole(hex, size)]) !== hex) corruptBlocks.push(`sha-256:${hex}:${size}`);
    }
  }
  return { digestHex, bytesRead, corruptBlocks };
}
