// The streaming core every upload shares (docs/architecture.md, "The upload path"). An Ingest
// owns the flow of one stream: admission against the transfer memory, the backlog while it
// cannot take bytes, the segment ring, the scan session on the scanning thread and the store
// queue on the worker pool, and its outcome. What happens when a body ends is its kind's:
// DirectIngest (./direct-ingest.ts) publishes a manifest; PartIngest (engine/uploads) hands a
// resumable part's blocks and tail over. This file is above 400 lines because the flow's
// transitions (push, pump, progress, fail, release) must be read together to be checked.

import { createHash, type Hash } from 'node:crypto';
import type { Piscina } from 'piscina';
import type { Config } from '../base/config.js';
import { SvcError, blockStoreUnavailable, ingestFailed, invalidBlob, isUnreachable, payloadTooLarge } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { Stats } from '../ops/index.js';
import type { BlobCatalog, BlockStoreLocation, StoredBlock } from '../store/index.js';
import type { LocalStores } from './local-stores.js';
import { Backlog } from './backlog.js';
import { type IngestStage, moveIngest } from './ingest-lifecycle.js';
import { type ChunkerSpec, maxBlockBytes } from './chunkers.js';
import { SegmentRing } from './segment-ring.js';
import { StoreQueue } from './store-queue.js';
import type { ScanStream, StreamScanner } from './stream-scanner.js';
import type { TransferMemory } from './transfer-memory.js';

export interface IngestDeps {
  config: Config;
  /** Directory for spill files (cleaned at start). */
  spillDir: string;
  /** Where the block tasks store blocks. */
  blockStore: BlockStoreLocation;
  /**
   * The same store on this (the main) thread and which store tasks it takes, for a remote store
   * (S3): ./local-stores.ts says why. An embedded store's writes are blocking file I/O: none.
   */
  local?: LocalStores;
  pool: Piscina;
  scanner: StreamScanner;
  memory: TransferMemory;
  manifests: BlobCatalog;
  stats: Stats;
  log: Logger;
  /** Takes the blocks an ingest that failed or was aborted wrote (engine/gc reclaims them at once). */
  reclaim?: (blocks: StoredBlock[]) => void;
  /**
   * Called before an unlisted ingest records its blocks: its caller keeps the record in this
   * node's data directory, a root only this node can mark (Collector.holdRoots).
   */
  holdRoots?: () => Promise<void>;
}

/** The chunker and media type of an object, decided by its first bytes. */
export interface Decision {
  spec: ChunkerSpec;
  mediaType: string;
}

/** What a kind of ingest tells the core about its stream before the first byte. */
interface StreamShape {
  /** The Content-Type header as sent, if any. */
  contentType?: string;
  /** The body's Content-Length, if any: an exact contract. */
  declaredLength?: number;
  /** The whole stream's length when known (replayed bytes included): it sizes the reservation. */
  streamLength?: number;
  /** Most bytes the body may carry. */
  maxBytes: number;
  /** The error for a body past `maxBytes` (default 413 payload_too_large). */
  tooLarge?: (max: number) => SvcError;
  /** Bytes that open the stream before the body (a part's replayed tail): cut, not hashed again. */
  replay?: Uint8Array;
  /** Chunker and media type, when already decided. */
  decided?: Decision;
  /** A small stream may be hashed here instead of on the scanning thread. */
  mayHashHere: boolean;
  /**
   * Also take the body's MD5 (an S3 ETag). On this thread as the bytes are pushed, beside the
   * scanning thread's SHA-256: one stream's two digests then run on two cores (measured: the
   * scanning thread taking both made a single PutObject 14% slower, bench/s3-api.ts).
   */
  measureMd5?: boolean;
  /** Write blocks even when present (security on: the upload's time says nothing of other tenants' data). */
  alwaysWrite?: boolean;
  /**
   * Charges each chunk to the caller's byte budget as it is pushed (a body without a declared
   * length, engine/tenancy TenantGate.body): a throw (429) refuses the chunk, and the caller aborts.
   */
  meter?: (bytes: number) => void;
}

const SNIFF_BYTES = 4096;
/** Bytes an upload keeps in memory while paused before it spills to disk. */
const BACKLOG_MEMORY_BYTES = 16 * 1024 * 1024;
const PDF_SIGNATURE = Buffer.from('%PDF-');
/** The data of a final scan message that carries no bytes. */
const NO_BYTES = new Uint8Array(new SharedArrayBuffer(0));

/** The default chunker from the configuration; PDF bodies get the PDF-aware one. */
function defaultChunker(config: Config): ChunkerSpec {
  return config.chunker === 'fixed'
    ? { kind: 'fixed', size: config.chunkAvg }
    : { kind: 'fastcdc', min: config.chunkMin, avg: config.chunkAvg, max: config.chunkMax };
}

export function pdfChunker(config: Config): ChunkerSpec {
  return { kind: 'pdf', target: 1024 * 1024, max: 4 * 1024 * 1024, fallback: { kind: 'fastcdc', min: config.chunkMin, avg: config.chunkAvg, max: config.chunkMax } };
}

/** The largest block any chunker of this configuration makes (PDF bodies included). */
export function largestBlockBytes(config: Config): number {
  return Math.max(maxBlockBytes(defaultChunker(config)), maxBlockBytes(pdfChunker(config)));
}

function mediaTypeEssence(contentType: string): string {
  return contentType.split(';')[0].trim().toLowerCase();
}

/**
 * One stream, from its first body byte to its kind's end. The caller pushes body chunks (copied
 * at once into shared segments), pauses the socket when `push` returns false and resumes on
 * `onResume`. Each full segment goes to the scanning thread, which hashes the whole object and
 * finds block boundaries in order; blocks found are hashed and stored by `store` tasks on the
 * worker pool. Memory is bounded by the reservation taken before the first byte is read.
 */
export abstract class Ingest {
  onResume: () => void = () => {};
  /** An admission waiting for the ingest to take bytes again (admit). */
  private onNextResume?: () => void;
  onError: (err: SvcError) => void = () => {};

  /** The whole-object hash: here for small declared bodies, on the scanning thread otherwise. */
  protected readonly sha: Hash | null;
  /** The body's MD5 when the shape asks for it. */
  protected readonly md5: Hash | null;
  /** Hashing and cutting on the scanning thread; opened by the kind once it knows how. */
  protected scan: ScanStream | null = null;
  /** Bytes handed to the scanning thread, and bytes it is done with (segments before stay). */
  private posted = 0;
  /** The scanning thread has the stream's end (a continued part's next body starts it again). */
  protected finalPosted = false;
  protected scannedUpTo = 0;
  protected readonly ring: SegmentRing;
  private readonly reservation: number;
  private readonly pauseAtSegments: number;
  private readonly maxBytes: number;
  private readonly tooLarge: (max: number) => SvcError;
  protected received = 0;
  /** Where the next block begins (everything before it is cut). */
  protected cutStart = 0;
  protected spec?: ChunkerSpec;
  protected mediaType = 'application/octet-stream';
  /** The blocks cut, and their store tasks. */
  protected readonly queue: StoreQueue;
  private readonly backlog: Backlog;
  /** The transfer memory holds this ingest's reservation: from its admission until release. */
  private reserved = false;
  private cancelAdmission: () => void = () => {};
  /** The current body has ended (a continued part's next body starts it again). */
  protected ended = false;
  /** The socket should be paused: the ring is full or bytes wait in the backlog. */
  protected paused = false;
  /**
   * Where the ingest's life stands (./ingest-lifecycle.ts), changed only through moveIngest.
   * None of the flags beside it is a stage of it: the stage does not fix any one's value, so
   * folding one in would take a stage per combination.
   * - `ended`, `paused` and `finalPosted` follow the bytes: they change within one stage (a
   *   continued part's next body sets `ended` and `finalPosted` back), and a body may end, and
   *   pause its socket, while its ingest still waits for admission.
   * - `reserved` tells whether the admission took the memory reservation: `failed` and `aborted`
   *   are reached both before admission (nothing reserved) and after (the reservation to return).
   * - `released` trails the end: a failed ingest keeps its segments while a store task still
   *   reads them, and the end (succeeded, failed or aborted) must stay known after the release.
   * - `endReported` and `letGo` record that garbage collection was told (onEnded, onLetGo, each
   *   once); `endReported` may even precede the end (an abort while a manifest is published).
   */
  protected stage: IngestStage = 'admitting';
  /**
   * Why the upload failed, once it has. The body's end then answers with it: bytes pushed after a
   * failure are not counted, so checking Content-Length would blame the client (a 400 for a
   * failed block write, when the body ended before the failure's own answer went out).
   */
  protected failure?: SvcError;
  /** Segments, backlog, scan and reservation are returned (release(), once). */
  private released = false;
  /** Bytes of the replayed tail at the start of the stream. */
  protected readonly replayed: number;
  /** Body bytes of earlier bodies of a continued stream: limits and Content-Length count from here. */
  protected bodyBase = 0;
  /** The current body's declared length. */
  protected declared?: number;
  /** Bytes from here on are kept for the caller (a part's acknowledged tail): segments holding them stay. */
  private pinnedFrom = Infinity;

  // What garbage collection asks of an ingest (engine/gc/ingest-fence.ts).
  /** Called once the caller has its answer: its end settled or thrown, or abort. */
  onEnded: () => void = () => {};
  /** Called once nothing this ingest stored can become referenced through it any more. */
  onLetGo: () => void = () => {};
  /** onLetGo was called. */
  private letGo = false;
  /** onEnded was called. */
  private endReported = false;
  /** A succeeded end is reported later (holdEnd). */
  private endHeld = false;
  /** Blocks handed to the caller that it has not freed yet: still on their way to a record. */
  protected readonly handedOver = new Set<readonly StoredBlock[]>();

  /** No more bytes are taken and nothing more is published: the ingest is finishing or finished. */
  protected get settled(): boolean {
    const stage = this.stage;
    return stage !== 'open' && stage !== 'answered' && stage !== 'admitting';
  }

  /** Succeeded, failed or aborted. */
  private get final(): boolean {
    const stage = this.stage;
    return stage === 'succeeded' || stage === 'failed' || stage === 'aborted';
  }

  /** Failed or aborted: nothing it holds will be referenced through it. */
  private get abandoned(): boolean {
    return this.stage === 'failed' || this.stage === 'aborted';
  }

  protected constructor(
    protected readonly deps: IngestDeps,
    private readonly shape: StreamShape,
  ) {
    const { config, memory } = deps;
    this.replayed = shape.replay?.length ?? 0;
    this.declared = shape.declaredLength;
    this.maxBytes = shape.maxBytes;
    this.tooLarge = shape.tooLarge ?? payloadTooLarge;
    if (shape.declaredLength !== undefined && shape.declaredLength > this.maxBytes) throw this.tooLarge(this.maxBytes);
    if (shape.declaredLength === 0) throw invalidBlob('Empty blobs are not supported');
    const length = shape.streamLength;
    // A small declared body gets one exact segment of its own instead of a pooled one.
    const segmentSize = length !== undefined && length < memory.segmentBytes ? length : memory.segmentBytes;
    const maxBlock = largestBlockBytes(config);
    // Pause once a maximal block plus eight segments are held (room for blocks being stored while
    // the next are scanned); what uWS still delivers beyond two more segments goes to the backlog.
    this.pauseAtSegments = Math.ceil(maxBlock / segmentSize) + 8;
    const holdLimitSegments = this.pauseAtSegments + 2;
    this.ring = new SegmentRing(memory, segmentSize, holdLimitSegments);
    this.queue = new StoreQueue(deps.pool, deps.blockStore, config.workers, segmentSize, {
      window: (from) => this.ring.window(from),
      settled: () => this.settled,
      taskEndedLate: () => this.release(),
      progressed: () => this.afterProgress(),
      failed: (err) => this.taskFailed(err),
    }, shape.alwaysWrite, deps.local);
    const backlogMemory = Math.min(BACKLOG_MEMORY_BYTES, length ?? BACKLOG_MEMORY_BYTES);
    const worstCase = (holdLimitSegments + 1) * segmentSize;
    this.reservation = backlogMemory + (length === undefined ? worstCase : Math.min(worstCase, Math.ceil(length / segmentSize) * segmentSize));
    this.backlog = new Backlog(backlogMemory, deps.memory, deps.spillDir, (bytes) => deps.stats.recordSpill(bytes));
    const small = length !== undefined && length < memory.segmentBytes;
    this.sha = small && shape.mayHashHere ? createHash('sha256') : null;
    this.md5 = shape.measureMd5 ? createHash('md5') : null;
    if (shape.decided) {
      this.spec = shape.decided.spec;
      this.mediaType = shape.decided.mediaType;
    }
  }

  /** Reserves memory; `admitted` runs once the body may be read (at once unless the server is full). */
  admit(admitted: () => void): void {
    // A continued stream: the reservation is the ingest's; its next body waits while it is full.
    if (this.reserved) return this.whenTaking(admitted);
    // Failed or aborted before it was admitted (its body refused, its client gone while the part
    // waited for its hash): nothing is reserved, and the caller goes on as if it were admitted.
    if (this.stage !== 'admitting') return admitted();
    this.cancelAdmission = this.deps.memory.reserve(this.reservation, () => {
      this.stage = moveIngest(this.stage, 'open');
      this.reserved = true;
      if (this.shape.replay && this.replayed > 0) this.ring.append(this.shape.replay);
      this.refill();
      if (this.backlog.pending === 0) this.paused = false;
      this.whenTaking(admitted);
      this.pump();
    });
  }

  /** Runs `then` now if the ingest takes bytes, else when it next resumes (after onResume). */
  private whenTaking(then: () => void): void {
    if (!this.paused) then();
    else this.onNextResume = then;
  }

  /** The most bytes one body may bring (a continued part's next body included). */
  get bodyLimit(): number {
    return this.maxBytes;
  }

  get isAdmitted(): boolean {
    return this.stage !== 'admitting';
  }

  /** Takes a body chunk (valid only during the call). False: pause the socket until onResume. */
  push(chunk: Uint8Array): boolean {
    if (this.settled) return true;
    const len = chunk.length;
    this.shape.meter?.(len);
    const before = this.received - this.bodyBase;
    if (before + len > this.maxBytes) throw this.fail(this.tooLarge(this.maxBytes), false);
    const declared = this.declared;
    if (declared !== undefined && before + len > declared) {
      throw this.fail(invalidBlob(`Content-Length: expected ${declared} bytes but received more`), false);
    }
    this.received += len;
    // While the upload cannot take more, bytes wait in the backlog, unhashed and in order.
    if (this.stage === 'admitting' || this.backlog.pending > 0 || !this.ring.roomFor(len)) {
      try {
        this.backlog.push(chunk);
      } catch (err) {
        this.deps.log.error('ingest: spill write failed', { err: String(err) });
        throw this.fail(ingestFailed(), false);
      }
      this.paused = true;
      return false;
    }
    this.sha?.update(chunk);
    this.md5?.update(chunk);
    this.ring.append(chunk);
    this.pump();
    if (this.ring.count >= this.pauseAtSegments) this.paused = true;
    return !this.paused;
  }

  /** Runs an end of the ingest and tells `onEnded` once its answer is settled (or thrown). */
  protected reported<T>(end: () => Promise<T>): Promise<T> {
    let result: Promise<T>;
    try {
      result = end();
    } catch (err) {
      this.reportEnd();
      throw err;
    }
    result.then(
      () => this.endHeld || this.reportEnd(),
      () => this.reportEnd(),
    );
    return result;
  }

  /** The end's answer is not the end for GC: reported at `endHeldUntilNow` (the caller records the blocks). */
  protected holdEnd(): void {
    this.endHeld = true;
  }

  protected endHeldUntilNow(): void {
    this.endHeld = false;
    this.reportEnd();
  }

  private reportEnd(): void {
    if (this.endReported) return;
    this.endReported = true;
    this.onEnded();
  }

  /** Content-Length is an exact contract: a body that ended short fails the upload. */
  protected checkDeclaredLength(): void {
    const declared = this.declared;
    const received = this.received - this.bodyBase;
    if (declared !== undefined && received !== declared) {
      throw this.fail(invalidBlob(`Content-Length: expected ${declared} bytes but received ${received}`), false);
    }
  }

  /** The client went away or the request failed: nothing is published. */
  abort(): void {
    this.reportEnd();
    if (this.settled) return;
    this.stage = moveIngest(this.stage, 'aborted');
    this.release();
  }

  /** Adds to `into` the digests among `hexes` that may still become referenced through this ingest (GC's claims). */
  collectHeld(hexes: ReadonlySet<string>, into: Set<string>): void {
    for (const list of this.handedOver) for (const b of list) if (hexes.has(b.hex)) into.add(b.hex);
    if (!this.abandoned) this.queue.collectHeld(hexes, into);
  }

  /** Store tasks in flight: they may report blocks found on disk (GC waits for them before reclaiming). */
  storeTasksInFlight(): Promise<unknown>[] {
    return this.queue.running();
  }

  /** The caller freed blocks it was handed: they are in its record now, or given up. */
  protected giveBack(blocks: readonly StoredBlock[]): void {
    if (this.handedOver.delete(blocks)) this.checkLetGo();
  }

  private checkLetGo(): void {
    if (this.letGo || !this.released || !this.final || this.handedOver.size > 0) return;
    this.letGo = true;
    this.onLetGo();
  }

  /** Moves backlog bytes into segments, hashing them on the way, while the upload has room. */
  private refill(): void {
    try {
      while (this.backlog.pending > 0 && this.ring.count < this.pauseAtSegments) {
        this.ring.fillTail((space) => {
          const n = this.backlog.take(space);
          this.sha?.update(space.subarray(0, n));
          this.md5?.update(space.subarray(0, n));
          return n;
        });
      }
    } catch (err) {
      this.deps.log.error('ingest: spill read failed', { err: String(err) });
      this.fail(ingestFailed());
    }
  }

  /** Opens the scan session: hashing (`hashWhole`, kept under `kept.key` when given) and cutting with `spec` (none: one block). */
  protected openScan(hashWhole: boolean, spec: ChunkerSpec | null, kept?: { key: string; skip: number }): void {
    this.scan = this.deps.scanner.open(hashWhole, spec, this.ring.segmentSize, (scanned, cuts, digests) => this.onScanned(scanned, cuts, digests), (err) => this.scannerFailed(err), kept);
  }

  /** The whole body's SHA-256 (here or from the scanning thread) and, when measured, its MD5. */
  protected async wholeDigests(): Promise<{ sha256: string; md5?: string }> {
    const sha256 = this.sha ? this.sha.digest('hex') : await this.scan!.digest();
    return this.md5 ? { sha256, md5: this.md5.digest('hex') } : { sha256 };
  }

  /**
   * Hands whole segments to the scanning thread, in order, and the rest once the body is complete
   * or the socket is paused (the block being cut may then need those bytes to end). The scan ends
   * only when `final`: a part that does not end its object leaves the bytes after the last cut as
   * the object's tail.
   */
  protected postRanges(complete: boolean, final: boolean): void {
    const scan = this.scan;
    if (!scan || this.finalPosted) return;
    while (this.posted < this.ring.stored) {
      const { segment, start: segStart } = this.ring.segmentAt(this.posted);
      const segEnd = segStart + this.ring.segmentSize;
      const to = Math.min(segEnd, this.ring.stored);
      if (to < segEnd && !complete && !this.paused) return;
      const last = final && complete && to === this.ring.stored;
      scan.update(segment, this.posted - segStart, to - this.posted, last);
      this.posted = to;
      if (last) return void (this.finalPosted = true);
    }
    if (complete) {
      if (final) scan.update(NO_BYTES, 0, 0, true);
      this.finalPosted = true;
    }
  }

  /** Moves the stream on after anything happened: decides the chunker, then the kind's step. */
  protected pump(): void {
    const stage = this.stage;
    if (stage !== 'open' && stage !== 'answered') return;
    const allStored = this.ended && this.ring.stored === this.replayed + this.received;
    const complete = allStored || this.ring.stored - this.replayed - this.bodyBase === this.declared;
    if (!this.spec) {
      if (this.ring.stored < SNIFF_BYTES && !complete) return;
      if (this.mayDecide()) {
        try {
          this.decide();
        } catch (err) {
          this.fail(err as SvcError);
          return;
        }
      }
    }
    this.advance(allStored, complete);
  }

  /** Whether the stream's first bytes may decide the chunker now (they are at least the sniff, or all there is). */
  protected mayDecide(): boolean {
    return true;
  }

  /** The kind's step: open and feed the scan, end the stream when everything is in (see pump). */
  protected abstract advance(allStored: boolean, complete: boolean): void;

  /** Rejects the kind's pending end with `err`; false when none is pending. */
  protected abstract rejectPending(err: SvcError): boolean;

  protected decision(): Decision | undefined {
    return this.spec ? { spec: this.spec, mediaType: this.mediaType } : undefined;
  }

  /** Looks at the first bytes once: PDF signature against the declared type. */
  private decide(): void {
    const head = this.ring.head.subarray(0, Math.min(PDF_SIGNATURE.length, this.ring.stored));
    const isPdf = Buffer.compare(Buffer.from(head), PDF_SIGNATURE) === 0;
    const declared = this.shape.contentType;
    const essence = declared === undefined ? undefined : mediaTypeEssence(declared);
    if (essence === undefined || essence === '' || essence === 'application/octet-stream') {
      this.mediaType = isPdf ? 'application/pdf' : 'application/octet-stream';
    } else if (essence === 'application/pdf') {
      if (!isPdf) throw invalidBlob('Advertised application/pdf but the body does not start with %PDF-');
      this.mediaType = declared!.trim();
    } else {
      if (isPdf) throw invalidBlob(`Advertised ${essence} does not match detected application/pdf`);
      this.mediaType = declared!.trim();
    }
    this.spec = isPdf ? pdfChunker(this.deps.config) : defaultChunker(this.deps.config);
  }

  /** Blocks found by the scanning thread (with their digests when it hashed them): queued for storing. */
  private onScanned(scanned: number, cuts: number[], digests?: string[]): void {
    if (this.settled) return;
    this.scannedUpTo = scanned;
    for (let i = 0; i < cuts.length; i++) {
      const cut = cuts[i];
      this.queue.cut(this.cutStart, cut, digests?.[i]);
      this.cutStart = cut;
    }
    this.queue.dispatch();
    this.afterProgress();
  }

  private scannerFailed(err: Error): void {
    this.deps.log.error('ingest: scanning thread failed', { err: String(err.stack ?? err) });
    this.fail(ingestFailed());
  }

  /** Keeps the bytes from `from` on for the caller; the returned function lets them go (once). */
  protected pin(from: number): () => void {
    this.pinnedFrom = from;
    return () => {
      if (this.pinnedFrom !== from) return;
      this.pinnedFrom = Infinity;
      // Those segments may be all that keeps the next bytes waiting in the backlog; when nothing
      // else is in flight, no other event would let them go.
      if (!this.released) this.afterProgress();
    };
  }

  private afterProgress(): void {
    this.ring.dropBefore(this.neededFrom());
    this.refill();
    // Resume well below the pause mark (every pause/resume cycle lets uWS overshoot), or when
    // nothing in flight can free a segment: the block being cut then needs more bytes to end
    // (a long block can hold more than half the pause mark; waiting would never end).
    const settling = !this.queue.idle || this.scannedUpTo < this.ring.stored;
    if (this.paused && this.backlog.pending === 0 && (this.ring.count <= this.pauseAtSegments / 2 || !settling)) {
      this.paused = false;
      this.onResume();
      const then = this.onNextResume;
      this.onNextResume = undefined;
      then?.();
    }
    this.pump();
  }

  private taskFailed(err: unknown): void {
    if (this.settled) return this.release();
    this.deps.log.error('ingest: block write failed', { err: typeof err === 'string' ? err : String((err as Error)?.stack ?? err) });
    this.fail(isUnreachable(err) ? blockStoreUnavailable() : ingestFailed());
  }

  /** Where the first block not yet stored starts (the cut point when every block cut is stored). */
  protected unstoredFrom(): number {
    return this.queue.unstoredFrom(this.cutStart);
  }

  /** Offset before which no task needs the bytes any more. */
  private neededFrom(): number {
    const forStores = this.unstoredFrom();
    return Math.min(this.scan ? Math.min(forStores, this.scannedUpTo) : forStores, this.pinnedFrom);
  }

  /** Settles the upload as failed. Async failures reach the caller through its end or `onError`. */
  protected fail(err: SvcError, notify = true): SvcError {
    if (!this.settled) {
      this.stage = moveIngest(this.stage, 'failed');
      this.failure = err;
      this.release();
      if (!this.rejectPending(err) && notify) this.onError(err);
    }
    return err;
  }

  /** Returns segments and the reservation exactly once, never while a worker may read them. */
  protected release(): void {
    if (this.released || this.queue.tasksRunning) return;
    this.released = true;
    this.cancelAdmission();
    this.ring.release();
    this.backlog.dispose();
    this.scan?.discard();
    if (this.reserved) this.deps.memory.unreserve(this.reservation);
    this.checkLetGo();
    if (this.abandoned) this.reclaimWritten();
  }

  /** A failed or aborted ingest's blocks that it wrote itself (not those it handed over) go back at once. */
  private reclaimWritten(): void {
    const written = this.queue.written();
    if (written.length > 0) this.deps.reclaim?.(written);
  }
}
