// Each tenant's retained document bytes: the distinct contents (`b3:<hex>`) its uploads and
// legacy imports stored, each counted once, as the blob catalog counts a tenant's distinct blobs,
// and the metadata entries its documents store (`meta:<metadataId>`: an entry's JSON bytes, once,
// however many versions carry it unchanged). With the blobs' count, the retained bytes its quota
// (SVC_TENANT_POLICY_FILE) bounds. Owner of `doc_tenant_content` ([tenant, key] → size),
// `doc_tenant_bytes` (tenant → bytes) and `doc_ledger_builds`, written in the unit of work that
// records the content or the entry, so a crash cannot leave the count wrong. Nothing is
// subtracted: documents and versions are never deleted, and stored content stays recorded (GC
// keeps it), the content of an upload whose bytes were sent again included.

import { tenantQuotaExceeded } from '../base/errors.js';
import { type PointKey, type Unit, type UnitStore, table } from '../store/index.js';

/** What a tenant may store (its policy, with security on) and what it retains outside documents. */
export interface TenantStorage {
  /** The tenant's limits; a field not set is no limit. */
  limits(tenant: string): { maxObjectBytes?: number; quotaBytes?: number };
  /**
   * The tenant gate for a document's bytes (engine/tenancy TenantGate.content), before any is
   * read: a declared length charged to the caller's byte budget (429) and judged against the
   * object limit and the quota (413, 507); for a body without one, the meter that charges it as it streams.
   */
  admitContent(caller: { tenant: string; subject: string }, declaredLength: number | undefined): Promise<((bytes: number) => void) | undefined>;
  /** The largest metadata entry as stored, in bytes (SVC_MAX_METADATA_ENTRY_BYTES). */
  readonly maxMetadataEntryBytes: number;
  /** The bytes of the distinct blobs the tenant holds (the blob catalog's count). */
  blobBytes(tenant: string): Promise<number>;
  /** Whether `key` is a view of the tenant made from one of `contents` (the view service's records; a derived write's provenance). */
  isViewOf?(tenant: string, key: string, contents: readonly string[]): Promise<boolean>;
}

/** A tenant's quota and its blobs' bytes, read before the unit that checks them. */
interface Room {
  quotaBytes: number;
  blobBytes: number;
}

/** The key of `doc_tenant_bytes` that says the ledger was built from the uploads (no tenant is named ''). */
const BUILT = '';

const CONTENTS = table<number, [string, string]>('doc_tenant_content');
const TOTALS = table<number, string>('doc_tenant_bytes');
/** Once-only passes over a catalog from before a count existed (the metadata entries'). */
const BUILDS = table<number, string>('doc_ledger_builds');
const ENTRIES_BUILT = 'metadata-entries';

/** The ledger's key of a metadata entry (content keys are `b3:<hex>`). */
const entryKey = (metadataId: string) => `meta:${metadataId}`;

/** A metadata entry a document stores: its id and its bytes (metadata.ts, storedEntryBytes). */
export interface StoredEntry {
  id: string;
  bytes: number;
}

export class ContentLedger {
  constructor(
    private readonly store: UnitStore,
    private readonly storage: TenantStorage,
  ) {}

  /** Counts, once, the contents of a catalog from before the ledger: every upload's that has some. */
  async build(uploaded: AsyncIterable<{ tenant: string; key: string; size: number }>): Promise<void> {
    if (await this.store.has(TOTALS, BUILT)) return;
    for await (const c of uploaded) await this.store.run((unit) => this.hold(unit, c.tenant, c.key, c.size, undefined));
    await this.store.run((unit) => unit.put(TOTALS, BUILT, 0));
  }

  /**
   * Counts, once, the metadata entries of a catalog from before they were counted: each
   * document's distinct entries, a unit per document; an entry held already (counted when
   * written, or by an earlier pass that stopped) is skipped, so a pass run again counts nothing twice.
   */
  async buildEntries(documents: AsyncIterable<{ tenant: string; entries: StoredEntry[] }>): Promise<void> {
    if (await this.store.has(BUILDS, ENTRIES_BUILT)) return;
    for await (const d of documents) {
      if (d.entries.length === 0) continue;
      await this.store.run(async (unit) => {
        for (const e of d.entries) await this.hold(unit, d.tenant, entryKey(e.id), e.bytes, undefined);
      });
    }
    await this.store.run((unit) => unit.put(BUILDS, ENTRIES_BUILT, Date.now()));
  }

  /**
   * In the caller's unit, before any of its writes: metadata entries new to the catalog (ids just
   * minted, so never held: no read for them) are the tenant's, their bytes counted. With `room`,
   * checked against the quota here: 507 and nothing written.
   */
  async holdEntries(unit: Unit, tenant: string, entries: readonly StoredEntry[], room: Room | undefined): Promise<void> {
    let size = 0;
    for (const e of entries) size += e.bytes;
    if (room) {
      // The total is read outside the unit's preconditions and added to, not rewritten: a unit that
      // read it would conflict with every other write of the tenant and run again (canonical writes
      // of one tenant would go one at a time). Writes in flight together may pass the quota by what
      // they add, as a blob and a content stored at the same instant may.
      const held = (await this.store.get(TOTALS, tenant)) ?? 0;
      if (room.blobBytes + held + size > room.quotaBytes) throw tenantQuotaExceeded({ quotaBytes: room.quotaBytes, retainedBytes: room.blobBytes + held, size }, 'Storing this metadata');
    }
    unit.add(TOTALS, tenant, size);
    for (const e of entries) unit.put(CONTENTS, [tenant, entryKey(e.id)], e.bytes);
  }

  /** The bytes of the distinct contents and metadata entries the tenant's documents and uploads stored. */
  async bytes(tenant: string): Promise<number> {
    return (await this.store.get(TOTALS, tenant)) ?? 0;
  }

  /** The tenant's quota and its blobs' bytes; undefined when it has no quota. */
  async room(tenant: string): Promise<Room | undefined> {
    const quotaBytes = this.storage.limits(tenant).quotaBytes;
    return quotaBytes === undefined ? undefined : { quotaBytes, blobBytes: await this.storage.blobBytes(tenant) };
  }

  /** 507 when content `key` of `size` bytes is new to the tenant and would take it past its quota. */
  async checkRoom(tenant: string, key: string, size: number): Promise<void> {
    const room = await this.room(tenant);
    if (room && !(await this.store.has(CONTENTS, [tenant, key]))) this.fits(room, await this.bytes(tenant), size);
  }

  /** What `hold` reads with a `room`, for the caller's `Unit.prefetch` with its own reads (one round trip on pg-s3); without one it reads nothing. */
  holdReads(tenant: string, key: string): PointKey[] {
    return [{ table: CONTENTS, key: [tenant, key] }, { table: TOTALS, key: tenant }];
  }

  /**
   * In the caller's unit: content `key` is the tenant's from now on, counted once. With `room`,
   * checked again here (another upload may have taken it since): 507 and nothing written.
   */
  async hold(unit: Unit, tenant: string, key: string, size: number, room: Room | undefined): Promise<void> {
    if (!room) {
      // No quota to check: written and counted by the commit where the tenant has no such content
      // yet (no read: concurrent uploads do not run each other again).
      unit.putIfAbsent(CONTENTS, [tenant, key], size, { table: TOTALS, key: tenant, delta: size });
      return;
    }
    if (await unit.has(CONTENTS, [tenant, key])) return;
    unit.put(CONTENTS, [tenant, key], size);
    const held = (await unit.get(TOTALS, tenant)) ?? 0;
    this.fits(room, held, size);
    unit.put(TOTALS, tenant, held + size);
  }

  private fits(room: Room, held: number, size: number): void {
    if (room.blobBytes + held + size > room.quotaBytes) throw tenantQuotaExceeded({ quotaBytes: room.quotaBytes, retainedBytes: room.blobBytes + held, size }, 'Storing this document content');
  }
}
