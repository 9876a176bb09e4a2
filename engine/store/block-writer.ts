// The block store's write side for worker threads: a module of its own so that a block task
// loads the block store alone, not the catalog (LMDB) and the rest of the storage layer. The S3
// store (and the AWS SDK) is loaded only by a worker that writes to S3.
import type { BlockStoreLocation, BlockWriter } from './block-store.js';
import { FsBlockStore } from './fs/block-store.js';

const writers = new Map<string, BlockWriter | Promise<BlockWriter>>();

/** The block store at `location`, for a worker thread's block tasks (one instance per thread). */
export function blockWriter(location: BlockStoreLocation): BlockWriter | Promise<BlockWriter> {
  const key = JSON.stringify(location);
  let writer = writers.get(key);
  if (!writer) {
    writer = location.kind === 'fs'
      ? new FsBlockStore(location.root, location.durability)
      : import('./s3/block-store.js').then(({ S3BlockStore }) => new S3BlockStore(location));
    writers.set(key, writer);
  }
  return writer;
}
