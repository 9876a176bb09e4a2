import type { Piscina } from 'piscina';
import type { BlockStoreLocation, StoredBlock } from '../store/index.js';
import { runStoreTask } from './block-task.js';
import type { LocalStores } from './local-stores.js';
import type { StoreTask, StoreTaskResult } from './protocol.js';
import type { SegmentWindow } from './segment-ring.js';

/** What the queue needs of its ingest. */
interface StoreQueueHost {
  /** The segments holding stream bytes from `from` on (a task reads its blocks there). */
  window(from: number): SegmentWindow;
  /** The ingest has settled: results that arrive now are not its blocks any more. */
  settled(): boolean;
  /** A task ended after the ingest settled (the segments it read may now be released). */
  taskEndedLate(): void;
  /** Blocks were stored (or a task ended): the ingest may move on. */
  progressed(): void;
  failed(err: unknown): void;
}

/**
 * The blocks cut from one upload, in order, and their store tasks on the worker pool: at most
 * one task per worker thread at a time, each with about a segment's worth of consecutive blocks,
 * so the upload's next cut never waits behind a long queue of its own stores, and small blocks
 * do not each pay for a task. Block indexes are absolute: a continued part's ingest lets go of
 * the blocks an answer handed over (`takeStored`), so its memory does not grow with the object.
 */
export class StoreQueue {
  /** Blocks cut but not yet handed to the pool: [index, from, to, SHA-256 hex when the scanning thread hashed it]. */
  private readonly queue: Array<[number, number, number, string?]> = [];
  /** Stored blocks (undefined while their task runs), from index `base` on. */
  private readonly blocks: Array<StoredBlock | undefined> = [];
  /** Stream offset where each of `blocks` starts. */
  private readonly starts: number[] = [];
  private base = 0;
  /** Index of the first block not yet stored: bytes before its start can be let go. */
  private firstUnstored = 0;
  private inFlight = 0;
  private readonly tasks = new Set<Promise<unknown>>();
  /** Blocks written by tasks that ended after the ingest settled (or by the task that failed). */
  private readonly orphans: StoredBlock[] = [];

  constructor(
    private readonly pool: Piscina,
    private readonly store: BlockStoreLocation,
    private readonly maxTasks: number,
    private readonly segmentSize: number,
    private readonly host: StoreQueueHost,
    /** Write present blocks again (see StoreTask.alwaysWrite). */
    private readonly alwaysWrite = false,
    /** The store on this thread, for the tasks it takes (IngestDeps.local): none, every task on the pool. */
    private readonly local?: LocalStores,
  ) {}

  /** Queues the block [from, to); `hex` when the scanning thread already hashed it. */
  cut(from: number, to: number, hex?: string): void {
    this.queue.push([this.base + this.blocks.length, from, to, hex]);
    this.starts.push(from);
    this.blocks.push(undefined);
  }

  /** Nothing queued and no task running. */
  get idle(): boolean {
    return this.inFlight === 0 && this.queue.length === 0;
  }

  get tasksRunning(): boolean {
    return this.inFlight > 0;
  }

  /** Where the first block not yet stored starts, or `cutEnd` when every block cut is stored. */
  unstoredFrom(cutEnd: number): number {
    const i = this.firstUnstored - this.base;
    return i < this.starts.length ? this.starts[i]! : cutEnd;
  }

  /** Index of the first block not stored yet. */
  get storedCount(): number {
    return this.firstUnstored;
  }

  /** The stored blocks from index `from` up to the first unstored one; the queue forgets them. */
  takeStored(from: number): StoredBlock[] {
    const blocks = this.blocks.slice(from - this.base, this.firstUnstored - this.base) as StoredBlock[];
    const drop = this.firstUnstored - this.base;
    this.blocks.splice(0, drop);
    this.starts.splice(0, drop);
    this.base = this.firstUnstored;
    return blocks;
  }

  /** Every block from index `from` on (all stored once the queue is idle). */
  from(from: number): StoredBlock[] {
    return this.blocks.slice(from - this.base) as StoredBlock[];
  }

  /** Adds to `into` the digests among `hexes` of the blocks the queue holds. */
  collectHeld(hexes: ReadonlySet<string>, into: Set<string>): void {
    for (const b of this.blocks) if (b && hexes.has(b.hex)) into.add(b.hex);
  }

  /** Store tasks in flight: they may report blocks found on disk. */
  running(): Promise<unknown>[] {
    return [...this.tasks];
  }

  /** The blocks this ingest's tasks wrote themselves (not found present, not restored): a failed ingest reclaims them. */
  written(): StoredBlock[] {
    const written = this.orphans.splice(0);
    for (const b of this.blocks) if (b?.written) written.push(b);
    return written;
  }

  /** Hands queued blocks to the pool while a worker thread is free. */
  dispatch(): void {
    while (this.queue.length > 0 && this.inFlight < this.maxTasks) {
      const [first, from] = this.queue[0]!;
      const bounds = [from];
      const hexes: string[] = [];
      let count = 0;
      while (this.queue.length > 0 && (count === 0 || this.queue[0]![2] - from <= this.segmentSize)) {
        const [, , to, hex] = this.queue.shift()!;
        bounds.push(to);
        if (hex) hexes.push(hex);
        count++;
      }
      this.run(first, bounds, hexes.length === count ? hexes : undefined);
    }
  }

  private run(first: number, bounds: number[], hexes?: string[]): void {
    const task: StoreTask = { ...this.host.window(bounds[0]!), end: bounds[bounds.length - 1]!, bounds, hexes, store: this.store, alwaysWrite: this.alwaysWrite || undefined };
    this.inFlight++;
    const local = this.local?.takes(task.end - bounds[0]!, hexes !== undefined) ? this.local : undefined;
    const run = (local ? runStoreTask(task, local.writer) : this.pool.run(task, { name: 'store' })) as Promise<StoreTaskResult>;
    this.tasks.add(run);
    run.then(
      ({ blocks: stored, error }) => {
        this.tasks.delete(run);
        this.inFlight--;
        if (this.host.settled() || error !== undefined) {
          for (const block of stored) if (block.written) this.orphans.push(block);
          return error === undefined ? this.host.taskEndedLate() : this.host.failed(error);
        }
        stored.forEach((block, i) => (this.blocks[first + i - this.base] = block));
        while (this.firstUnstored < this.base + this.blocks.length && this.blocks[this.firstUnstored - this.base]) this.firstUnstored++;
        this.dispatch();
        this.host.progressed();
      },
      (err) => {
        this.tasks.delete(run);
        this.inFlight--;
        this.host.failed(err);
      },
    );
  }
}
