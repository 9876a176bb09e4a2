import { xxh64 } from '@node-rs/xxhash';
import { storageFailure } from '../errors.js';
import type { Logger } from '../log.js';
import type { Stats } from '../ops/stats.js';
import type { FsBlockStore } from '../store/fs-block-store.js';
import { BlockCache } from './block-cache.js';
import type { Manifest, ManifestStore } from './manifests.js';
import type { TransferMemory } from './transfer-memory.js';

/**
 * The read path: fetches only the blocks a range touches, checks each block's xxh64 before any
 * of its bytes are handed out, and reads one block ahead of the consumer.
 */
export class BlobReader {
  private readonly cache: BlockCache;

  constructor(
    private readonly manifests: ManifestStore,
    private readonly store: FsBlockStore,
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
    let bytes = this.cache.get(ref.hex) ?? (manifest.record.inline ? this.manifests.inlineBytes(manifest.id) : undefined);
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
      this.stats.corruptBlocks.add(`sha-256:${ref.hex}:${ref.size}`);
      this.log.error('read: block checksum mismatch', { block: ref.hex, blob: manifest.id, inline: manifest.record.inline === true });
      throw storageFailure('A block of this blob failed its checksum; nothing corrupt is served');
    }
    this.cache.set(ref.hex, bytes);
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
   * requested: two buffers alternate (one being sent, one being read ahead), reserved from the
   * transfer memory budget, so a download holds at most two blocks whatever the blob size.
   */
  async *range(manifest: Manifest, start: number, end: number): AsyncGenerator<Buffer> {
    if (start >= end) return;
    const firstIndex = manifest.blockAt(start);
    const lastIndex = manifest.blockAt(end - 1);
    let largest = 0;
    for (let i = firstIndex; i <= lastIndex; i++) largest = Math.max(largest, manifest.blockSize(i));
    const pooled = largest > BlockCache.MAX_ENTRY;
    const reserved = pooled ? 2 * largest : 0;
    if (pooled) {
      await new Promise<void>((admit) => this.memory.reserve(reserved, admit));
      this.memory.track(reserved);
    }
    try {
      const buffers = pooled ? [Buffer.allocUnsafe(largest), Buffer.allocUnsafe(largest)] : [];
      const read = (i: number) => this.block(manifest, i, buffers[i % 2]);
      let next: Promise<Buffer> = read(firstIndex);
      for (let i = firstIndex; i <= lastIndex; i++) {
        const current = next;
        if (i < lastIndex) {
          next = read(i + 1);
          next.catch(() => {}); // surfaced when awaited
        }
        const bytes = await current;
        const offset = manifest.offsets[i];
        const from = Math.max(start, offset) - offset;
        const to = Math.min(end, offset + bytes.length) - offset;
        yield from === 0 && to === bytes.length ? bytes : bytes.subarray(from, to);
      }
      await next.catch(() => {});
    } finally {
      if (pooled) {
        this.memory.track(-reserved);
        this.memory.unreserve(reserved);
      }
    }
  }
}
