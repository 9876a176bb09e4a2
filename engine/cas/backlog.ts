import { SpillFile } from './spill.js';

/**
 * Body bytes that arrived while their upload could not take them, kept in arrival order: in
 * memory up to a limit, then in a spill file. uWS keeps reading a socket despite pause() for as
 * long as each data callback is slower than the sender refills the receive buffer, so such
 * bytes can be many; only the first `memoryLimit` of them stay in memory.
 */
export class Backlog {
  private chunks: Buffer[] = [];
  /** Bytes of chunks[0] already taken. */
  private head = 0;
  private inMemory = 0;
  private file: SpillFile | null = null;

  constructor(
    private readonly memoryLimit: number,
    private readonly spillDir: string,
    private readonly onSpill: (bytes: number) => void,
  ) {}

  /** Bytes waiting, in memory and on disk. */
  get pending(): number {
    return this.inMemory + (this.file?.pending ?? 0);
  }

  get memoryBytes(): number {
    return this.inMemory;
  }

  /** Copies `chunk` in (it is only valid during the caller's callback). */
  push(chunk: Uint8Array): void {
    // Once bytes are on disk, later ones follow them there: order is the file's order.
    if (!this.file && this.inMemory + chunk.length <= this.memoryLimit) {
      this.chunks.push(Buffer.from(chunk));
      this.inMemory += chunk.length;
      return;
    }
    (this.file ??= new SpillFile(this.spillDir)).append(chunk);
    this.onSpill(chunk.length);
  }

  /** Moves up to `into.length` of the oldest bytes into `into`; returns how many. */
  take(into: Uint8Array): number {
    if (this.chunks.length > 0) {
      const chunk = this.chunks[0];
      const n = Math.min(into.length, chunk.length - this.head);
      into.set(chunk.subarray(this.head, this.head + n));
      this.head += n;
      this.inMemory -= n;
      if (this.head === chunk.length) {
        this.chunks.shift();
        this.head = 0;
      }
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
    this.chunks = [];
    this.inMemory = 0;
    this.file?.dispose();
    this.file = null;
  }
}
