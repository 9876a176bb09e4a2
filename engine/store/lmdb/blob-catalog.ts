import type { Database } from 'lmdb';
import { type BlockRecord, type EmbeddedBlobCatalog, type Publication, type PublicationGuard, type PublishOptions, seqOfCursor } from '../blob-catalog.js';
import { DEFAULT_TENANT } from '../tenants.js';
import type { StoredBlock } from '../block-store.js';
import { formatContentId } from '../../base/content-id.js';
import { type BlobSummary, Manifest, type ManifestRecord, pack, summarize } from '../manifest.js';
import type { CatalogEnv } from './env.js';

/** Decoded manifests of small blobs, most recently used last: they are immutable, so reads skip LMDB. */
const CACHED_MANIFESTS = 10_000;
const CACHEABLE_BLOCKS = 64;


/** A reused block's record is rewritten only when its touchedAt is older than this (cheap dedup). */
const TOUCH_GRANULARITY_MS = 60_000;

const LIVE_BYTES = 'liveBytes';
/** Most blocks a synchronous publication records (a large manifest's commit stays off this thread). */
const SYNC_COMMIT_MAX_BLOCKS = 4;


/** A tenant's publication of a blob: its own order, time and media type. */
interface TenantBlob {
  seq: number;
  createdAt: number;
  mediaType: string;
}

const TENANCY_MARK = 'tenancy';

/**
 * Owner of the `manifests`, `inventory` and `blocks` databases, and of the tenants' views of
 * them: `tenant_blobs` ([tenant, id] → its publication), `tenant_inventory` ([tenant, seq] → id),
 * `blob_owners` (id → tenants holding it), `tenant_bytes` (tenant → retained bytes) and
 * `tenant_blocks` (tenant NUL hex → the tenant has referenced the block). A manifest is stored
 * once, whoever published it; it goes when its last tenant deletes it. Publication is one LMDB
 * transaction: manifest, inventory entries and block records together, or nothing.
 */
export class LmdbBlobCatalog implements EmbeddedBlobCatalog {
  private readonly manifests: Database<ManifestRecord, string>;
  private readonly inventory: Database<string, number>;
  private readonly blocks: Database<BlockRecord, Buffer>;
  /** Bytes of single-block blobs small enough to live in the catalog: blob id → bytes. */
  private readonly inline: Database<Buffer, string>;
  /** Running totals kept with the block records: LIVE_BYTES, the bytes of every recorded block. */
  private readonly runningTotals: Database<number, string>;
  private readonly tenantBlobs: Database<TenantBlob, [string, string]>;
  private readonly tenantInventory: Database<string, [string, number]>;
  private readonly owners: Database<number, string>;
  private readonly tenantBytes: Database<number, string>;
  private readonly tenantBlocks: Database<true, string>;
  private nextSeq: number;

  constructor(private readonly env: CatalogEnv) {
    this.manifests = env.database<ManifestRecord, string>('manifests');
    this.inventory = env.database<string, number>('inventory');
    this.blocks = env.database<BlockRecord, Buffer>('blocks', { keyEncoding: 'binary' });
    this.inline = env.database<Buffer, string>('inline', { encoding: 'binary' });
    this.runningTotals = env.database<number, string>('block_totals');
    this.tenantBlobs = env.database('tenant_blobs') as unknown as Database<TenantBlob, [string, string]>;
    this.tenantInventory = env.database('tenant_inventory') as unknown as Database<string, [string, number]>;
    this.owners = env.database<number, string>('blob_owners');
    this.tenantBytes = env.database<number, string>('tenant_bytes');
    this.tenantBlocks = env.database<true, string>('tenant_blocks');
    if (this.runningTotals.get(LIVE_BYTES) === undefined) {
      // A catalog from before the total: count it once.
      let bytes = 0;
      for (const { value } of this.blocks.getRange()) bytes += value.size;
      this.runningTotals.putSync(LIVE_BYTES, bytes);
    }
    let last = 0;
    for (const key of this.inventory.getKeys({ reverse: true, limit: 1 })) last = key;
    for (const { value } of this.tenantBlobs.getRange()) last = Math.max(last, value.seq);
    this.nextSeq = last + 1;
    if (this.runningTotals.get(TENANCY_MARK) === undefined) this.backfillTenancy();
  }

  /** A catalog from before tenants: every manifest becomes the default tenant's, once. */
  private backfillTenancy(): void {
    this.runningTotals.transactionSync(() => {
      let bytes = 0;
      for (const { key: id, value } of this.manifests.getRange()) {
        this.tenantBlobs.put([DEFAULT_TENANT, id], { seq: value.seq, createdAt: value.createdAt, mediaType: value.mediaType });
        this.tenantInventory.put([DEFAULT_TENANT, value.seq], id);
        this.owners.put(id, 1);
        bytes += value.size;
      }
      if (bytes) this.tenantBytes.put(DEFAULT_TENANT, bytes);
      this.runningTotals.put(TENANCY_MARK, 1);
    });
  }

  /** The manifest as `tenant` published it (its own time, media type and order). */
  private view(id: string, record: ManifestRecord, mine: TenantBlob): Manifest {
    return new Manifest(id, { ...record, seq: mine.seq, createdAt: mine.createdAt, mediaType: mine.mediaType });
  }

  private readonly cache = new Map<string, Manifest>();

  get(id: string, tenant = DEFAULT_TENANT): Manifest | undefined {
    const cacheKey = `${tenant}\0${id}`;
    const hit = this.cache.get(cacheKey);
    if (hit) {
      this.cache.delete(cacheKey);
      this.cache.set(cacheKey, hit);
      return hit;
    }
    const mine = this.tenantBlobs.get([tenant, id]);
    const record = mine && this.manifests.get(id);
    if (!mine || !record) return undefined;
    const manifest = this.view(id, record, mine);
    if (manifest.blockCount <= CACHEABLE_BLOCKS) {
      this.cache.set(cacheKey, manifest);
      if (this.cache.size > CACHED_MANIFESTS) this.cache.delete(this.cache.keys().next().value!);
    }
    return manifest;
  }

  /** The bytes of the distinct blobs `tenant` holds (its quota's measure). */
  async retainedBytes(tenant: string): Promise<number> {
    return this.tenantBytes.get(tenant) ?? 0;
  }

  /** The tenant's blobs (a count of its range of `tenant_inventory`) and their bytes. */
  async tenantUsage(tenant: string): Promise<{ bytes: number; objects: number }> {
    const objects = this.tenantInventory.getKeysCount({ start: [tenant, 0], end: [tenant, Number.MAX_SAFE_INTEGER] });
    return { bytes: this.tenantBytes.get(tenant) ?? 0, objects };
  }

  /** The bytes of an inline blob. */
  async inlineBytes(id: string): Promise<Buffer | undefined> {
    return this.inline.get(id);
  }

  /**
   * Publishes a manifest once its blocks are durable. An id that is already published keeps its
   * first manifest (same bytes, same id) and that one is returned. With `inlineBytes` the blob's
   * one block is written in the same transaction instead of to the block store.
   */
  async publish(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[], inlineBytes?: Uint8Array, options: PublishOptions = {}): Promise<Publication> {
    const id = formatContentId(hex, size);
    const tenant = options.tenant ?? DEFAULT_TENANT;
    const { refs, sizes } = pack(blocks);
    const now = Date.now();
    let existed = false;
    let newToTenant: boolean[] | undefined;
    const write = (): Manifest => {
      const mine = this.tenantBlobs.get([tenant, id]);
      let record = this.manifests.get(id);
      if (mine && record) {
        existed = true;
        return this.view(id, record, mine);
      }
      const retained = this.tenantBytes.get(tenant) ?? 0;
      if (options.quotaBytes !== undefined && retained + size > options.quotaBytes) {
        throw options.quotaExceeded?.(retained) ?? new Error('quota exceeded');
      }
      // Stored once for every tenant: a blob another tenant holds is only added to this one's.
      const created = !record;
      if (!record) {
        record = { size, mediaType, chunker, createdAt: now, seq: this.nextSeq++, refs, sizes };
        if (inlineBytes) {
          record.inline = true;
          this.inline.put(id, Buffer.from(inlineBytes));
        } else {
          this.recordBlocks(refs, blocks, now);
        }
        this.manifests.put(id, record);
        this.inventory.put(record.seq, id);
      }
      const entry: TenantBlob = { seq: created ? record.seq : this.nextSeq++, createdAt: now, mediaType };
      this.tenantBlobs.put([tenant, id], entry);
      this.tenantInventory.put([tenant, entry.seq], id);
      this.owners.put(id, (this.owners.get(id) ?? 0) + 1);
      this.tenantBytes.put(tenant, (this.tenantBytes.get(tenant) ?? 0) + size);
      if (options.tenantBlocks) newToTenant = this.claimBlocks(tenant, blocks);
      return this.view(id, record, entry);
    };
    // A small publication commits on this thread, grouped with this turn's other small commits (CatalogEnv.commit; a large manifest's stays off this thread).
    const manifest = await this.env.commit(write, blocks.length <= SYNC_COMMIT_MAX_BLOCKS);
    return { manifest, existed, newToTenant };
  }

  /** Inside a publication: which of the blocks are new to `tenant` (each recorded as its own from now on). */
  private claimBlocks(tenant: string, blocks: readonly StoredBlock[]): boolean[] {
    return blocks.map((b) => {
      const key = `${tenant}\0${b.hex}`;
      if (this.tenantBlocks.doesExist(key)) return false;
      this.tenantBlocks.put(key, true);
      return true;
    });
  }

  /**
   * A manifest record kept by its caller instead of published (document content): the block
   * records are written as for a publication, nothing enters the manifests or the inventory.
   */
  async recordUnlisted(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[]): Promise<{ id: string; record: ManifestRecord }> {
    const { refs, sizes } = pack(blocks);
    const now = Date.now();
    await this.manifests.transaction(() => this.recordBlocks(refs, blocks, now));
    return { id: formatContentId(hex, size), record: { size, mediaType, chunker, createdAt: now, seq: 0, refs, sizes } };
  }

  /**
   * Inside a publication's transaction: a record for each new block, a fresher `touchedAt` for
   * each reused one (so GC's minimum age counts from the last reference), and the guard.
   */
  private recordBlocks(refs: Buffer, blocks: readonly StoredBlock[], now: number): void {
    let added = 0;
    for (let i = 0; i < blocks.length; i++) {
      const key = refs.subarray(i * 40, i * 40 + 32);
      this.guard?.referencedSync(key, blocks[i].hex, blocks[i].size);
      const record = this.blocks.get(key);
      if (!record) {
        this.blocks.put(Buffer.from(key), { size: blocks[i].size, createdAt: now });
        added += blocks[i].size;
      } else if (now - (record.touchedAt ?? record.createdAt) > TOUCH_GRANULARITY_MS) this.blocks.put(Buffer.from(key), { ...record, touchedAt: now });
    }
    if (added) this.addLiveBytes(added);
  }

  private addLiveBytes(delta: number): void {
    this.runningTotals.put(LIVE_BYTES, (this.runningTotals.get(LIVE_BYTES) ?? 0) + delta);
  }


  private guard?: PublicationGuard;

  /** Garbage collection's hook into every publication (engine/gc). */
  setGuard(guard: PublicationGuard): void {
    this.guard = guard;
  }

  /** A block's record (GC: its age), read in the caller's transaction if any. */
  blockRecord(key: Buffer): BlockRecord | undefined {
    return this.blocks.get(key);
  }

  /** GC, inside its transaction: the record of a block moved to quarantine goes (`blocks` counts live blocks). */
  forgetBlockSync(key: Buffer): void {
    const record = this.blocks.get(key);
    if (!record) return;
    this.blocks.remove(key);
    this.addLiveBytes(-record.size);
  }

  /** GC, inside its transaction: the record of a block moved back from quarantine. */
  restoreBlockSync(key: Buffer, record: BlockRecord): void {
    if (this.blocks.doesExist(key)) return;
    this.blocks.put(Buffer.from(key), record);
    this.addLiveBytes(record.size);
  }

  /**
   * GC marking: the block digests of up to about `maxDigests` published manifests' blocks,
   * starting after manifest id `after`; `next` is where to go on (undefined at the end).
   * Pages are separate reads: publications after marking began are marked by the guard.
   */
  referencedPage(after: string | undefined, maxDigests: number): { digests: Buffer[]; next?: string } {
    const digests: Buffer[] = [];
    let last: string | undefined;
    for (const { key, value } of this.manifests.getRange({ start: after, snapshot: false })) {
      if (key === after) continue;
      if (value.inline) {
        last = key;
        continue;
      }
      for (let at = 0; at < value.refs.length; at += 40) digests.push(value.refs.subarray(at, at + 32));
      last = key;
      if (digests.length >= maxDigests) return { digests, next: last };
    }
    return { digests };
  }

  /**
   * Removes `tenant`'s hold on the manifest; the manifest and its inventory entry go with the
   * last tenant's; blocks stay for GC. False when the tenant does not hold it.
   */
  async remove(id: string, tenant = DEFAULT_TENANT): Promise<boolean> {
    const cacheKey = `${tenant}\0${id}`;
    this.cache.delete(cacheKey);
    const removed = await this.manifests.transaction(() => {
      const mine = this.tenantBlobs.get([tenant, id]);
      const record = this.manifests.get(id);
      if (!mine || !record) return false;
      this.tenantBlobs.remove([tenant, id]);
      this.tenantInventory.remove([tenant, mine.seq]);
      this.tenantBytes.put(tenant, Math.max(0, (this.tenantBytes.get(tenant) ?? 0) - record.size));
      const owners = (this.owners.get(id) ?? 1) - 1;
      if (owners > 0) {
        this.owners.put(id, owners);
        return true;
      }
      this.owners.remove(id);
      this.manifests.remove(id);
      this.inventory.remove(record.seq);
      // An inline blob's bytes are its own (no other manifest refers to them): they go with it.
      if (record.inline) this.inline.remove(id);
      return true;
    });
    // Again: a read between the first eviction and the commit may have cached it anew.
    this.cache.delete(cacheKey);
    return removed;
  }

  /** `tenant`'s blobs, most recently published first, starting below the sequence number `cursor`. */
  async page(limit: number, cursor?: string, tenant = DEFAULT_TENANT): Promise<{ summaries: BlobSummary[]; next?: string }> {
    const beforeSeq = cursor === undefined ? undefined : seqOfCursor(cursor);
    const summaries: BlobSummary[] = [];
    let lastSeq: number | undefined;
    let more = false;
    const start: [string, number] = [tenant, beforeSeq === undefined ? Number.MAX_SAFE_INTEGER : beforeSeq - 1];
    for (const { key, value: id } of this.tenantInventory.getRange({ reverse: true, start, end: [tenant, 0] })) {
      if (summaries.length === limit) {
        more = true;
        break;
      }
      const mine = this.tenantBlobs.get([tenant, id]);
      const record = mine && this.manifests.get(id);
      if (!mine || !record) continue;
      summaries.push(summarize(id, { ...record, createdAt: mine.createdAt, mediaType: mine.mediaType }));
      lastSeq = key[1];
    }
    return { summaries, next: more && lastSeq !== undefined ? String(lastSeq) : undefined };
  }

  async totals(): Promise<{ blobs: number; blocks: number; storedBytes: number }> {
    return {
      blobs: (this.manifests.getStats() as { entryCount: number }).entryCount,
      blocks: (this.blocks.getStats() as { entryCount: number }).entryCount,
      storedBytes: this.runningTotals.get(LIVE_BYTES) ?? 0,
    };
  }

  probe(): Promise<void> {
    return this.env.probe();
  }
}
