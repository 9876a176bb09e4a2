// The resumable part protocol on top of the streaming core (engine/cas/ingest.ts). A part's body
// continues its object: the bytes after the object's last cut (its staged tail) are replayed
// first, the object's whole hash is kept on the scanning thread under the session's key, and the
// part ends with the blocks it cut and a new tail instead of a manifest. A part large enough may
// be acknowledged before its pipeline drains (ackPart) and continued by the next part of the
// same session on the same ingest (continuePart).

import { copyInto } from '../cas/index.js';
import { type Decision, Ingest, type IngestDeps, moveIngest } from '../cas/index.js';
import type { SvcError } from '../base/errors.js';
import type { StoredBlock } from '../store/index.js';

/** How a resumable upload's part continues its object. */
interface PartContext {
  /** Key of the whole-object hash kept on the scanning thread; it covers every byte before the part. */
  hashKey: string;
  /** The object's bytes after its last cut: cut again together with the part, not hashed again. */
  replay: Uint8Array;
  /** Chunker and media type, once the object's first bytes decided them. */
  decided?: Decision;
  /** Most bytes a part may carry. */
  maxBytes: number;
  /** The object ends here (commit): the tail is cut to the end and no tail is left. */
  final?: boolean;
  /** Where the new tail's bytes go when the ingest ends (`take`, and `give` on `free()`); fresh buffers when absent. */
  tailBuffers?: { take(size: number): Buffer; give(buffer: Buffer): void };
}

export interface PartOptions {
  contentType?: string;
  /** The part's Content-Length. */
  declaredLength?: number;
  part: PartContext;
  /** Write blocks even when present (security on). */
  alwaysWrite?: boolean;
}

/**
 * What a part leaves: blocks cut and stored, the object's bytes after them (the tail, to stage),
 * the decision if made. `tail` stays valid until `free()`, which the caller must call once the
 * tail is staged (or given up).
 */
export interface PartResult {
  blocks: StoredBlock[];
  tail: Uint8Array[];
  tailBytes: number;
  decided?: Decision;
  free(): void;
}

const SNIFF_BYTES = 4096;
/**
 * A continued part (ackPart) is acknowledged once the scanning thread is this many segments from
 * its end: the next part's first bytes then arrive while the thread still has work, so it never
 * waits on a part's answer and the client's turnaround. The price is a larger staged tail.
 */
const ACK_LAG_SEGMENTS = 3;

export class PartIngest extends Ingest {
  /** A part whose ingest may go on with the next part (ackPart, continuePart). */
  readonly continuable: boolean;
  private readonly part: PartContext;
  private partFinish?: { resolve: (r: PartResult) => void; reject: (e: unknown) => void };
  /** A part waiting to be acknowledged before the ingest drains (ackPart). */
  private partAck?: { resolve: (r: PartResult) => void; reject: (e: unknown) => void };
  /** Blocks an earlier ackPart already handed over. */
  private acked = 0;

  constructor(deps: IngestDeps, options: PartOptions) {
    const { part, declaredLength } = options;
    // A part that may be continued by the next one (ackPart) reserves what any body may hold.
    // Parts below a segment are not worth it (and keep their exact-size segment).
    const continuable = !part.final && (declaredLength ?? 0) >= deps.memory.segmentBytes;
    super(deps, {
      contentType: options.contentType,
      declaredLength,
      streamLength: declaredLength === undefined || continuable ? undefined : declaredLength + part.replay.length,
      maxBytes: part.maxBytes,
      replay: part.replay,
      decided: part.decided,
      // A part's bytes are hashed into the object's kept hash on the scanning thread.
      mayHashHere: false,
      alwaysWrite: options.alwaysWrite,
    });
    this.continuable = continuable;
    this.part = part;
  }

  /** Whether bytes of this stream may have reached the scanning thread (and the kept hash). */
  get scanStarted(): boolean {
    return this.scan !== null;
  }

  /**
   * A continuable part's body ended: resolves once the scanning thread is within a few segments
   * of its end, with the blocks stored since the last acknowledgement and every byte after them
   * as the tail (views of the segments, kept until `free()`). The ingest goes on: the next part
   * may continue it (continuePart), else `endPart()` drains and closes it. Whoever stages that
   * tail and records the blocks has the part durable without waiting for the pipeline to drain.
   */
  ackPart(): Promise<PartResult> {
    this.ended = true;
    if (this.failure) return Promise.reject(this.failure);
    if (!this.continuable) return Promise.reject(new Error('ackPart on an ingest that cannot be continued'));
    this.checkDeclaredLength();
    const done = new Promise<PartResult>((resolve, reject) => (this.partAck = { resolve, reject }));
    this.pump();
    return done;
  }

  /**
   * Whether the next part may go on with this ingest: its part answered, nothing failed, no drain
   * asked for (endPart). (A continuable part is at least a segment, so its chunker was decided
   * before its scan opened.)
   */
  get canContinue(): boolean {
    return this.stage === 'answered' && !this.partFinish;
  }

  /** The next part of the same object goes on here (after `canContinue`), with its own Content-Length. */
  continuePart(declaredLength: number): void {
    if (!this.canContinue) throw new Error('continuePart on an ingest that cannot be continued');
    this.stage = moveIngest(this.stage, 'open');
    this.ended = false;
    this.bodyBase = this.received;
    this.declared = declaredLength;
    this.finalPosted = false;
  }

  /** A part's body ended (or, after ackPart, no part continues): resolves once its blocks are stored and its tail is known. */
  endPart(): Promise<PartResult> {
    return this.reported(() => {
      this.ended = true;
      if (this.failure) return Promise.reject(this.failure);
      this.checkDeclaredLength();
      const done = new Promise<PartResult>((resolve, reject) => (this.partFinish = { resolve, reject }));
      this.pump();
      return done;
    });
  }

  protected rejectPending(err: SvcError): boolean {
    const pending = this.partFinish ?? this.partAck;
    pending?.reject(err);
    return pending !== undefined;
  }

  /** A part cannot decide on fewer bytes than the sniff: they are hashed, not cut, and all stay the object's tail. */
  protected override mayDecide(): boolean {
    return this.part.final === true || this.ring.stored >= SNIFF_BYTES;
  }

  protected advance(allStored: boolean, complete: boolean): void {
    if (!this.scan) this.openScan(true, this.spec ?? null, { key: this.part.hashKey, skip: this.replayed });
    this.postRanges(complete, this.part.final === true);
    if (!allStored || !this.finalPosted) return;
    if (this.partAck) return this.acknowledge();
    const drained = this.scannedUpTo === this.ring.stored && this.queue.idle;
    if (this.partFinish && drained && (!this.part.final || this.cutStart === this.ring.stored)) this.finishPart();
  }

  /** The part is cut and stored: its blocks, and the bytes after its last cut as the new tail. */
  private finishPart(): void {
    this.stage = moveIngest(this.stage, 'settling');
    const size = this.ring.stored - this.cutStart;
    const buffers = this.part.tailBuffers;
    const tail = buffers?.take(size) ?? Buffer.allocUnsafe(size);
    let at = 0;
    for (const piece of this.ring.pieces(this.cutStart, this.ring.stored)) {
      copyInto(tail, at, piece);
      at += piece.length;
    }
    const blocks = this.queue.from(this.acked);
    this.stage = moveIngest(this.stage, 'succeeded');
    this.handedOver.add(blocks);
    this.release();
    this.partFinish?.resolve({
      blocks, tail: [tail], tailBytes: size, decided: this.decision(), free: () => {
        buffers?.give(tail);
        this.giveBack(blocks);
      },
    });
  }

  /**
   * ackPart's answer, once the scanning thread is close enough to the part's end: the blocks
   * stored (in order, with none missing before them) since the last acknowledgement, and every
   * byte after them as the tail, pinned in the segments until the caller frees it.
   */
  private acknowledge(): void {
    const end = this.ring.stored;
    if (this.scannedUpTo < end - ACK_LAG_SEGMENTS * this.ring.segmentSize) return;
    const ack = this.partAck!;
    this.partAck = undefined;
    this.stage = moveIngest(this.stage, 'answered');
    const from = this.unstoredFrom();
    const blocks = this.queue.takeStored(this.acked);
    this.acked = this.queue.storedCount;
    const unpin = this.pin(from);
    this.handedOver.add(blocks);
    const free = () => {
      unpin();
      this.giveBack(blocks);
    };
    ack.resolve({ blocks, tail: this.ring.pieces(from, end), tailBytes: end - from, decided: this.decision(), free });
  }
}
