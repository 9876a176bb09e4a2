// The block store's write side for worker threads: a module of its own so that a block task
// loads the block store alone, not the catalog (LMDB) and the rest of the storage layer.
import type { BlockStoreLocation, BlockWriter } from './block-store.js';
import { FsBlockStore } from './fs/block-store.js';

const writers = new Map<string, BlockWriter>();

/** The block store at `location`, for a worker thread's block tasks (one instance per thread). */
export function blockWriter(location: BlockStoreLocation): BlockWriter {
  const key = `${location.durability}:${location.root}`;
  let writer = writers.get(key);
  if (!writer) writers.set(key, (writer = new FsBlockStore(location.root, location.durability)));
  return writer;
}
