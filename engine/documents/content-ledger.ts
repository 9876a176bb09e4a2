// Each tenant's retained document content: the distinct contents (`b3:<hex>`) its uploads and
// legacy imports stored, each counted once, as the blob catalog counts a tenant's distinct blobs.
// The two counts together are the retained bytes its quota (SVC_TENANT_POLICY_FILE) bounds. Owner
// of `doc_tenant_content` ([tenant, key] → size) and `doc_tenant_bytes` (tenant → bytes), written
// in the transaction that records the content, so a crash cannot leave the count wrong. Nothing is
// subtracted: documents and versions are never deleted, and stored content stays recorded (GC
// keeps it), the content of an upload whose bytes were sent again included.

import { tenantQuotaExceeded } from '../errors.js';
import type { OrderedTable, TableCatalog } from '../store/index.js';

/** What a tenant may store (its policy, with security on) and what it retains outside documents. */
export interface TenantStorage {
  /** The tenant's limits; a field not set is no limit. */
  limits(tenant: string): { maxObjectBytes?: number; quotaBytes?: number };
  /** The bytes of the distinct blobs the tenant holds (the blob catalog's count). */
  blobBytes(tenant: string): Promise<number>;
}

/** A tenant's quota and its blobs' bytes, read before the transaction that checks them. */
interface Room {
  quotaBytes: number;
  blobBytes: number;
}

/** The key of `doc_tenant_bytes` that says the ledger was built from the uploads (no tenant is named ''). */
const BUILT = '';

export class ContentLedger {
  private readonly contents: OrderedTable<number, [string, string]>;
  private readonly totals: OrderedTable<number, string>;

  constructor(
    env: TableCatalog,
    private readonly storage: TenantStorage,
  ) {
    this.contents = env.table('doc_tenant_content');
    this.totals = env.table('doc_tenant_bytes');
  }

  /** Counts, once, the contents of a catalog from before the ledger: every upload's that has some. */
  build(uploaded: Iterable<{ tenant: string; key: string; size: number }>): void {
    if (this.totals.doesExist(BUILT)) return;
    this.totals.transactionSync(() => {
      for (const c of uploaded) this.holdSync(c.tenant, c.key, c.size, undefined);
      this.totals.put(BUILT, 0);
    });
  }

  /** The bytes of the distinct contents the tenant's documents and uploads stored. */
  bytes(tenant: string): number {
    return this.totals.get(tenant) ?? 0;
  }

  /** The tenant's quota and its blobs' bytes; undefined when it has no quota. */
  async room(tenant: string): Promise<Room | undefined> {
    const quotaBytes = this.storage.limits(tenant).quotaBytes;
    return quotaBytes === undefined ? undefined : { quotaBytes, blobBytes: await this.storage.blobBytes(tenant) };
  }

  /** 507 when content `key` of `size` bytes is new to the tenant and would take it past its quota. */
  async checkRoom(tenant: string, key: string, size: number): Promise<void> {
    this.fits(tenant, key, size, await this.room(tenant));
  }

  /**
   * Inside the caller's transaction: content `key` is the tenant's from now on, counted once. With
   * `room`, checked again here (another upload may have taken it since): 507 and nothing written.
   */
  holdSync(tenant: string, key: string, size: number, room: Room | undefined): void {
    if (this.contents.doesExist([tenant, key])) return;
    this.fits(tenant, key, size, room);
    this.contents.put([tenant, key], size);
    this.totals.put(tenant, this.bytes(tenant) + size);
  }

  private fits(tenant: string, key: string, size: number, room: Room | undefined): void {
    if (!room || this.contents.doesExist([tenant, key])) return;
    if (room.blobBytes + this.bytes(tenant) + size > room.quotaBytes) throw tenantQuotaExceeded('Storing this document content');
  }
}
