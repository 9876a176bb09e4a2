// Decoded manifest records of small blobs, by id and incarnation (the manifest's seq): a record
// never changes, but an id deleted by its last holder and published again is a new record (its
// blocks may differ). Tenants' holdings are never cached: another node may remove them.
import type { ManifestRecord } from '../manifest.js';

const MAX_ENTRIES = 10_000;
/** Larger manifests are read each time: their bytes dwarf the round trip the cache saves. */
export const CACHEABLE_BLOCKS = 64;

export class ManifestRecordCache {
  private readonly entries = new Map<string, ManifestRecord>();

  /** The cached record of `id`, if any (its seq tells which incarnation it is). */
  peek(id: string): ManifestRecord | undefined {
    const hit = this.entries.get(id);
    if (hit) {
      this.entries.delete(id);
      this.entries.set(id, hit);
    }
    return hit;
  }

  remember(id: string, record: ManifestRecord): void {
    if (record.sizes.length / 4 > CACHEABLE_BLOCKS) return;
    this.entries.delete(id);
    this.entries.set(id, record);
    if (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
  }
}
