// Ingests that go on after their part was acknowledged (a "live" ingest, docs/architecture.md
// "Resumable uploads"): kept for the session's next part for a moment, else drained and closed;
// what a closed one stored after its last answer is kept for the next part or the commit, which
// record those blocks with their own. This node's memory only: a restart loses both, and the
// next part replays the staged tail instead.

import type { Logger } from '../base/log.js';
import type { OpenSession, SessionRecord, StoredBlock } from '../store/index.js';
import type { PartIngest, PartResult } from './part-ingest.js';

/**
 * How long an acknowledged part's ingest waits for the session's next part before it drains and
 * closes (it holds its memory reservation meanwhile). A client sending parts back to back asks
 * for the next one within a round trip.
 */
const LIVE_IDLE_MS = 100;

/** An ingest that goes on after its part was acknowledged, for the session's next part. */
interface LiveIngest {
  ingest: PartIngest;
  /** The session offset its bytes end at: the acknowledged offset. */
  offset: number;
  idle: NodeJS.Timeout;
}

/**
 * The blocks a live ingest stored after its last answer, from the session's tailStart on, when
 * it drained and closed: not recorded, but stored, so the next part (or the commit) replays the
 * staged tail after them and records them with its own.
 */
export interface StoredOfTail {
  /** The session offset the ingest ended at: the entry holds while the record is still there. */
  offset: number;
  blocks: StoredBlock[];
  bytes: number;
}

export class LiveParts {
  /** By session id. */
  private readonly live = new Map<string, LiveIngest>();
  /** By session id: what closed live ingests stored after their last answer (lost with the process). */
  private readonly stored = new Map<string, StoredOfTail>();

  constructor(private readonly log: Logger) {}

  /**
   * The session's live ingest, continued with this part, when it ends at the part's offset and
   * can go on; otherwise none (one that cannot continue is closed).
   */
  continue(leased: OpenSession, length: number): PartIngest | undefined {
    const live = this.detach(leased.id);
    if (!live) return undefined;
    if (live.offset === leased.offset && live.ingest.canContinue && length <= live.ingest.bodyLimit) {
      live.ingest.continuePart(length);
      return live.ingest;
    }
    void this.closeIngest(leased.id, live);
    return undefined;
  }

  /** Keeps an acknowledged part's ingest for the session's next part, for a while. */
  keep(id: string, ingest: PartIngest, offset: number): void {
    ingest.onResume = () => {};
    ingest.onError = (err) => {
      // Everything before the failure was acknowledged and staged; the next part starts afresh.
      if (this.live.get(id)?.ingest === ingest) this.discard(id);
      this.log.warn('uploads: ingest failed after its part was acknowledged', { session: id, err: String(err) });
    };
    const idle = setTimeout(() => void this.close(id), LIVE_IDLE_MS);
    idle.unref();
    this.live.set(id, { ingest, offset, idle });
  }

  /**
   * Lets the session's live ingest drain and close, if it has one (its kept hash then covers the
   * acknowledged bytes, and the next part starts from the staged tail).
   */
  async close(id: string): Promise<void> {
    const live = this.detach(id);
    if (live) await this.closeIngest(id, live);
  }

  /** The session's live ingest, drained and closed: what it stored since its last answer, and the bytes after. */
  async take(id: string): Promise<PartResult | undefined> {
    const live = this.detach(id);
    return live && this.drain(live);
  }

  /** The blocks a closed live ingest stored at the start of the session's staged tail, while they fit its record. */
  storedOfTail(record: SessionRecord): StoredOfTail | undefined {
    const stored = this.stored.get(record.id);
    if (stored && stored.offset === record.offset && stored.bytes <= record.offset - record.tailStart) return stored;
    this.stored.delete(record.id);
    return undefined;
  }

  /** What closed ingests stored of the session's tail is on record now (or the session is gone). */
  forgetStored(id: string): void {
    this.stored.delete(id);
  }

  /** The digests of every block stored of tails and not yet recorded: garbage collection keeps them. */
  *storedDigests(): Iterable<Buffer> {
    for (const { blocks } of this.stored.values()) for (const b of blocks) yield Buffer.from(b.hex, 'hex');
  }

  /** Drops the session's live ingest at once (the session ends). */
  discard(id: string): void {
    this.detach(id)?.ingest.abort();
  }

  /** Drops every live ingest (the service stops). */
  discardAll(): void {
    for (const id of [...this.live.keys()]) this.discard(id);
  }

  /** Drains a live ingest and keeps what it stored after its last answer (storedOfTail). */
  private async closeIngest(id: string, live: LiveIngest): Promise<void> {
    const drained = await this.drain(live);
    if (!drained) return;
    const bytes = drained.blocks.reduce((n, b) => n + b.size, 0);
    if (bytes > 0) this.stored.set(id, { offset: live.offset, blocks: drained.blocks, bytes });
    drained.free();
  }

  /** Takes the session's live ingest out of `live`, its idle timer stopped. */
  private detach(id: string): LiveIngest | undefined {
    const live = this.live.get(id);
    if (!live) return undefined;
    this.live.delete(id);
    clearTimeout(live.idle);
    return live;
  }

  private async drain(live: LiveIngest): Promise<PartResult | undefined> {
    try {
      return await live.ingest.endPart();
    } catch {
      // Failed after its part was recorded: the record has everything, the next part starts afresh.
      return undefined;
    }
  }
}
