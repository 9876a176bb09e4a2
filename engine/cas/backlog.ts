import { SpillFile } from './spill.js';
import { copyInto } from './shared-copy.js';

/** Where the backlog gets its memory: recycled segments, so no garbage builds up. */
interface SegmentSource {
  readonly segmentBytes: number;
  takeSegment(): Uint8Array;
  returnSegment(segment: Uint8Array): void;
}

/**
 * Body bytes that arrived while their upload could not take them, kept in arrival order: in
 * memory (recycled segments) up to a limit, then in a spill file. After pause(), uWS goes on
 * reading the socket until the kernel's receive buffer is empty (which may grow to
 * net.ipv4.tcp_rmem's maximum), so such bytes can be many. Only the first `memoryLimit` of them
 * stay in memory: the rest costs a write and a read on the main thread, but keeps an upload's
 * memory within its reservation.
 */
export class Backlog {
  private segments: Uint8Array[] = [];
  private readPos = 0;
  private writePos = 0;
  private file: SpillFile | null = null;

  constructor(
    private readonly memoryLimit: number,
    private readonly source: SegmentSource,
    private readonly spillDir: string,
    private readonly onSpill: (bytes: number) => void,
  ) {}

  /** Bytes waiting in memory. */
  get memoryBytes(): number {
    return this.writePos - this.readPos;
  }

  /** Bytes waiting, in memory and on disk. */
  get pending(): number {
    return this.memoryBytes + (this.file?.pending ?? 0);
  }

  /** Copies `chunk` in (it is only valid during the caller's callback). */
  push(chunk: Uint8Array): void {
    const size = this.source.segmentBytes;
    // Once bytes are on disk, later ones follow them there: order is the file's order.
    if (!this.file && this.memoryBytes + chunk.length <= this.memoryLimit) {
      let off = 0;
      while (off < chunk.length) {
        const at = this.writePos % size;
        if (at === 0 && this.writePos === this.segments.length * size + this.dropped) this.segments.push(this.source.takeSegment());
        const n = Math.min(chunk.length - off, size - at);
        copyInto(this.segments[this.segments.length - 1], at, chunk.subarray(off, off + n));
        off += n;
        this.writePos += n;
      }
      return;
    }
    (this.file ??= new SpillFile(this.spillDir)).append(chunk);
    this.onSpill(chunk.length);
  }

  /** Moves up to `into.length` of the oldest bytes into `into`; returns how many. */
  take(into: Uint8Array): number {
    if (this.memoryBytes > 0) {
      const size = this.source.segmentBytes;
      const at = this.readPos % size;
      const n = Math.min(into.length, size - at, this.memoryBytes);
      copyInto(into, 0, this.segments[0].subarray(at, at + n));
      this.readPos += n;
      if (this.readPos % size === 0 || this.readPos === this.writePos) this.releaseRead();
      return n;
    }
    if (!this.file) return 0;
    const n = this.file.take(into);
    if (this.file.pending === 0) {
      this.file.dispose();
      this.file = null;
    }
    return n;
  }

  dispose(): void {
    for (const s of this.segments) this.source.returnSegment(s);
    this.segments = [];
    this.readPos = this.writePos = this.dropped = 0;
    this.file?.dispose();
    this.file = null;
  }

  /** Bytes of segments already given back, so positions stay absolute. */
  private dropped = 0;

  private releaseRead(): void {
    const size = this.source.segmentBytes;
    if (this.readPos === this.writePos) {
      // Empty: give every segment back and start over.
      for (const s of this.segments) this.source.returnSegment(s);
      this.segments = [];
      this.readPos = this.writePos = this.dropped = 0;
      return;
    }
    this.source.returnSegment(this.segments.shift()!);
    this.dropped += size;
  }
}
