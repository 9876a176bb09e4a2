/**
 * Reusable buffers for the staged tails of resumable uploads: each part reads the previous tail
 * and leaves a new one (less than a maximal block once a part drained; a part answered early leaves
 * more, and a part that continues a live ingest reads none). Fresh buffers per part are external
 * memory to V8, whose major GCs would then run every few parts. At most `keep` buffers of `capacity` bytes
 * stay pooled; a larger request, or one while all are lent, gets a buffer of its own.
 */
export class BufferPool {
  private readonly free: Buffer[] = [];
  /** Pooled buffers lent out, by the view that was lent (a stale view cannot give back a buffer lent again). */
  private readonly lent = new Map<Buffer, Buffer>();

  constructor(
    readonly capacity: number,
    readonly keep: number,
  ) {}

  /** A buffer of exactly `size` bytes, with unspecified contents. */
  take(size: number): Buffer {
    if (size > this.capacity) return Buffer.allocUnsafeSlow(size);
    let whole = this.free.pop();
    if (!whole) {
      if (this.lent.size >= this.keep) return Buffer.allocUnsafeSlow(size);
      whole = Buffer.allocUnsafeSlow(this.capacity);
    }
    const view = whole.subarray(0, size);
    this.lent.set(view, whole);
    return view;
  }

  /** Gives back a buffer from `take` once nothing reads it; others, and a second give, are ignored. */
  give(view: Buffer): void {
    const whole = this.lent.get(view);
    if (!whole) return;
    this.lent.delete(view);
    this.free.push(whole);
  }
}

/**
 * Buffers of a maximal block (a drained part's tail, the one read most); larger tails, which parts
 * answered early leave, get buffers of their own. About 16 MiB stay pooled (at least two).
 */
export function tailBufferPool(largestBlockBytes: number): BufferPool {
  return new BufferPool(largestBlockBytes, Math.max(2, Math.floor((16 * 1024 * 1024) / largestBlockBytes)));
}
