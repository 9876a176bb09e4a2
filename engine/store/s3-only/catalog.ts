// The blob catalog of SVC_BLOB_BACKEND=s3: everything in the bucket (docs/backends.md, "s3").
// Per (tenant, blob) a holding (the tenant's manifest, pg-s3's journal format with the blob's
// inventory position) and an empty inventory entry whose key orders the tenant's blobs newest
// first; per tenant a ledger (ledger.ts) with its retained bytes. Block objects are the S3 block
// store's; inline blobs (at most SVC_INLINE_MAX_BYTES) keep their bytes in the holding and have
// no block object.
//
// Order of writes, so that a crash at any point leaves nothing half-published:
// - publication: ledger intent (+bytes, seq) → inventory entry → holding (If-None-Match: *, the
//   publication point) → intent dropped. An entry without a holding is never listed.
// - removal: ledger intent (−bytes) → holding deleted (the removal point) → entry deleted →
//   intent dropped.
import { LRUCache } from 'lru-cache';
import { formatContentId } from '../../base/content-id.js';
import { type BlobCatalog, InvalidCursorError, type Publication, type PublishOptions } from '../blob-catalog.js';
import type { StoredBlock } from '../block-store.js';
import { type Holding, decodeHolding, encodeHolding } from '../catalog-journal.js';
import { type BlobSummary, Manifest, type ManifestRecord, pack, summarize } from '../manifest.js';
import { KeyQueue } from '../key-queue.js';
import { DEFAULT_TENANT } from '../tenants.js';
import type { S3OnlyKeys } from './keys.js';
import { type Intent, TenantLedgers } from './ledger.js';
import type { NodeRegistry } from './nodes.js';
import { type ObjectIo, mapLimited } from './objects.js';

/** Holdings read at once for an inventory page. */
const READ_CONCURRENCY = 16;
/** Inline bytes kept after a read: the reader asks for them right after the manifest. */
const INLINE_CACHE_BYTES = 32 * 1024 ** 2;
/** totals() lists the bucket: at most once per this period. */
const TOTALS_MS = 30_000;

export class S3OnlyBlobCatalog implements BlobCatalog {
  readonly ledgers: TenantLedgers;
  /** A tenant's publication and removal of one blob, one at a time on this node. */
  private readonly serial = new KeyQueue();
  private readonly inline = new LRUCache<string, Buffer>({ maxSize: INLINE_CACHE_BYTES, sizeCalculation: (b) => Math.max(1, b.length) });
  /** A tenant that holds an inline blob, to read its bytes again once they left the cache. */
  private readonly inlineHolder = new LRUCache<string, string>({ max: 100_000 });
  private totalsCache?: { at: number; value: Promise<{ blobs: number; blocks: number; storedBytes: number }> };

  constructor(
    private readonly io: ObjectIo,
    private readonly keys: S3OnlyKeys,
    nodes: NodeRegistry,
    /** Block objects, live, a page at a time (totals). */
    private readonly listBlocks: (after?: string) => Promise<{ blocks: Array<{ size: number }>; next?: string }>,
  ) {
    this.ledgers = new TenantLedgers(io, keys, nodes, (tenant, intent) => this.settle(tenant, intent));
  }

  async get(id: string, tenant = DEFAULT_TENANT): Promise<Manifest | undefined> {
    const holding = await this.readHolding(tenant, id);
    return holding && manifestOf(holding);
  }

  async inlineBytes(id: string): Promise<Buffer | undefined> {
    const cached = this.inline.get(id);
    if (cached) return cached;
    const holder = this.inlineHolder.get(id);
    return holder === undefined ? undefined : (await this.readHolding(holder, id))?.inline;
  }

  async publish(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[], inlineBytes?: Uint8Array, options: PublishOptions = {}): Promise<Publication> {
    const id = formatContentId(hex, size);
    const tenant = options.tenant ?? DEFAULT_TENANT;
    return this.serial.run(`${tenant}\0${id}`, async () => {
      const held = await this.readHolding(tenant, id);
      if (held) return repeat(held);
      const quota = options.quotaBytes !== undefined && Number.isFinite(options.quotaBytes) ? options.quotaBytes : undefined;
      const seq = await this.ledgers.reserve(tenant, id, size, quota, options.quotaExceeded ?? (() => new Error('quota exceeded')));
      const entry = this.keys.inventoryEntry(tenant, seq, id);
      let outcome: 'published' | 'theirs' | 'unknown' | 'not written' = 'not written';
      let newToTenant: boolean[] | undefined;
      try {
        if (options.tenantBlocks) newToTenant = await this.claim(tenant, blocks, inlineBytes !== undefined);
        const { refs, sizes } = pack(blocks);
        const holding: Holding = {
          tenant, id, size, mediaType, createdAt: Date.now(), chunker, refs, sizes, seq,
          ...(inlineBytes ? { inline: Buffer.from(inlineBytes) } : {}),
          ...(options.tenantBlocks ? { claims: true as const } : {}),
        };
        await this.io.put(entry, Buffer.alloc(0), undefined, 'application/octet-stream');
        outcome = 'unknown';
        // The publication point: the first writer of the tenant's holding wins.
        const written = await this.io.put(this.keys.holding(tenant, id), encodeHolding(holding), { ifNoneMatch: true });
        outcome = written === 'refused' ? 'theirs' : 'published';
        if (outcome === 'theirs') {
          await this.io.delete(entry);
          await this.ledgers.finish(tenant, id, true);
          const theirs = await this.readHolding(tenant, id);
          if (!theirs) throw new Error(`holding of ${id}: refused as present, then absent`);
          return repeat(theirs);
        }
        await this.ledgers.finish(tenant, id);
        this.remember(holding);
        return { manifest: manifestOf(holding), existed: false, ...(newToTenant ? { newToTenant } : {}) };
      } catch (err) {
        if (outcome === 'not written') {
          // Nothing is published: the reservation goes (the entry, if written, is never listed and
          // goes too), and so do the claims it made (the tenant did not reference those blocks).
          await this.io.delete(entry).catch(() => {});
          await this.unclaim(tenant, blocks, newToTenant, inlineBytes !== undefined).catch(() => {});
          await this.ledgers.finish(tenant, id, true).catch(() => this.ledgers.abandon(tenant, id));
        } else if (outcome !== 'published') {
          // The holding may have been written: the next writer of the ledger settles it from the bucket.
          this.ledgers.abandon(tenant, id);
        }
        throw err;
      }
    });
  }

  /** Per block, whether the tenant never referenced it before (its claim object is new). */
  private async claim(tenant: string, blocks: readonly StoredBlock[], inline: boolean): Promise<boolean[]> {
    // An inline blob's one block is the blob itself, new to a tenant that did not hold it.
    if (inline) return blocks.map(() => true);
    // A block repeated within the blob is new at its first reference only.
    const seen = new Set<string>();
    const firsts = blocks.map((b) => !seen.has(b.hex) && seen.add(b.hex).has(b.hex));
    return mapLimited(blocks.map((b, i) => ({ b, first: firsts[i]! })), READ_CONCURRENCY, async ({ b, first }) => {
      if (!first) return false;
      const key = this.keys.claim(tenant, b.hex, b.size);
      // Without If-None-Match (one node) a HEAD tells whether the claim was there.
      if (!this.io.conditions.ifNoneMatch && (await this.io.exists(key))) return false;
      return (await this.io.put(key, Buffer.alloc(0), { ifNoneMatch: true }, 'application/octet-stream')) !== 'refused';
    });
  }

  /** Deletes the claims `claim` made (none for an inline blob: it makes none). */
  private async unclaim(tenant: string, blocks: readonly StoredBlock[], made: readonly boolean[] | undefined, inline: boolean): Promise<void> {
    if (!made || inline) return;
    await mapLimited(blocks.filter((_, i) => made[i]), READ_CONCURRENCY, (b) => this.io.delete(this.keys.claim(tenant, b.hex, b.size)));
  }

  async recordUnlisted(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[]): Promise<{ id: string; record: ManifestRecord }> {
    // Document content: its blocks are kept by the node's document roots (GC marks them); the bucket holds no record of it.
    const { refs, sizes } = pack(blocks);
    return { id: formatContentId(hex, size), record: { size, mediaType, chunker, createdAt: Date.now(), seq: 0, refs, sizes } };
  }

  async remove(id: string, tenant = DEFAULT_TENANT): Promise<boolean> {
    return this.serial.run(`${tenant}\0${id}`, async () => {
      let held = await this.readHolding(tenant, id);
      if (!held) return false;
      await this.ledgers.beginRemoval(tenant, id, held.size, held.seq ?? 0);
      if (this.io.honoursConditions) {
        // Another node may have removed it (or removed and published it again) before our intent
        // took the blob's lock: only the holding as it is now counts.
        held = await this.readHolding(tenant, id).catch((err: unknown) => {
          this.ledgers.abandon(tenant, id);
          throw err;
        });
        if (!held) {
          await this.ledgers.finish(tenant, id, true);
          return false;
        }
      }
      try {
        // The removal point; blocks stay for GC.
        await this.io.delete(this.keys.holding(tenant, id));
      } catch (err) {
        this.ledgers.abandon(tenant, id);
        throw err;
      }
      // The inline cache keeps the bytes: they are the id's content, asked for only after get() found a hold.
      const seq = held.seq;
      if (seq !== undefined) await this.io.delete(this.keys.inventoryEntry(tenant, seq, id)).catch(() => {});
      await this.ledgers.finish(tenant, id);
      return true;
    });
  }

  /** The tenant's blobs, newest first, after the inventory entry named `cursor`. */
  async page(limit: number, cursor?: string, tenant = DEFAULT_TENANT): Promise<{ summaries: BlobSummary[]; next?: string }> {
    if (cursor !== undefined && !this.keys.isInventoryName(cursor)) throw new InvalidCursorError();
    const prefix = this.keys.inventoryPrefix(tenant);
    const summaries: BlobSummary[] = [];
    let after = cursor === undefined ? undefined : prefix + cursor;
    let last: string | undefined;
    for (;;) {
      // One more than is missing: whether another entry follows the last one shown.
      const page = await this.io.page(prefix, after, limit - summaries.length + 1);
      const entries = page.keys.map((k) => this.keys.parseInventoryKey(tenant, k.key)).filter((e) => e !== undefined);
      const shown = entries.slice(0, limit - summaries.length);
      const holdings = await mapLimited(shown, READ_CONCURRENCY, (e) => this.readHolding(tenant, e.id));
      shown.forEach((e, i) => {
        const h = holdings[i];
        // An entry whose holding is absent (a publication cut short) or of another publication is not a blob.
        if (!h || this.keys.inventoryEntry(tenant, h.seq ?? 0, h.id) !== prefix + e.name) return;
        summaries.push(summarize(h.id, recordOf(h)));
        last = e.name;
      });
      if (summaries.length === limit) {
        // More follows if this page had an entry beyond those shown, or was cut short by the server.
        return { summaries, next: entries.length > shown.length || page.next ? last : undefined };
      }
      if (!page.next) return { summaries };
      after = page.next;
    }
  }

  retainedBytes(tenant: string): Promise<number> {
    return this.ledgers.bytes(tenant);
  }

  /** The tenant's ledger: its bytes and its blob count, kept with every publication and removal. */
  tenantUsage(tenant: string): Promise<{ bytes: number; objects: number }> {
    return this.ledgers.usage(tenant);
  }

  /**
   * Blobs from the ledgers, blocks and their bytes from a listing of the block objects: a scan,
   * so it runs at most once per TOTALS_MS and its answer is that old at most.
   */
  totals(): Promise<{ blobs: number; blocks: number; storedBytes: number }> {
    const c = this.totalsCache;
    if (c && Date.now() - c.at < TOTALS_MS) return c.value;
    const value = this.countTotals();
    this.totalsCache = { at: Date.now(), value };
    value.catch(() => (this.totalsCache = undefined));
    return value;
  }

  private async countTotals(): Promise<{ blobs: number; blocks: number; storedBytes: number }> {
    let blobs = 0;
    for await (const page of this.io.pages(this.keys.ledgersPrefix())) {
      const docs = await mapLimited(page, READ_CONCURRENCY, (o) => this.io.get(o.key));
      for (const d of docs) if (d) blobs += (JSON.parse(d.body.toString('utf8')) as { blobs?: number }).blobs ?? 0;
    }
    let blocks = 0;
    let storedBytes = 0;
    let after: string | undefined;
    do {
      const page = await this.listBlocks(after);
      blocks += page.blocks.length;
      for (const b of page.blocks) storedBytes += b.size;
      after = page.next;
    } while (after);
    return { blobs, blocks, storedBytes };
  }

  async probe(): Promise<void> {
    await this.io.page(this.keys.ledgersPrefix(), undefined, 1);
  }

  /** Settles an intent whose writer is gone: the change stands when the holding is as the write meant to leave it. */
  private async settle(tenant: string, intent: Intent): Promise<'stands' | 'undone'> {
    const present = await this.io.exists(this.keys.holding(tenant, intent.id));
    const stands = intent.op === 'add' ? present : !present;
    // The entry of a publication that did not happen, or of a removal that did, goes.
    if ((intent.op === 'add') !== present) await this.io.delete(this.keys.inventoryEntry(tenant, intent.seq, intent.id));
    return stands ? 'stands' : 'undone';
  }

  private async readHolding(tenant: string, id: string): Promise<Holding | undefined> {
    let key: string;
    try {
      key = this.keys.holding(tenant, id);
    } catch {
      return undefined;
    }
    const got = await this.io.get(key);
    if (!got) return undefined;
    const holding = decodeHolding(got.body);
    if (holding.tenant !== tenant || holding.id !== id) throw new Error(`${key}: the document names another tenant or blob than its key`);
    this.remember(holding);
    return holding;
  }

  private remember(holding: Holding): void {
    if (!holding.inline) return;
    this.inline.set(holding.id, holding.inline);
    this.inlineHolder.set(holding.id, holding.tenant);
  }
}

function recordOf(h: Holding): ManifestRecord {
  return {
    size: h.size,
    mediaType: h.mediaType,
    chunker: h.chunker,
    createdAt: h.createdAt,
    seq: h.seq ?? 0,
    refs: h.refs,
    sizes: h.sizes,
    ...(h.inline ? { inline: true as const } : {}),
  };
}

function manifestOf(h: Holding): Manifest {
  return new Manifest(h.id, recordOf(h));
}

/** The tenant holds the blob already: its manifest, nothing changed (no block is new to it; the caller counts none). */
function repeat(held: Holding): Publication {
  return { manifest: manifestOf(held), existed: true };
}
