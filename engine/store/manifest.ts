// A blob's manifest as every catalog stores it: the record's fields and its packed block
// references are the storage format (one implementation's bytes must read in another's code).
import type { StoredBlock } from './block-store.js';

/** A persisted manifest. Block references are packed: 32-byte digest + 8-byte xxh64 per block. */
export interface ManifestRecord {
  size: number;
  mediaType: string;
  chunker: string;
  createdAt: number;
  seq: number;
  refs: Buffer;
  sizes: Buffer;
  /** The blob is one small block kept in the catalog (`inline` database), not in the block store. */
  inline?: true;
}

export interface BlobSummary {
  id: string;
  size: number;
  mediaType: string;
  chunker: string;
  blockCount: number;
  createdAt: string;
}

export interface BlockRef {
  index: number;
  hex: string;
  offset: number;
  size: number;
  checksum: bigint;
}

/** A manifest decoded for reading: block i covers [offsets[i], offsets[i] + sizes[i]). */
export class Manifest {
  readonly blockCount: number;
  readonly offsets: Float64Array;

  constructor(
    readonly id: string,
    readonly record: ManifestRecord,
  ) {
    this.blockCount = record.sizes.length / 4;
    this.offsets = new Float64Array(this.blockCount + 1);
    for (let i = 0; i < this.blockCount; i++) this.offsets[i + 1] = this.offsets[i] + record.sizes.readUInt32LE(i * 4);
  }

  block(index: number): BlockRef {
    const r = this.record.refs;
    return {
      index,
      hex: r.toString('hex', index * 40, index * 40 + 32),
      offset: this.offsets[index],
      size: this.blockSize(index),
      checksum: r.readBigUInt64LE(index * 40 + 32),
    };
  }

  blockSize(index: number): number {
    return this.record.sizes.readUInt32LE(index * 4);
  }

  /** Index of the block holding byte `pos` (0 <= pos < size). */
  blockAt(pos: number): number {
    let lo = 0;
    let hi = this.blockCount - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.offsets[mid] <= pos) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  summary(): BlobSummary {
    return summarize(this.id, this.record);
  }

  private httpDate?: string;

  /** Publication time in whole seconds, as an HTTP date (Last-Modified); computed once. */
  get lastModified(): string {
    return (this.httpDate ??= new Date(this.lastModifiedMs).toUTCString());
  }

  get lastModifiedMs(): number {
    return Math.floor(this.record.createdAt / 1000) * 1000;
  }
}

export function summarize(id: string, r: ManifestRecord): BlobSummary {
  return {
    id,
    size: r.size,
    mediaType: r.mediaType,
    chunker: r.chunker,
    blockCount: r.sizes.length / 4,
    createdAt: new Date(r.createdAt).toISOString(),
  };
}

/** Block references as stored in a manifest: 32-byte digest + 8-byte xxh64 each, and the sizes. */
export function pack(blocks: readonly StoredBlock[]): { refs: Buffer; sizes: Buffer } {
  const refs = Buffer.allocUnsafe(blocks.length * 40);
  const sizes = Buffer.allocUnsafe(blocks.length * 4);
  blocks.forEach((b, i) => {
    refs.write(b.hex, i * 40, 'hex');
    refs.writeBigUInt64LE(b.checksum, i * 40 + 32);
    sizes.writeUInt32LE(b.size, i * 4);
  });
  return { refs, sizes };
}

