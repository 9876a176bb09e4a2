// Which store tasks of a remote block store (S3) run on the main thread instead of a worker.
//
// A block PUT is a request the event loop waits on, not work that blocks it. Handed to a worker
// it costs the node more CPU than where it was asked for: the task's hop and the worker's own
// event loop around one request (measured on pg-s3, docs/performance.md issue 40: 0.71-0.86 ms of
// worker CPU per 64 KiB document block, 0.09-0.56 ms more on the main thread; a GiB of ingest 2.77
// against 3.12 CPU-s). Workers stay for what the main thread cannot take on without delaying requests: a
// task larger than LOCAL_STORE_TASK_MAX_BYTES while this thread's event loop was busy at least
// LOCAL_STORE_BUSY_FRACTION of the last LOCAL_STORE_LOAD_WINDOW_MS (many uploads at once spread
// their PUTs, and the kernel's copy of their bytes, over the workers' cores), and a larger task
// whose blocks the scanning thread did not hash (no native SHA-256 pair): hashing megabytes here
// would hold up every request for milliseconds.
import { performance } from 'node:perf_hooks';
import type { BlockWriter } from '../store/index.js';
import { LOCAL_STORE_BUSY_FRACTION, LOCAL_STORE_LOAD_WINDOW_MS, LOCAL_STORE_TASK_MAX_BYTES } from '../base/limits.js';

/** A store on this thread and the rule for which tasks it takes (./store-queue.ts). */
export interface LocalStores {
  writer: BlockWriter;
  /** Whether a task of `bytes` runs here; `hashed`: its blocks' SHA-256 are known (StoreTask.hexes). */
  takes(bytes: number, hashed: boolean): boolean;
}

/**
 * How busy this thread's event loop was: the fraction of the last whole window it ran, read
 * lazily (no timer). A window without calls counts whole: after a quiet spell, the load is low.
 */
export class EventLoopLoad {
  private mark = performance.eventLoopUtilization();
  private markedAt = performance.now();
  private last = 0;

  constructor(private readonly windowMs: number) {}

  busy(): number {
    const now = performance.now();
    if (now - this.markedAt >= this.windowMs) {
      const current = performance.eventLoopUtilization();
      this.last = performance.eventLoopUtilization(current, this.mark).utilization;
      this.mark = current;
      this.markedAt = now;
    }
    return this.last;
  }
}

/** The main thread's rule for `writer` (a remote store's). */
export function localStores(writer: BlockWriter, load: { busy(): number } = new EventLoopLoad(LOCAL_STORE_LOAD_WINDOW_MS)): LocalStores {
  return { writer, takes: (bytes, hashed) => bytes <= LOCAL_STORE_TASK_MAX_BYTES || (hashed && load.busy() < LOCAL_STORE_BUSY_FRACTION) };
}
