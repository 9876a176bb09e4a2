import { ARENA_RESERVED_BYTES } from './gear-scan.js';

/** Largest shared WebAssembly memory made for segments; segments beyond it are plain SharedArrayBuffers. */
const MAX_ARENA_BYTES = 2 * 1024 * 1024 * 1024;

/**
 * The memory budget of all uploads together. An upload reserves its worst-case footprint before
 * its body is read and releases it when done, so buffered bytes never exceed the limit; uploads
 * beyond it wait in arrival order. Segments are recycled to avoid zeroing fresh shared memory.
 *
 * Segments are carved out of one shared WebAssembly memory (the arena, address space only until
 * a segment is first used), so the scanning thread's wasm gear loop reads them in place.
 */
export class TransferMemory {
  private reserved = 0;
  private inUse = 0;
  private readonly waiting: Array<{ bytes: number; admit: () => void }> = [];
  private readonly free: Uint8Array[] = [];
  private arenaSegmentsMade = 0;
  private readonly arenaSegments: number;
  readonly arena: WebAssembly.Memory;
  transfers = 0;

  constructor(
    readonly limitBytes: number,
    readonly segmentBytes: number,
  ) {
    this.arenaSegments = Math.floor(Math.min(limitBytes, MAX_ARENA_BYTES - ARENA_RESERVED_BYTES) / segmentBytes);
    const pages = Math.ceil((ARENA_RESERVED_BYTES + this.arenaSegments * segmentBytes) / 65536);
    this.arena = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  }

  /** Bytes actually held in segments and small-body buffers right now. */
  get bufferedBytes(): number {
    return this.inUse;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /** Calls `admit` once `bytes` fit in the budget (at once when they do now). Returns a cancel function. */
  reserve(bytes: number, admit: () => void): () => void {
    const need = Math.min(bytes, this.limitBytes);
    if (this.waiting.length === 0 && this.reserved + need <= this.limitBytes) {
      this.reserved += need;
      this.transfers++;
      admit();
      return () => {};
    }
    const entry = { bytes: need, admit };
    this.waiting.push(entry);
    return () => {
      const i = this.waiting.indexOf(entry);
      if (i >= 0) this.waiting.splice(i, 1);
    };
  }

  /** Extra room for an admitted transfer, granted only while nobody waits and the budget allows. */
  borrow(bytes: number): boolean {
    if (this.waiting.length > 0 || this.reserved + bytes > this.limitBytes) return false;
    this.reserved += bytes;
    return true;
  }

  giveBack(bytes: number): void {
    this.reserved -= bytes;
    this.admitWaiting();
  }

  unreserve(bytes: number): void {
    this.reserved -= Math.min(bytes, this.limitBytes);
    this.transfers--;
    this.admitWaiting();
  }

  private admitWaiting(): void {
    while (this.waiting.length > 0 && this.reserved + this.waiting[0].bytes <= this.limitBytes) {
      const next = this.waiting.shift()!;
      this.reserved += next.bytes;
      this.transfers++;
      next.admit();
    }
  }

  takeSegment(): Uint8Array {
    this.inUse += this.segmentBytes;
    const reused = this.free.pop();
    if (reused) return reused;
    if (this.arenaSegmentsMade === this.arenaSegments) return new Uint8Array(new SharedArrayBuffer(this.segmentBytes));
    const at = ARENA_RESERVED_BYTES + this.arenaSegmentsMade++ * this.segmentBytes;
    return new Uint8Array(this.arena.buffer, at, this.segmentBytes);
  }

  returnSegment(segment: Uint8Array): void {
    this.inUse -= this.segmentBytes;
    // Keep every segment for reuse (the budget caps how many exist). Dropping one would not free
    // it soon: worker threads keep references in garbage that their own GC collects only lazily.
    this.free.push(segment);
  }

  /** Accounts buffers that are not pooled segments (small bodies, read buffers); negative to release. */
  track(bytes: number): void {
    this.inUse += bytes;
  }
}
