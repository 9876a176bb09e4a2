import { xxh64 } from '@node-rs/xxhash';
import { storageFailure } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { Stats } from '../ops/index.js';
import { BlockCache } from './block-cache.js';
import type { BlobCatalog, BlockStore, Manifest } from '../store/index.js';
import type { TransferMemory } from './transfer-memory.js';

/** Idle read buffers kept for reuse, at most this many bytes in all. */
const IDLE_READ_BUFFER_BYTES = 32 * 1024 * 1024;

/**
 * Read buffers recycled across downloads, by size class (powers of two): buffers allocated per
 * request count as V8 external memory, whose major GCs then take the main thread.
 */
class ReadBuffers {
  private readonly idle = new Map<number, Buffer[]>();
  private idleBytes = 0;

  static capacity(size: number): number {
    return 2 ** Math.ceil(Math.log2(size));
  }

  take(size: number): Buffer {
    const capacity = ReadBuffers.capacity(size);
    const buffer = this.idle.get(capacity)?.pop();
    if (!buffer) return Buffer.allocUnsafeSlow(capacity);
    this.idleBytes -= capacity;
    return buffer;
  }

  give(buffer: Buffer): void {
    if (this.idleBytes + buffer.length > IDLE_READ_BUFFER_BYTES) return;
    let list = this.idle.get(buffer.length);
    if (!list) this.idle.set(buffer.length, (list = []));
    list.push(buffer);
    this.idleBytes += buffer.length;
  }
}

/**
 * The read path: fetches only the blocks a range touches, checks each block's xxh64 before any
 * of its bytes are handed out, and reads one block ahead of the consumer.
 */
export class BlobReader {
  private readonly cache: BlockCache;
  private readonly buffers = new ReadBuffers();

  constructor(
    private readonly manifests: BlobCatalog,
    private readonly store: BlockStore,
    cacheBytes: number,
    private readonly stats: Stats,
    private readonly log: Logger,
    private readonly memory: TransferMemory,
  ) {
    this.cache = new BlockCache(cacheBytes);
  }

  /** Block `index` of the manifest, verified. A mismatch is a 500 and is recorded as corruption. */
  async block(manifest: Manifest, index: number, into?: Buffer): Promise<Buffer> {
    const ref = manifest.block(index);
    let bytes = this.cache.get(ref.hex) ?? (manifest.record.inline ? await this.manifests.inlineBytes(manifest.id) : undefined);
    if (!bytes) {
      try {
        if (manifest.record.inline) throw new Error('inline bytes missing from the catalog');
        bytes = await this.store.read(ref.hex, ref.size, into);
      } catch (err) {
        this.log.error('read: block unreadable', { block: ref.hex, err: String(err) });
        throw storageFailure('A block of this blob could not be read');
      }
    }
    if (xxh64(bytes) !== ref.checksum) {
      this.cache.delete(ref.hex);
      this.stats.recordCorrupt(`sha-256:${ref.hex}:${ref.size}`);
      this.log.error('read: block checksum mismatch', { block: ref.hex, blob: manifest.id, inline: manifest.record.inline === true });
      throw storageFailure('A block of this blob failed its checksum; nothing corrupt is served');
    }
    // Bytes read into a recycled buffer are not kept: the buffer serves another download next
    // (a store may read even a small block into it; S3's does).
    if (!into || bytes.buffer !== into.buffer) this.cache.set(ref.hex, bytes);
    return bytes;
  }

  /**
   * The bytes [start, end) when they lie in one cached block that still passes its checksum,
   * else undefined (then use `range`).
   */
  cachedRange(manifest: Manifest, start: number, end: number): Buffer | undefined {
    const index = manifest.blockAt(start);
    if (manifest.blockAt(end - 1) !== index) return undefined;
    const ref = manifest.block(index);
    const bytes = this.cache.get(ref.hex);
    if (!bytes || xxh64(bytes) !== ref.checksum) return undefined;
    return bytes.subarray(start - ref.offset, end - ref.offset);
  }

  /**
   * The bytes [start, end) as verified pieces, in order. A piece is valid until the next one is
   * requested: the store's `readAhead` + 1 buffers take turns (one being sent, the others being
   * read ahead), reserved from the transfer memory budget, so a download holds at most that many
   * blocks whatever the blob size.
   */
  async *range(manifest: Manifest, start: number, end: number): AsyncGenerator<Buffer> {
    if (start >= end) return;
    const firstIndex = manifest.blockAt(start);
    const lastIndex = manifest.blockAt(end - 1);
    let largest = 0;
    for (let i = firstIndex; i <= lastIndex; i++) largest = Math.max(largest, manifest.blockSize(i));
    const pooled = largest > BlockCache.MAX_ENTRY;
    // One buffer being sent and `readAhead` being filled, each reused every `count` blocks.
    const count = Math.min(this.store.readAhead + 1, lastIndex - firstIndex + 1);
    const reserved = pooled ? count * ReadBuffers.capacity(largest) : 0;
    if (pooled) {
      await new Promise<void>((admit) => this.memory.reserve(reserved, admit));
      this.memory.track(reserved);
    }
    const buffers = pooled ? Array.from({ length: count }, () => this.buffers.take(largest)) : [];
    const read = (i: number) => {
      const pending = this.block(manifest, i, buffers[i % count]);
      pending.catch(() => {}); // surfaced when awaited
      return pending;
    };
    const ahead: Promise<Buffer>[] = [];
    let nextRead = firstIndex;
    try {
      for (let i = firstIndex; i <= lastIndex; i++) {
        while (nextRead <= lastIndex && nextRead < i + count) ahead.push(read(nextRead++));
        const bytes = await ahead.shift()!;
        const offset = manifest.offsets[i];
        const from = Math.max(start, offset) - offset;
        const to = Math.min(end, offset + bytes.length) - offset;
        yield from === 0 && to === bytes.length ? bytes : bytes.subarray(from, to);
      }
    } finally {
      // Reads ahead may still be filling buffers when the consumer gives up: they must land
      // before the buffers serve another download.
      await Promise.all(ahead.map((p) => p.catch(() => {})));
      for (const b of buffers) this.buffers.give(b);
      if (pooled) {
        this.memory.track(-reserved);
        this.memory.unreserve(reserved);
      }
    }
  }
}
