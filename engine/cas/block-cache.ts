/** LRU of small block bytes (by digest) for the read path, bounded in bytes. */
export class BlockCache {
  static readonly MAX_ENTRY = 65536;
  private readonly entries = new Map<string, Buffer>();
  private bytes = 0;

  constructor(private readonly capacity: number) {}

  get(hex: string): Buffer | undefined {
    const hit = this.entries.get(hex);
    if (hit) {
      this.entries.delete(hex);
      this.entries.set(hex, hit);
    }
    return hit;
  }

  set(hex: string, block: Buffer): void {
    // Only small blocks, which are read into buffers of their own, are kept.
    if (block.length > BlockCache.MAX_ENTRY || block.length > this.capacity || this.entries.has(hex)) return;
    this.entries.set(hex, block);
    this.bytes += block.length;
    for (const [key, value] of this.entries) {
      if (this.bytes <= this.capacity) break;
      this.entries.delete(key);
      this.bytes -= value.length;
    }
  }

  delete(hex: string): void {
    const hit = this.entries.get(hex);
    if (hit) {
      this.entries.delete(hex);
      this.bytes -= hit.length;
    }
  }
}
