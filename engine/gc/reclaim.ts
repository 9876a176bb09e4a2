// The blocks a failed (or aborted) ingest wrote are reclaimed at once, not after SVC_GC_MIN_AGE:
// on a nearly full disk they would otherwise keep it full and fail every later upload.
//
// The block may meanwhile be needed by someone else: an ingest that found it on disk (dedup) and
// has not published yet, a resumable part whose blocks are on their way to the session's record,
// a publication. So, with GC's own quarantine and receipts:
// 1. One synchronous step: a receipt for each block no block record names (no publication
//    referenced it), then the file moves to quarantine. From here on a store that needs the
//    block moves it back (it is then live again), and a publication that names it does too.
// 2. Wait for every store task in flight: a task that found the block live before step 1 has
//    reported it to its ingest by then.
// 3. One synchronous step: a block still held by a live ingest (the fence's claims), named by a
//    block record or by a block root (resumable sessions, document content), or live again, goes
//    back; the others become tombstones (a late reference then fails instead of dangling) and
//    their quarantined copies are deleted.
// `gc_reclaims` names the blocks between step 1 and the end: a restart finishes the work.

import { randomUUID } from 'node:crypto';
import type { BlockRoots } from '../cas/index.js';
import type { Logger } from '../base/log.js';
import type { EmbeddedBlobCatalog, EmbeddedBlockStore, GcCatalog, StoredBlock } from '../store/index.js';
import type { IngestFence } from './ingest-fence.js';

/** Receipts written here carry a run id with this prefix. */
const RECLAIM_RUN = 'reclaim-';

interface Moved {
  hex: string;
  size: number;
  key: Buffer;
  runId: string;
}

interface ReclaimDeps {
  state: GcCatalog;
  manifests: EmbeddedBlobCatalog;
  blocks: EmbeddedBlockStore;
  roots: readonly BlockRoots[];
  fence: IngestFence;
  log: Logger;
}

export class Reclaimer {
  private queue: Promise<void> = Promise.resolve();
  /** Blocks deleted since start. */
  readonly totals = { blocks: 0, bytes: 0 };

  constructor(private readonly deps: ReclaimDeps) {}

  /** Reclaims the blocks an ingest wrote before it failed; one reclaim at a time, in order. */
  reclaim(blocks: readonly StoredBlock[]): void {
    const candidates = new Map<string, number>();
    for (const b of blocks) if (b.written) candidates.set(b.hex, b.size);
    if (candidates.size === 0) return;
    this.queue = this.queue.then(() => this.run(candidates)).catch((err) => this.deps.log.error('gc: reclaiming a failed upload\'s blocks failed', { err: String((err as Error)?.stack ?? err) }));
  }

  /** Resolves once every reclaim asked for so far has ended. */
  idle(): Promise<void> {
    return this.queue;
  }

  /** At start (no ingest runs): finishes the reclaims a stop or a crash interrupted. */
  async resume(): Promise<void> {
    const { state, blocks } = this.deps;
    const moved: Moved[] = [];
    const done: Buffer[] = [];
    for (const { key, size } of state.pendingReclaims()) {
      const k = Buffer.from(key);
      const hex = k.toString('hex');
      const receipt = state.receipt(k);
      if (receipt?.runId.startsWith(RECLAIM_RUN)) moved.push({ hex, size, key: k, runId: receipt.runId });
      else {
        // Settled before the stop: deleted (a tombstone) or kept; the file may not have followed yet.
        if (!receipt && state.hasTombstone(k)) blocks.purgeSync(hex, size);
        else if (!receipt) blocks.restoreSync(hex, size);
        done.push(k);
      }
    }
    if (done.length) state.atomicallySync(() => done.forEach((k) => state.removePendingReclaimSync(k)));
    if (moved.length) await this.settle(moved);
  }

  private async run(candidates: Map<string, number>): Promise<void> {
    const moved = this.quarantineUnreferenced(candidates, `${RECLAIM_RUN}${randomUUID()}`);
    if (moved.length === 0) return;
    await Promise.allSettled(this.deps.fence.storeTasksInFlight());
    await this.settle(moved);
  }

  /** Step 1: receipts, then the files move to quarantine. */
  private quarantineUnreferenced(candidates: Map<string, number>, runId: string): Moved[] {
    const { state, manifests, blocks } = this.deps;
    const now = Date.now();
    const accepted: Moved[] = [];
    state.atomicallySync(() => {
      for (const [hex, size] of candidates) {
        const key = Buffer.from(hex, 'hex');
        if (manifests.blockRecord(key) || state.hasReceipt(key)) continue;
        state.putReceiptSync(key, { size, quarantinedAt: now, runId, createdAt: now });
        state.addPendingReclaimSync(key, size);
        accepted.push({ hex, size, key, runId });
      }
    });
    const moved: Moved[] = [];
    const vanished: Moved[] = [];
    for (const c of accepted) (blocks.quarantineSync(c.hex, c.size) ? moved : vanished).push(c);
    if (vanished.length) {
      // Not live (another reclaim, or GC, took it first): not ours to settle.
      state.atomicallySync(() => {
        for (const c of vanished) {
          if (state.receipt(c.key)?.runId === runId) state.removeReceiptSync(c.key);
          state.removePendingReclaimSync(c.key);
        }
      });
    }
    return moved;
  }

  /** Step 3: back to the live area if anything needs them, else deleted. */
  private async settle(moved: Moved[]): Promise<void> {
    const { state, manifests, blocks, roots, fence, log } = this.deps;
    const hexes = new Set(moved.map((c) => c.hex));
    // The roots first (their scan is asynchronous), then the claims and manifests in the same
    // turn as the settling step below, so nothing published in between is missed.
    const rooted = new Set<string>();
    for (const root of roots) {
      for await (const digest of root.digests()) {
        const hex = Buffer.from(digest).toString('hex');
        if (hexes.has(hex)) rooted.add(hex);
      }
    }
    const needed = fence.claimed(hexes);
    for (const hex of rooted) needed.add(hex);
    for (const c of moved) if (manifests.blockRecord(c.key)) needed.add(c.hex);
    const now = Date.now();
    const kept: Moved[] = [];
    const doomed: Moved[] = [];
    state.atomicallySync(() => {
      for (const c of moved) {
        const receipt = state.receipt(c.key);
        if (!receipt || receipt.runId !== c.runId) {
          // A publication moved it back, or GC settled it: no longer ours.
          state.removePendingReclaimSync(c.key);
          continue;
        }
        state.removeReceiptSync(c.key);
        if (needed.has(c.hex) || blocks.liveSize(c.hex, c.size) === c.size) {
          kept.push(c);
        } else {
          state.putTombstoneSync(c.key, { size: c.size, quarantinedAt: receipt.quarantinedAt, purgedAt: now, runId: c.runId });
          doomed.push(c);
        }
      }
    });
    for (const c of kept) {
      const where = blocks.restoreSync(c.hex, c.size);
      if (where === 'live') blocks.purgeSync(c.hex, c.size);
      else if (where === 'missing') log.error('gc: a block being reclaimed is neither live nor in quarantine', { block: `${c.hex}-${c.size}` });
    }
    let bytes = 0;
    let count = 0;
    for (const c of doomed) {
      // A store that moved it back meanwhile made it live again: the unlink then finds nothing.
      if (blocks.purgeSync(c.hex, c.size)) {
        count++;
        bytes += c.size;
      }
    }
    if (doomed.length || kept.length) state.atomicallySync(() => [...doomed, ...kept].forEach((c) => state.removePendingReclaimSync(c.key)));
    this.totals.blocks += count;
    this.totals.bytes += bytes;
    if (count || kept.length) log.info('gc: reclaimed the blocks of a failed upload', { deleted: count, bytes, kept: kept.length });
  }
}
