// Garbage collection of block files: mark, quarantine, purge. Runs inside the server process
// (it owns the catalog and sees every upload). No HTTP here: server/gc-api.ts is the endpoint.
// The design and the race analysis are in docs/architecture.md ("Garbage collection"). One file
// above 400 lines: the publication guard and the three phases keep one safety argument, which
// is checked by reading them together.

import { randomUUID } from 'node:crypto';
import type { BlockRoots } from '../cas/index.js';
import type { GcConfig } from '../base/config.js';
import { SvcError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { EmbeddedBlobCatalog, EmbeddedBlockStore, GcCatalog, PublicationGuard, Receipt, StoredBlock } from '../store/index.js';
import type { Collector } from './collector.js';
import { type GcAgeOverrides, type GcPhase, type GcReport, type GcState, gcState, newReport } from './report.js';
import { type FencedIngest, IngestFence } from './ingest-fence.js';
import { Reclaimer } from './reclaim.js';
import { GcSchedule } from './schedule.js';

interface RunState {
  report: GcReport;
  step: string;
  ages: { minAgeMs: number; quarantineAgeMs: number };
  done: Promise<GcReport>;
}

const RUNS_KEPT = 50;
/** Digests per mark write transaction. */
const MARK_BATCH = 10_000;
/** Candidates settled per synchronous step (one LMDB commit, then the renames). */
const MOVE_BATCH = 256;
/** Purged receipts are kept at least this long (a resumable session lives up to 24 h). */
const MIN_TOMBSTONE_MS = 24 * 3600_000;

const gcRunning = () => new SvcError('conflict', 'gc_running', 'A garbage collection run is in progress; see GET /api/ops/v1/gc');

class Stopped extends Error {}

interface Deps {
  config: GcConfig;
  catalog: GcCatalog;
  manifests: EmbeddedBlobCatalog;
  blocks: EmbeddedBlockStore;
  roots: readonly BlockRoots[];
  log: Logger;
}

/** `Engine.gc`: one run at a time, on demand (server/gc-api.ts) or on the SVC_GC_INTERVAL schedule. */
export class GarbageCollector implements Collector, PublicationGuard {
  private readonly catalog: GcCatalog;
  readonly fence: IngestFence;
  private readonly reclaimer: Reclaimer;
  /** Set from the start of a run's marking to its end: publications mark their blocks too. */
  private marking = false;
  private current?: RunState;

  /** The ages of the run in progress. */
  private get ages(): RunState['ages'] {
    return this.current?.ages ?? this.deps.config;
  }
  private last?: GcReport;
  /** A scheduled run finding an API run in progress waits for the next interval. */
  private readonly schedule: GcSchedule;
  private stopping = false;
  /** Blocks the guard moved back during the current run (reported with it). */
  private guardRestored = 0;

  constructor(private readonly deps: Deps) {
    this.schedule = new GcSchedule(deps.config.intervalMs, () => (this.current ? Promise.resolve() : this.run('run', true, 'schedule')), deps.log);
    this.catalog = deps.catalog;
    this.last = this.catalog.lastRun<GcReport>();
    this.fence = new IngestFence(Math.min(60_000, deps.config.quarantineAgeMs), deps.log);
    deps.manifests.setGuard(this);
    this.reclaimer = new Reclaimer({
      state: this.catalog,
      manifests: deps.manifests,
      blocks: deps.blocks,
      roots: deps.roots,
      fence: this.fence,
      log: deps.log,
    });
    this.reclaimer.resume();
  }

  /** Takes the blocks a failed or aborted ingest wrote: those nothing needs are deleted at once (./reclaim.ts). */
  reclaim(blocks: StoredBlock[]): void {
    this.reclaimer.reclaim(blocks);
  }

  /** Wraps an ingest so that purge knows while it may still reference blocks it found on disk. */
  track<T extends FencedIngest>(ingest: T): T {
    return this.fence.track(ingest);
  }

  /** The last finished run (also across restarts), for the ops snapshot. */
  lastRun(): GcReport | undefined {
    return this.last;
  }

  quarantinedBlocks(): number {
    return this.catalog.receiptCount();
  }

  get running(): boolean {
    return this.current !== undefined;
  }

  state(): GcState {
    return gcState(this.current, this.last, this.quarantinedBlocks(), this.deps.config, this.schedule, { ...this.reclaimer.totals });
  }


  /** One process owns an embedded catalog: nobody to tell. */
  announce(): void {}

  /** Every run of an embedded catalog reads every root itself. */
  holdRoots(): Promise<void> {
    return Promise.resolve();
  }

  /** Starts the schedule (SVC_GC_INTERVAL; off when 0): each scheduled run is `run` with apply. */
  start(): void {
    this.schedule.start();
  }

  /** Stops the schedule and ends a run in progress at its next step (its report says so). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.schedule.stop();
    await this.current?.done.catch(() => {});
    await this.reclaimer.idle();
  }

  /**
   * One run; 409 gc_running while another is in progress. Dry unless `apply`. `ages` overrides
   * SVC_GC_MIN_AGE / SVC_GC_QUARANTINE_AGE for this run only (logged, and named in its report).
   */
  run(phase: GcPhase, apply: boolean, trigger: 'api' | 'schedule' = 'api', ages: GcAgeOverrides = {}): Promise<GcReport> {
    if (this.current) return Promise.reject(gcRunning());
    if (this.stopping) return Promise.reject(new SvcError('unavailable', 'gc_stopped', 'The server is shutting down'));
    const report = newReport(phase, apply, trigger, ages);
    const { minAgeMs, quarantineAgeMs } = this.deps.config;
    const effective = { minAgeMs: ages.minAgeMs ?? minAgeMs, quarantineAgeMs: ages.quarantineAgeMs ?? quarantineAgeMs };
    if (report.overrides) this.deps.log.warn('gc: ages overridden for this run', { runId: report.runId, ...effective, configured: { minAgeMs, quarantineAgeMs } });
    const current: RunState = { report, step: 'starting', ages: effective, done: undefined as unknown as Promise<GcReport> };
    this.current = current;
    this.guardRestored = 0;
    current.done = this.execute(current).finally(() => {
      this.current = undefined;
    });
    return current.done;
  }

  private async execute(current: { report: GcReport; step: string }): Promise<GcReport> {
    const { report } = current;
    const log = this.deps.log;
    log.info('gc: run started', { runId: report.runId, phase: report.phase, apply: report.apply, trigger: report.trigger });
    try {
      // Taken before marking: an ingest that started later found no quarantined block on disk
      // unless it also sees its receipt (see purge).
      const fence = this.fence.oldestStart();
      current.step = 'mark';
      await this.mark(report);
      if (report.phase !== 'purge') {
        current.step = report.phase === 'mark' ? 'count candidates' : 'quarantine';
        await this.sweep(report, report.phase !== 'mark' && report.apply, report.phase === 'mark');
      }
      if (report.phase !== 'mark') {
        current.step = report.phase === 'quarantine' ? 'restore' : 'purge';
        await this.settleReceipts(report, report.apply, fence, report.phase !== 'quarantine');
      }
    } catch (err) {
      report.error = err instanceof Stopped ? 'stopped: the server is shutting down' : String((err as Error)?.message ?? err);
      if (!(err instanceof Stopped)) log.error('gc: run failed', { runId: report.runId, err: String((err as Error)?.stack ?? err) });
    } finally {
      this.marking = false;
      report.restored += this.guardRestored;
      report.finishedAt = new Date().toISOString();
      report.quarantineBlocks = this.quarantinedBlocks();
      await this.saveReport(report).catch((err) => log.error('gc: report not saved', { err: String(err) }));
      this.last = report;
      // The mark set is only needed during a run.
      await this.catalog.clearMarks().catch(() => {});
    }
    log.info('gc: run finished', { ...report });
    if (report.error && !report.error.startsWith('stopped')) throw new Error(report.error);
    return report;
  }

  private async saveReport(report: GcReport): Promise<void> {
    await this.catalog.saveRun(report, RUNS_KEPT);
  }

  private checkStop(): void {
    if (this.stopping) throw new Stopped();
  }

  private skip(report: GcReport, reason: string, n = 1): void {
    report.skipped.count += n;
    report.skipped.reasons[reason] = (report.skipped.reasons[reason] ?? 0) + n;
  }

  // ---- publication guard (inside each publication's LMDB transaction) ----

  referencedSync(key: Buffer, hex: string, size: number): void {
    if (this.marking) this.catalog.markSync(key);
    const receipt = this.catalog.receipt(key);
    if (receipt) {
      const where = this.deps.blocks.restoreSync(hex, size);
      if (where === 'missing') throw new Error(`gc: block ${hex}-${size} is quarantined but its file is gone`);
      // A copy left in quarantine next to a live file is a duplicate.
      if (where === 'live') this.deps.blocks.purgeSync(hex, size);
      this.catalog.removeReceiptSync(key);
      this.guardRestored++;
      return;
    }
    if (this.catalog.hasTombstone(key)) {
      // Purged: fine only if the bytes were written again since (the upload had them).
      if (this.deps.blocks.liveSize(hex, size) !== size) throw new Error(`gc: block ${hex}-${size} was purged`);
      this.catalog.removeTombstoneSync(key);
    }
  }

  // ---- mark ----

  /**
   * Every block referenced by a published manifest or a block-roots source goes into
   * `gc_marks` (LMDB, not memory). From `marking = true` on, publications mark their own blocks
   * in their transaction, so nothing published during the pass is missed.
   */
  private async mark(report: GcReport): Promise<void> {
    await this.catalog.clearMarks();
    this.marking = true;
    // Barrier: publications whose guard ran before `marking` was set commit before this one, so
    // the reads below see them.
    await this.catalog.marksCommitted();
    let after: string | undefined;
    do {
      this.checkStop();
      const page = this.deps.manifests.referencedPage(after, MARK_BATCH);
      await this.writeMarks(page.digests);
      after = page.next;
    } while (after !== undefined);
    for (const root of this.deps.roots) {
      let batch: Buffer[] = [];
      for await (const digest of root.digests()) {
        batch.push(Buffer.from(digest));
        if (batch.length >= MARK_BATCH) {
          this.checkStop();
          await this.writeMarks(batch);
          batch = [];
        }
      }
      await this.writeMarks(batch);
    }
    report.markedBlocks = this.catalog.markedCount();
  }

  private async writeMarks(digests: Buffer[]): Promise<void> {
    await this.catalog.mark(digests);
  }

  // ---- quarantine ----

  /**
   * Walks the block files one partition at a time (bounded memory), finds the unmarked ones,
   * and (apply) moves those older than SVC_GC_MIN_AGE to quarantine with a receipt.
   */
  private async sweep(report: GcReport, apply: boolean, countOnly: boolean): Promise<void> {
    const { blocks } = this.deps;
    for (const partition of await blocks.listPartitions()) {
      this.checkStop();
      const listed = await blocks.listPartition(partition);
      let batch: Candidate[] = [];
      for (const { hex, size } of listed) {
        const key = Buffer.from(hex, 'hex');
        if (this.catalog.isMarked(key)) continue;
        report.candidates++;
        if (countOnly) continue;
        batch.push({ hex, size, key, createdAt: 0 });
        if (batch.length >= MOVE_BATCH) {
          await this.settleCandidates(report, batch, apply);
          batch = [];
        }
      }
      if (batch.length) await this.settleCandidates(report, batch, apply);
    }
  }

  private async settleCandidates(report: GcReport, batch: Candidate[], apply: boolean): Promise<void> {
    const { blocks, manifests } = this.deps;
    const eligible: Candidate[] = [];
    for (const c of batch) {
      const writtenMs = await blocks.lastWrittenMs(c.hex, c.size);
      if (writtenMs === undefined) {
        this.skip(report, 'vanished');
        continue;
      }
      const record = manifests.blockRecord(c.key);
      const lastUse = Math.max(writtenMs, record ? (record.touchedAt ?? record.createdAt) : 0);
      if (Date.now() - lastUse < this.ages.minAgeMs) {
        this.skip(report, 'younger than SVC_GC_MIN_AGE');
        continue;
      }
      c.createdAt = record?.createdAt ?? Math.floor(writtenMs);
      eligible.push(c);
    }
    if (!apply) {
      for (const c of eligible) {
        report.quarantined.count++;
        report.quarantined.bytes += c.size;
      }
      return;
    }
    this.checkStop();
    // One synchronous step: re-check and write the receipts (committed), then move the files.
    // No publication can run in between (same thread); one that runs after sees the receipt.
    const now = Date.now();
    const accepted: Candidate[] = [];
    this.catalog.atomicallySync(() => {
      for (const c of eligible) {
        if (this.catalog.hasReceipt(c.key)) {
          // A reclaim of a failed upload's blocks holds it (./reclaim.ts).
          this.skip(report, 'being reclaimed');
          continue;
        }
        if (this.catalog.isMarked(c.key)) {
          this.skip(report, 'referenced during the run');
          continue;
        }
        const record = manifests.blockRecord(c.key);
        if (record && now - (record.touchedAt ?? record.createdAt) < this.ages.minAgeMs) {
          this.skip(report, 'younger than SVC_GC_MIN_AGE');
          continue;
        }
        this.catalog.putReceiptSync(c.key, { size: c.size, quarantinedAt: now, runId: report.runId, createdAt: c.createdAt });
        this.catalog.removeTombstoneSync(c.key);
        manifests.forgetBlockSync(c.key);
        accepted.push(c);
      }
    });
    const vanished: Candidate[] = [];
    for (const c of accepted) {
      if (blocks.quarantineSync(c.hex, c.size)) {
        report.quarantined.count++;
        report.quarantined.bytes += c.size;
      } else {
        vanished.push(c);
      }
    }
    if (vanished.length) {
      this.skip(report, 'vanished', vanished.length);
      await this.catalog.atomically(() => {
        for (const c of vanished) {
          if (this.catalog.receipt(c.key)?.runId === report.runId) this.catalog.removeReceiptSync(c.key);
        }
      });
    }
  }

  // ---- purge ----

  /**
   * Every receipt whose block is marked again is moved back (a resumable part or document
   * content that deduplicated the block just before it was quarantined). With `purge`, the
   * receipts older than SVC_GC_QUARANTINE_AGE (and than the fence) whose block is still
   * unmarked lose their quarantined copy and become tombstones; old tombstones are forgotten.
   */
  private async settleReceipts(report: GcReport, apply: boolean, fence: number, purge: boolean): Promise<void> {
    const runStart = Date.parse(report.startedAt);
    const { blocks, manifests } = this.deps;
    let after: Buffer | undefined;
    for (;;) {
      this.checkStop();
      const page: Array<{ key: Buffer; receipt: Receipt }> = [];
      for (const { key, receipt } of this.catalog.receipts(after, MOVE_BATCH + 1)) {
        if (after && key.equals(after)) continue;
        page.push({ key: Buffer.from(key), receipt });
        if (page.length === MOVE_BATCH) break;
      }
      if (page.length === 0) break;
      after = page[page.length - 1].key;
      const now = Date.now();
      const purgeable: Array<{ key: Buffer; hex: string; receipt: Receipt; live: boolean }> = [];
      for (const { key, receipt } of page) {
        const hex = key.toString('hex');
        if (this.catalog.isMarked(key)) {
          if (!apply) {
            report.restored++;
            continue;
          }
          // Referenced again (a session's part, document content): back to the live area.
          const where = blocks.restoreSync(hex, receipt.size);
          if (where === 'missing') {
            this.deps.log.error('gc: a referenced block is neither live nor in quarantine', { block: `${hex}-${receipt.size}` });
            this.skip(report, 'referenced but missing');
            continue;
          }
          if (where === 'live') blocks.purgeSync(hex, receipt.size);
          this.catalog.atomicallySync(() => {
            this.catalog.removeReceiptSync(key);
            manifests.restoreBlockSync(key, { size: receipt.size, createdAt: receipt.createdAt, touchedAt: now });
          });
          report.restored++;
          continue;
        }
        if (!purge) continue;
        if (receipt.quarantinedAt >= runStart) {
          this.skip(report, 'quarantined by this run');
          continue;
        }
        if (now - receipt.quarantinedAt < this.ages.quarantineAgeMs) {
          this.skip(report, 'younger than SVC_GC_QUARANTINE_AGE');
          continue;
        }
        if (receipt.quarantinedAt >= fence) {
          this.skip(report, 'uploads in flight since its quarantine');
          continue;
        }
        const live = blocks.liveSize(hex, receipt.size) === receipt.size;
        if (!apply) {
          if (live) this.skip(report, 'written again');
          else {
            report.purged.count++;
            report.purged.bytes += receipt.size;
          }
          continue;
        }
        purgeable.push({ key, hex, receipt, live });
      }
      // One synchronous step per page: settle the receipts in one transaction (each checked
      // again), then delete the copies of those settled.
      const settled = new Set<Buffer>();
      if (purgeable.length) {
        this.catalog.atomicallySync(() => {
          for (const { key, receipt, live } of purgeable) {
            const again = this.catalog.receipt(key);
            if (!again || again.quarantinedAt !== receipt.quarantinedAt || this.catalog.isMarked(key)) continue;
            this.catalog.removeReceiptSync(key);
            if (!live) this.catalog.putTombstoneSync(key, { size: receipt.size, quarantinedAt: receipt.quarantinedAt, purgedAt: now, runId: report.runId });
            settled.add(key);
          }
        });
      }
      for (const { key, hex, receipt, live } of purgeable) {
        if (!settled.has(key)) {
          this.skip(report, 'referenced during the run');
          continue;
        }
        const deleted = blocks.purgeSync(hex, receipt.size);
        if (live) this.skip(report, 'written again');
        else if (deleted) {
          report.purged.count++;
          report.purged.bytes += receipt.size;
        } else {
          // Moved back by an upload between the check and the unlink: it is live again.
          this.skip(report, 'written again');
        }
      }
      if (page.length < MOVE_BATCH) break;
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (apply && purge) await this.forgetTombstones();
  }

  private async forgetTombstones(): Promise<void> {
    const keep = Math.max(this.deps.config.quarantineAgeMs, MIN_TOMBSTONE_MS);
    const cutoff = Date.now() - keep;
    let expired: Buffer[] = [];
    for (const { key, tombstone } of this.catalog.tombstones()) {
      if (tombstone.purgedAt < cutoff) expired.push(Buffer.from(key));
      if (expired.length >= MARK_BATCH) {
        const batch = expired;
        expired = [];
        await this.catalog.atomically(() => batch.forEach((k) => this.catalog.removeTombstoneSync(k)));
      }
    }
    if (expired.length) await this.catalog.atomically(() => expired.forEach((k) => this.catalog.removeTombstoneSync(k)));
  }
}

interface Candidate {
  hex: string;
  size: number;
  key: Buffer;
  createdAt: number;
}
