import { createHash, type Hash } from 'node:crypto';
import { xxh64 } from '@node-rs/xxhash';
import type { Piscina } from 'piscina';
import type { Config } from '../config.js';
import { SvcError, ingestFailed, invalidBlob, payloadTooLarge } from '../errors.js';
import type { Logger } from '../log.js';
import type { Stats } from '../ops/stats.js';
import type { BlockStoreLocation, StoredBlock } from '../store/index.js';
import { type ChunkerSpec, chunkerName, maxBlockBytes } from './chunkers.js';
import type { BlobCatalog, BlobSummary, ManifestRecord } from '../store/index.js';
import { Backlog } from './backlog.js';
import { copyInto } from './shared-copy.js';
import { SegmentRing } from './segment-ring.js';
import { StoreQueue } from './store-queue.js';
import type { TransferMemory } from './transfer-memory.js';
import type { ScanStream, StreamScanner } from './stream-scanner.js';

export interface IngestDeps {
  config: Config;
  /** Directory for spill files (cleaned at start). */
  spillDir: string;
  /** Where the block tasks store blocks. */
  blockStore: BlockStoreLocation;
  pool: Piscina;
  scanner: StreamScanner;
  memory: TransferMemory;
  manifests: BlobCatalog;
  stats: Stats;
  log: Logger;
  /** Takes the blocks an ingest that failed or was aborted wrote (engine/gc reclaims them at once). */
  reclaim?: (blocks: StoredBlock[]) => void;
}

export interface IngestResult {
  blob: BlobSummary;
  freshBlocks: number;
  duplicateBlocks: number;
  durationSeconds: number;
}

/** An unlisted ingest's result: the manifest record is the caller's to keep (not in the blob namespace). */
export interface UnlistedResult {
  id: string;
  record: ManifestRecord;
  /** This upload's media type (a listed manifest keeps the first uploader's). */
  mediaType: string;
}

export interface IngestOptions {
  /** The Content-Type header as sent, if any. */
  contentType?: string;
  /** The Content-Length header, if any: an exact contract. */
  declaredLength?: number;
  /** Set for one part of a resumable upload: the body continues an object instead of being one. */
  part?: PartContext;
  /**
   * Blocks are stored and recorded, but no manifest is published in the blob namespace: the
   * caller keeps the record (document content, which the blob API must not list or delete).
   */
  unlisted?: boolean;
}

/** How a resumable upload's part continues its object (engine/uploads). */
export interface PartContext {
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

export interface Decision {
  spec: ChunkerSpec;
  mediaType: string;
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

/**
 * An ingest's life: 'open' while it takes bytes; 'settling' once its end is decided (a manifest
 * being published, a part's result being handed over); then 'succeeded', 'failed' or 'aborted'.
 * Apart from it, the ingest tracks its current body (`ended`), its admission and flow (`admitted`,
 * `paused`), and its memory (`released`).
 */
type Outcome = 'open' | 'settling' | 'succeeded' | 'failed' | 'aborted';

const SNIFF_BYTES = 4096;
/**
 * A continued part (ackPart) is acknowledged once the scanning thread is this many segments from
 * its end: the next part's first bytes then arrive while the thread still has work, so it never
 * waits on a part's answer and the client's turnaround. The price is a larger staged tail.
 */
const ACK_LAG_SEGMENTS = 3;
/** Bytes an upload keeps in memory while paused before it spills to disk. */
const BACKLOG_MEMORY_BYTES = 16 * 1024 * 1024;
const PDF_SIGNATURE = Buffer.from('%PDF-');
/** The data of a final scan message that carries no bytes. */
const NO_BYTES = new Uint8Array(new SharedArrayBuffer(0));

/** The default chunker from the configuration; PDF bodies get the PDF-aware one. */
export function defaultChunker(config: Config): ChunkerSpec {
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
 * One streaming upload, from the first body byte to a published manifest. The caller pushes
 * body chunks (copied at once into shared segments), pauses the socket when `push` returns
 * false and resumes on `onResume`. Each full segment goes to the scanning thread, which hashes
 * the whole object and finds block boundaries in order; blocks found are hashed and stored by
 * `store` tasks on the worker pool. Memory is bounded by the reservation taken before the first
 * byte is read (docs/architecture.md, "The upload path").
 */
export class DirectIngest {
  onResume: () => void = () => {};
  /** An admission waiting for the ingest to take bytes again (admit). */
  private onNextResume?: () => void;
  onError: (err: SvcError) => void = () => {};

  private readonly startedAt = process.hrtime.bigint();
  /** The whole-object hash: here for small declared bodies, on the scanning thread otherwise. */
  private readonly sha: Hash | null;
  /** Hashing and cutting on the scanning thread; opened once the first segment is full. */
  private scan: ScanStream | null = null;
  /** Decided when the scan is opened: a body too small for any cut is one block, not scanned for cuts. */
  private oneBlock?: boolean;
  /** Bytes handed to the scanning thread, and bytes it is done with (segments before stay). */
  private posted = 0;
  private finalPosted = false;
  private scannedUpTo = 0;
  private readonly ring: SegmentRing;
  private readonly reservation: number;
  private readonly pauseAtSegments: number;
  private readonly maxUpload: number;
  private received = 0;
  /** Where the next block begins (everything before it is cut). */
  private cutStart = 0;
  private spec?: ChunkerSpec;
  private mediaType = 'application/octet-stream';
  /** The blocks cut, and their store tasks. */
  private readonly queue: StoreQueue;
  private readonly backlog: Backlog;
  private admitted = false;
  private cancelAdmission: () => void = () => {};
  /** The current body has ended (a continued part's next body starts it again). */
  private ended = false;
  private paused = false;
  /** Where the ingest's life stands; everything but 'open' is final (see Outcome). */
  private outcome: Outcome = 'open';
  /**
   * Why the upload failed, once it has. The body's end then answers with it: bytes pushed after a
   * failure are not counted, so checking Content-Length would blame the client (a 400 for a
   * failed block write, when the body ended before the failure's own answer went out).
   */
  private failure?: SvcError;
  private released = false;
  private finish?: { resolve: (r: IngestResult) => void; reject: (e: unknown) => void };
  private partFinish?: { resolve: (r: PartResult) => void; reject: (e: unknown) => void };
  /** Bytes of the replayed tail at the start of the stream (parts only). */
  private readonly replayed: number;
  /** Body bytes of earlier parts of a continued ingest (ackPart, continuePart): limits and Content-Length count from here. */
  private partBase = 0;
  /** The current body's declared length (a continued part's own). */
  private declared?: number;
  /** A part waiting to be acknowledged before the ingest drains (ackPart). */
  private partAck?: { resolve: (r: PartResult) => void; reject: (e: unknown) => void };
  /** Blocks an earlier ackPart already handed over. */
  private acked = 0;
  /** Bytes from here on are staged by the caller (ackPart's tail): segments holding them stay. */
  private pinnedFrom = Infinity;
  /** A part whose ingest may go on with the next part (ackPart, continuePart). */
  readonly continuable: boolean;

  // What garbage collection asks of an ingest (engine/gc/ingest-fence.ts).
  /** Called once the caller has its answer: end, endPart or endUnlisted settled, or abort. */
  onEnded: () => void = () => {};
  /** Called once nothing this ingest stored can become referenced through it any more. */
  onLetGo: () => void = () => {};
  private letGo = false;
  /** Blocks handed to the caller (ackPart, endPart) that it has not freed yet: still on their way to a record. */
  private readonly handedOver = new Set<readonly StoredBlock[]>();

  /** No more bytes are taken and nothing more is published: the ingest is finishing or finished. */
  private get settled(): boolean {
    return this.outcome !== 'open';
  }

  /** Failed or aborted: nothing it holds will be referenced through it. */
  private get abandoned(): boolean {
    return this.outcome === 'failed' || this.outcome === 'aborted';
  }

  constructor(
    private readonly deps: IngestDeps,
    private readonly options: IngestOptions,
  ) {
    const { config, memory } = deps;
    const part = options.part;
    this.replayed = part?.replay.length ?? 0;
    this.declared = options.declaredLength;
    // A part that may be continued by the next one (ackPart) reserves what any body may hold.
    // Parts below a segment are not worth it (and keep their exact-size segment).
    this.continuable = part !== undefined && !part.final && (options.declaredLength ?? 0) >= memory.segmentBytes;
    const declared = options.declaredLength === undefined || this.continuable ? undefined : options.declaredLength + this.replayed;
    this.maxUpload = part ? part.maxBytes : config.maxUploadBytes;
    if (options.declaredLength !== undefined && options.declaredLength > this.maxUpload) throw payloadTooLarge(this.maxUpload);
    if (options.declaredLength === 0) throw invalidBlob('Empty blobs are not supported');
    // A small declared body gets one exact segment of its own instead of a pooled one.
    const segmentSize = declared !== undefined && declared < memory.segmentBytes ? declared : memory.segmentBytes;
    const maxBlock = largestBlockBytes(config);
    // Pause once a maximal block plus eight segments are held (room for blocks being stored while
    // the next are scanned; with four, 1 GiB paused ~150 times and ingested 5-20% slower); what uWS
    // still delivers beyond two more segments goes to the backlog.
    this.pauseAtSegments = Math.ceil(maxBlock / segmentSize) + 8;
    const holdLimitSegments = this.pauseAtSegments + 2;
    this.ring = new SegmentRing(memory, segmentSize, holdLimitSegments);
    this.queue = new StoreQueue(deps.pool, deps.blockStore, config.workers, segmentSize, {
      window: (from) => this.ring.window(from),
      settled: () => this.settled,
      taskEndedLate: () => this.release(),
      progressed: () => this.afterProgress(),
      failed: (err) => this.taskFailed(err),
    });
    const backlogMemory = Math.min(BACKLOG_MEMORY_BYTES, declared ?? BACKLOG_MEMORY_BYTES);
    const worstCase = (holdLimitSegments + 1) * segmentSize;
    this.reservation = backlogMemory + (declared === undefined ? worstCase : Math.min(worstCase, Math.ceil(declared / segmentSize) * segmentSize));
    this.backlog = new Backlog(backlogMemory, deps.memory, deps.spillDir, (bytes) => (deps.stats.spilledBytes += bytes));
    const small = declared !== undefined && declared < memory.segmentBytes;
    // A part's bytes are hashed into the object's kept hash on the scanning thread.
    this.sha = small && !part ? createHash('sha256') : null;
    if (part?.decided) {
      this.spec = part.decided.spec;
      this.mediaType = part.decided.mediaType;
    }
  }

  /** Reserves memory; `admitted` runs once the body may be read (at once unless the server is full). */
  admit(admitted: () => void): void {
    // A continued part: the reservation is the ingest's; its body waits while the ingest is full.
    if (this.admitted) return this.whenTaking(admitted);
    this.cancelAdmission = this.deps.memory.reserve(this.reservation, () => {
      this.admitted = true;
      if (this.replayed > 0) this.ring.append(this.options.part!.replay);
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

  get isAdmitted(): boolean {
    return this.admitted;
  }

  /** Whether bytes of this stream may have reached the scanning thread (and a kept hash). */
  get scanStarted(): boolean {
    return this.scan !== null;
  }

  /** Takes a body chunk (valid only during the call). False: pause the socket until onResume. */
  push(chunk: Uint8Array): boolean {
    if (this.settled) return true;
    const len = chunk.length;
    const before = this.received - this.partBase;
    if (before + len > this.maxUpload) throw this.fail(payloadTooLarge(this.maxUpload), false);
    const declared = this.declared;
    if (declared !== undefined && before + len > declared) {
      throw this.fail(invalidBlob(`Content-Length: expected ${declared} bytes but received more`), false);
    }
    this.received += len;
    // While the upload cannot take more, bytes wait in the backlog, unhashed and in order.
    if (!this.admitted || this.backlog.pending > 0 || !this.ring.roomFor(len)) {
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
    this.ring.append(chunk);
    this.pump();
    if (this.ring.count >= this.pauseAtSegments) this.paused = true;
    return !this.paused;
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
   * Whether the next part may go on with this ingest: its part answered, nothing failed. (A
   * continuable part is at least a segment, so its chunker was decided before its scan opened.)
   */
  get canContinue(): boolean {
    return this.continuable && this.ended && !this.settled && !this.partAck && !this.partFinish;
  }

  /** The next part of the same object goes on here (after `canContinue`), with its own Content-Length. */
  continuePart(declaredLength: number): void {
    if (!this.canContinue) throw new Error('continuePart on an ingest that cannot be continued');
    this.ended = false;
    this.partBase = this.received;
    this.declared = declaredLength;
    this.finalPosted = false;
  }

  /** A part's body ended (or, after ackPart, no part continues): resolves once its blocks are stored and its tail is known. */
  endPart(): Promise<PartResult> {
    return this.reported(() => this.endPartNow());
  }

  private endPartNow(): Promise<PartResult> {
    this.ended = true;
    if (this.failure) return Promise.reject(this.failure);
    this.checkDeclaredLength();
    const done = new Promise<PartResult>((resolve, reject) => (this.partFinish = { resolve, reject }));
    this.pump();
    return done;
  }

  /** The body of an unlisted ingest ended: resolves once its blocks are durable, with the manifest record. */
  endUnlisted(): Promise<UnlistedResult> {
    return this.end() as unknown as Promise<UnlistedResult>;
  }

  /** The body ended: resolves once the manifest is published. */
  end(): Promise<IngestResult> {
    return this.reported(() => this.endNow());
  }

  private endNow(): Promise<IngestResult> {
    this.ended = true;
    if (this.failure) return Promise.reject(this.failure);
    if (this.received === 0) throw this.fail(invalidBlob('Empty blobs are not supported'), false);
    this.checkDeclaredLength();
    const done = new Promise<IngestResult>((resolve, reject) => (this.finish = { resolve, reject }));
    this.pump();
    return done;
  }

  /** Runs an end of the ingest and tells `onEnded` once its answer is settled (or thrown). */
  private reported<T>(end: () => Promise<T>): Promise<T> {
    let result: Promise<T>;
    try {
      result = end();
    } catch (err) {
      this.reportEnd();
      throw err;
    }
    result.then(
      () => this.reportEnd(),
      () => this.reportEnd(),
    );
    return result;
  }

  private endReported = false;

  private reportEnd(): void {
    if (this.endReported) return;
    this.endReported = true;
    this.onEnded();
  }

  /** Content-Length is an exact contract: a body that ended short fails the upload. */
  private checkDeclaredLength(): void {
    const declared = this.declared;
    const received = this.received - this.partBase;
    if (declared !== undefined && received !== declared) {
      throw this.fail(invalidBlob(`Content-Length: expected ${declared} bytes but received ${received}`), false);
    }
  }

  /** The client went away or the request failed: nothing is published. */
  abort(): void {
    this.reportEnd();
    if (this.settled) return;
    this.outcome = 'aborted';
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
  private giveBack(blocks: readonly StoredBlock[]): void {
    if (this.handedOver.delete(blocks)) this.checkLetGo();
  }

  private checkLetGo(): void {
    if (this.letGo || !this.released || this.outcome === 'open' || this.outcome === 'settling' || this.handedOver.size > 0) return;
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
          return n;
        });
      }
    } catch (err) {
      this.deps.log.error('ingest: spill read failed', { err: String(err) });
      this.fail(ingestFailed());
    }
  }

  /**
   * Hands whole segments to the scanning thread, in order, and the rest once the body is complete
   * or the socket is paused (the block being cut may then need those bytes to end).
   */
  private postRanges(complete: boolean): void {
    const scan = this.scan;
    if (!scan || this.finalPosted) return;
    while (this.posted < this.ring.stored) {
      const { segment, start: segStart } = this.ring.segmentAt(this.posted);
      const segEnd = segStart + this.ring.segmentSize;
      const to = Math.min(segEnd, this.ring.stored);
      if (to < segEnd && !complete && !this.paused) return;
      const last = complete && to === this.ring.stored;
      scan.update(segment, this.posted - segStart, to - this.posted, last);
      this.posted = to;
      if (last) return void (this.finalPosted = true);
    }
    if (complete) {
      scan.update(NO_BYTES, 0, 0, true);
      this.finalPosted = true;
    }
  }

  private pump(): void {
    if (this.settled || !this.admitted) return;
    const allStored = this.ended && this.ring.stored === this.replayed + this.received;
    const complete = allStored || this.ring.stored - this.replayed - this.partBase === this.declared;
    const part = this.options.part;
    if (!this.spec) {
      if (this.ring.stored < SNIFF_BYTES && !complete) return;
      // A part cannot decide on fewer bytes than the sniff: they are hashed, not cut, and all
      // stay the object's tail (only a part that ends the stream gets here).
      if (!(part && !part.final && this.ring.stored < SNIFF_BYTES)) {
        try {
          this.decide();
        } catch (err) {
          this.fail(err as SvcError);
          return;
        }
      }
    }
    if (part) {
      if (!this.scan) {
        this.oneBlock = false;
        const kept = { key: part.hashKey, skip: this.replayed };
        this.scan = this.deps.scanner.open(true, this.spec ?? null, this.ring.segmentSize, (scanned, cuts, digests) => this.onScanned(scanned, cuts, digests), (err) => this.scannerFailed(err), kept);
      }
      this.postPartRanges(complete, part.final === true);
      if (!allStored || !this.finalPosted) return;
      if (this.partAck) return this.acknowledge();
      const settled = this.scannedUpTo === this.ring.stored && this.queue.idle;
      if (this.partFinish && settled && (!part.final || this.cutStart === this.ring.stored)) this.finishPart();
      return;
    }
    if (this.oneBlock === undefined && (complete || this.paused || this.ring.stored >= this.ring.segmentSize)) {
      this.oneBlock = complete && this.isOneBlock(this.ring.stored);
      if (!this.oneBlock || !this.sha) {
        const spec = this.oneBlock ? null : this.spec!;
        this.scan = this.deps.scanner.open(!this.sha, spec, this.ring.segmentSize, (scanned, cuts, digests) => this.onScanned(scanned, cuts, digests), (err) => this.scannerFailed(err));
      }
    }
    this.postRanges(complete);
    if (!allStored) return;
    if (this.oneBlock && this.cutStart === 0) {
      this.cutStart = this.ring.stored;
      if (this.ring.stored <= this.deps.config.inlineMaxBytes && !this.options.unlisted) {
        // A small one-block body goes into the catalog with its manifest: no file, no worker.
        void this.publish(this.ring.head.subarray(0, this.ring.stored));
        return;
      }
      this.queue.cut(0, this.ring.stored);
      this.queue.dispatch();
      return;
    }
    if (this.cutStart === this.ring.stored && this.queue.idle) void this.publish();
  }

  /**
   * A part's ranges go to the scanning thread like a direct upload's, final only when the part
   * ends the object: otherwise the object goes on, so the bytes after the last cut stay its tail.
   */
  private postPartRanges(complete: boolean, final: boolean): void {
    const scan = this.scan!;
    if (this.finalPosted) return;
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

  /** The part is cut and stored: its blocks, and the bytes after its last cut as the new tail. */
  private finishPart(): void {
    this.outcome = 'settling';
    const size = this.ring.stored - this.cutStart;
    const buffers = this.options.part?.tailBuffers;
    const tail = buffers?.take(size) ?? Buffer.allocUnsafe(size);
    let at = 0;
    for (const piece of this.ring.pieces(this.cutStart, this.ring.stored)) {
      copyInto(tail, at, piece);
      at += piece.length;
    }
    const blocks = this.queue.from(this.acked);
    this.outcome = 'succeeded';
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
    const from = this.unstoredFrom();
    const blocks = this.queue.takeStored(this.acked);
    this.acked = this.queue.storedCount;
    this.pinnedFrom = from;
    this.handedOver.add(blocks);
    const free = () => {
      if (this.pinnedFrom === from) this.pinnedFrom = Infinity;
      this.giveBack(blocks);
    };
    ack.resolve({ blocks, tail: this.ring.pieces(from, end), tailBytes: end - from, decided: this.decision(), free });
  }

  private decision(): Decision | undefined {
    return this.spec ? { spec: this.spec, mediaType: this.mediaType } : undefined;
  }

  /** Looks at the first bytes once: PDF signature against the declared type. */
  private decide(): void {
    const head = this.ring.head.subarray(0, Math.min(PDF_SIGNATURE.length, this.ring.stored));
    const isPdf = Buffer.compare(Buffer.from(head), PDF_SIGNATURE) === 0;
    const declared = this.options.contentType;
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

  /** Whether the chunker cannot cut a body of `size` bytes (PDF bodies may cut at any %%EOF). */
  private isOneBlock(size: number): boolean {
    const spec = this.spec!;
    return (spec.kind === 'fastcdc' && size <= spec.min) || (spec.kind === 'fixed' && size <= spec.size);
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
    this.fail(ingestFailed());
  }

  /** Where the first block not yet stored starts (the cut point when every block cut is stored). */
  private unstoredFrom(): number {
    return this.queue.unstoredFrom(this.cutStart);
  }

  /** Offset before which no task needs the bytes any more. */
  private neededFrom(): number {
    const forStores = this.unstoredFrom();
    return Math.min(this.scan ? Math.min(forStores, this.scannedUpTo) : forStores, this.pinnedFrom);
  }

  private async publish(inline?: Uint8Array): Promise<void> {
    this.outcome = 'settling';
    try {
      const hex = this.sha ? this.sha.digest('hex') : await this.scan!.digest();
      const blocks = inline ? [{ hex, size: inline.length, checksum: xxh64(inline), fresh: true }] : this.queue.from(0);
      if (this.options.unlisted) {
        const unlisted = await this.deps.manifests.recordUnlisted(hex, this.received, this.mediaType, chunkerName(this.spec!), blocks);
        this.outcome = 'succeeded';
        this.release();
        (this.finish?.resolve as unknown as (r: UnlistedResult) => void)({ ...unlisted, mediaType: this.mediaType });
        return;
      }
      const { manifest, existed } = await this.deps.manifests.publish(hex, this.received, this.mediaType, chunkerName(this.spec!), blocks, inline);
      const stats = this.deps.stats;
      let fresh = 0;
      for (const b of blocks) {
        if (b.fresh && !(inline && existed)) {
          fresh++;
          stats.freshBytes += b.size;
        } else stats.duplicateBytes += b.size;
      }
      stats.ingests++;
      stats.freshBlocks += fresh;
      stats.duplicateBlocks += blocks.length - fresh;
      this.outcome = 'succeeded';
      this.release();
      this.finish?.resolve({
        blob: manifest.summary(),
        freshBlocks: fresh,
        duplicateBlocks: blocks.length - fresh,
        durationSeconds: Number(process.hrtime.bigint() - this.startedAt) / 1e9,
      });
    } catch (err) {
      this.deps.log.error('ingest: manifest publication failed', { err: String((err as Error)?.stack ?? err) });
      this.outcome = 'failed';
      this.release();
      this.finish?.reject(ingestFailed('The catalog could not publish the manifest'));
    }
  }

  /** Settles the upload as failed. Async failures reach the caller through `end()` or `onError`. */
  private fail(err: SvcError, notify = true): SvcError {
    if (!this.settled) {
      this.outcome = 'failed';
      this.failure = err;
      this.release();
      if (this.finish) this.finish.reject(err);
      else if (this.partFinish) this.partFinish.reject(err);
      else if (this.partAck) this.partAck.reject(err);
      else if (notify) this.onError(err);
    }
    return err;
  }

  /** Returns segments and the reservation exactly once, never while a worker may read them. */
  private release(): void {
    if (this.released || this.queue.tasksRunning) return;
    this.released = true;
    this.cancelAdmission();
    const { memory } = this.deps;
    this.ring.release();
    this.backlog.dispose();
    this.scan?.discard();
    if (this.admitted) memory.unreserve(this.reservation);
    this.checkLetGo();
    if (this.abandoned) this.reclaimWritten();
  }

  /** A failed or aborted ingest's blocks that it wrote itself (not those it handed over) go back at once. */
  private reclaimWritten(): void {
    const written = this.queue.written();
    if (written.length > 0) this.deps.reclaim?.(written);
  }
}
