/**
 * A read-only view over a stream held in equal-sized segments (shared between threads).
 * Offsets are absolute stream offsets; segment k covers [first + k*size, first + (k+1)*size).
 */
export class SegmentedBytes {
  constructor(
    readonly segments: readonly Uint8Array[],
    readonly segmentSize: number,
    readonly first: number,
    readonly end: number,
  ) {}

  byteAt(abs: number): number {
    const rel = abs - this.first;
    return this.segments[Math.floor(rel / this.segmentSize)][rel % this.segmentSize];
  }

  /** The contiguous run of bytes at `abs`, up to `to`: a segment, an offset in it and a length. */
  pieceAt(abs: number, to: number): { bytes: Uint8Array; offset: number; length: number } {
    const rel = abs - this.first;
    const k = Math.floor(rel / this.segmentSize);
    const offset = rel - k * this.segmentSize;
    return { bytes: this.segments[k], offset, length: Math.min(this.segmentSize - offset, to - abs) };
  }

  /** Calls `fn` with each contiguous piece of [from, to), in order. */
  forEachPiece(from: number, to: number, fn: (piece: Uint8Array, pieceStart: number) => void): void {
    let abs = from;
    while (abs < to) {
      const rel = abs - this.first;
      const k = Math.floor(rel / this.segmentSize);
      const local = rel - k * this.segmentSize;
      const len = Math.min(this.segmentSize - local, to - abs);
      fn(this.segments[k].subarray(local, local + len), abs);
      abs += len;
    }
  }

  pieces(from: number, to: number): Uint8Array[] {
    const out: Uint8Array[] = [];
    this.forEachPiece(from, to, (p) => out.push(p));
    return out;
  }

  /** First absolute offset >= from where `pattern` lies wholly inside [from, to), or -1. */
  indexOf(pattern: Buffer, from: number, to: number): number {
    const plen = pattern.length;
    let abs = from;
    while (abs < to) {
      const rel = abs - this.first;
      const k = Math.floor(rel / this.segmentSize);
      const segStart = this.first + k * this.segmentSize;
      const segEnd = Math.min(segStart + this.segmentSize, to);
      const seg = this.segments[k];
      const view = Buffer.from(seg.buffer, seg.byteOffset + (abs - segStart), segEnd - abs);
      const hit = view.indexOf(pattern);
      if (hit >= 0) return abs + hit;
      if (segEnd >= to) return -1;
      // A match straddling the junction with the next segment.
      const tailFrom = Math.max(abs, segEnd - (plen - 1));
      const headTo = Math.min(to, segEnd + plen - 1);
      const joint = Buffer.concat([...this.pieces(tailFrom, headTo)]);
      const j = joint.indexOf(pattern);
      if (j >= 0) return tailFrom + j;
      abs = segEnd;
    }
    return -1;
  }
}
