// The S3-only backend's object layout under SVC_S3_PREFIX (docs/backends.md, "s3"). Block
// objects and their quarantine are the S3 block store's (engine/store/s3/block-store.ts). A
// tenant id may hold any character and a key segment must not hold '/': tenants are base64url.
import { contentIdOf, formatContentId } from '../../cas/content-id.js';

/** Inventory positions count down from this, so that a listing (ascending keys) is newest first. */
const SEQ_CEILING = 9_000_000_000_000_000; // below 2^53: exact as a JS number
const SEQ_DIGITS = 16;
/** An inventory entry's name: `<16-digit reversed seq>-<sha256 hex>-<size>`; also the page cursor. */
const INVENTORY_NAME = /^([0-9]{16})-([0-9a-f]{64})-([0-9]{1,16})$/;

export class S3OnlyKeys {
  constructor(readonly prefix: string) {}

  private tenantSegment(tenant: string): string {
    return Buffer.from(tenant).toString('base64url');
  }

  private blobName(id: string): string {
    const parsed = contentIdOf(id);
    if (!parsed) throw new Error(`not a content id: ${id}`);
    return `${parsed.hex}-${parsed.size}`;
  }

  /** The tenant's manifest of a blob (a holding document; the same key and format as pg-s3's journal). */
  holding(tenant: string, id: string): string {
    return `${this.prefix}holdings/${this.tenantSegment(tenant)}/${this.blobName(id)}`;
  }

  holdingsPrefix(): string {
    return `${this.prefix}holdings/`;
  }

  /** An empty object whose key orders the tenant's inventory: newest first. */
  inventoryEntry(tenant: string, seq: number, id: string): string {
    return `${this.inventoryPrefix(tenant)}${String(SEQ_CEILING - seq).padStart(SEQ_DIGITS, '0')}-${this.blobName(id)}`;
  }

  inventoryPrefix(tenant: string): string {
    return `${this.prefix}inventory/${this.tenantSegment(tenant)}/`;
  }

  /** The blob an inventory key names, with its name (the cursor after it); undefined for a foreign key. */
  parseInventoryKey(tenant: string, key: string): { id: string; name: string } | undefined {
    const prefix = this.inventoryPrefix(tenant);
    if (!key.startsWith(prefix)) return undefined;
    const name = key.slice(prefix.length);
    const m = INVENTORY_NAME.exec(name);
    return m ? { id: formatContentId(m[2]!, Number(m[3])), name } : undefined;
  }

  /** Whether `cursor` is an inventory entry's name (the only cursors this backend issues). */
  isInventoryName(cursor: string): boolean {
    return INVENTORY_NAME.test(cursor);
  }

  /** The tenant's ledger: retained bytes, blob count, next seq and the writes in progress. */
  ledger(tenant: string): string {
    return `${this.prefix}ledgers/${this.tenantSegment(tenant)}`;
  }

  ledgersPrefix(): string {
    return `${this.prefix}ledgers/`;
  }

  /** Marks that the tenant referenced a block (security on: freshBlocks counts against the tenant's own). */
  claim(tenant: string, hex: string, size: number): string {
    return `${this.prefix}claims/${this.tenantSegment(tenant)}/${hex}-${size}`;
  }

  /** A node's heartbeat. */
  node(nodeId: string): string {
    return `${this.nodesPrefix()}${encodeURIComponent(nodeId)}`;
  }

  nodesPrefix(): string {
    return `${this.prefix}nodes/`;
  }

  /** A root holder's record (nodes.ts): kept while the node is down, until it is forgotten. */
  rootHolder(nodeId: string): string {
    return `${this.rootHoldersPrefix()}${encodeURIComponent(nodeId)}`;
  }

  rootHoldersPrefix(): string {
    return `${this.prefix}root-holders/`;
  }

  /** The node that serves the document platform (documents-node.ts). */
  documentsNode(): string {
    return `${this.prefix}documents-node`;
  }

  /** One GC run at a time: the lease. */
  gcLease(): string {
    return `${this.prefix}gc/lease`;
  }

  gcLastRun(): string {
    return `${this.prefix}gc/last-run`;
  }
}
