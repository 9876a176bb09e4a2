import { copyInto } from './shared-copy.js';
import type { TransferMemory } from './transfer-memory.js';

/** How many segments beyond its reservation an upload may borrow from idle budget. */
const MAX_BORROWED_SEGMENTS = 4;

/** Segments covering stream bytes from `first`: what a block task or the scanning thread reads. */
export interface SegmentWindow {
  segments: Uint8Array[];
  segmentSize: number;
  first: number;
  end: number;
}

/**
 * One upload's bytes in memory: stream bytes [first, stored) in consecutive shared segments,
 * taken from the transfer memory as bytes arrive and given back once nothing needs them. The
 * owner of the segments and of what the upload borrowed beyond its reservation.
 */
export class SegmentRing {
  private segments: Uint8Array[] = [];
  /** Stream offset of segments[0]. */
  private first = 0;
  /** Stream bytes held (the end of the last segment's data). */
  stored = 0;
  /** Segments held beyond the reservation, borrowed from unused budget. */
  private borrowed = 0;

  constructor(
    private readonly memory: TransferMemory,
    readonly segmentSize: number,
    /** Segments the reservation covers. */
    private readonly holdLimitSegments: number,
  ) {}

  get count(): number {
    return this.segments.length;
  }

  /** The first segment (the body's first bytes). */
  get head(): Uint8Array {
    return this.segments[0]!;
  }

  /** Copies `chunk` in after the stored bytes. */
  append(chunk: Uint8Array): void {
    for (let off = 0; off < chunk.length; ) {
      const { view, at } = this.tail();
      const n = Math.min(chunk.length - off, this.segmentSize - at);
      copyInto(view, at, chunk.subarray(off, off + n));
      off += n;
      this.stored += n;
    }
  }

  /** Lets `fill` write into the free end of the last segment; it returns how many bytes it wrote. */
  fillTail(fill: (space: Uint8Array) => number): number {
    const { view, at } = this.tail();
    const n = fill(view.subarray(at));
    this.stored += n;
    return n;
  }

  /** The segment the next stored byte goes to (added when the last one is full) and its offset there. */
  private tail(): { view: Uint8Array; at: number } {
    const at = (this.stored - this.first) % this.segmentSize;
    if (at === 0 && this.stored - this.first === this.segments.length * this.segmentSize) {
      let seg: Uint8Array;
      if (this.segmentSize === this.memory.segmentBytes) seg = this.memory.takeSegment();
      else {
        seg = new Uint8Array(new SharedArrayBuffer(this.segmentSize));
        this.memory.track(this.segmentSize);
      }
      this.segments.push(seg);
    }
    return { view: this.segments[this.segments.length - 1]!, at };
  }

  /** The segment holding stream offset `pos` and the stream offset where it starts. */
  segmentAt(pos: number): { segment: Uint8Array; start: number } {
    const k = Math.floor((pos - this.first) / this.segmentSize);
    return { segment: this.segments[k]!, start: this.first + k * this.segmentSize };
  }

  /** Views of the segments over the stream's bytes [from, to). */
  pieces(from: number, to: number): Uint8Array[] {
    const out: Uint8Array[] = [];
    for (let k = 0; k < this.segments.length; k++) {
      const segStart = this.first + k * this.segmentSize;
      const a = Math.max(from, segStart);
      const b = Math.min(to, segStart + this.segmentSize);
      if (a < b) out.push(this.segments[k]!.subarray(a - segStart, b - segStart));
    }
    return out;
  }

  /** The segments covering [from, stored), as a task window. */
  window(from: number): SegmentWindow {
    const k = Math.floor((from - this.first) / this.segmentSize);
    return { segments: this.segments.slice(k), segmentSize: this.segmentSize, first: this.first + k * this.segmentSize, end: this.stored };
  }

  /**
   * Whether `len` more bytes may be held: within the upload's own segments, or in segments
   * borrowed from budget nobody else is using.
   */
  roomFor(len: number): boolean {
    const free = this.first + this.segments.length * this.segmentSize - this.stored;
    const needed = len <= free ? 0 : Math.ceil((len - free) / this.segmentSize);
    const beyond = this.segments.length + needed - (this.holdLimitSegments + 1) - this.borrowed;
    if (beyond <= 0) return true;
    if (this.segmentSize !== this.memory.segmentBytes || this.borrowed + beyond > MAX_BORROWED_SEGMENTS) return false;
    if (!this.memory.borrow(beyond * this.segmentSize)) return false;
    this.borrowed += beyond;
    return true;
  }

  /** Gives back the segments wholly before stream offset `needed`. */
  dropBefore(needed: number): void {
    while (this.segments.length > 0 && this.first + this.segmentSize <= needed) {
      this.giveBack(this.segments.shift()!);
      this.first += this.segmentSize;
      if (this.borrowed > 0) {
        this.borrowed--;
        this.memory.giveBack(this.segmentSize);
      }
    }
  }

  /** Gives every segment and everything borrowed back. */
  release(): void {
    for (const seg of this.segments) this.giveBack(seg);
    this.segments = [];
    if (this.borrowed > 0) this.memory.giveBack(this.borrowed * this.segmentSize);
    this.borrowed = 0;
  }

  private giveBack(seg: Uint8Array): void {
    if (this.segmentSize === this.memory.segmentBytes) this.memory.returnSegment(seg);
    else this.memory.track(-this.segmentSize);
  }
}
