// The S3-only backend's object layout under SVC_S3_PREFIX (docs/backends.md, "s3"). Block
// objects and their quarantine are the S3 block store's (engine/store/s3/block-store.ts). A
// tenant id may hold any character and a key segment must not hold '/': tenants are base64url.
import { contentIdOf, formatContentId } from '../../base/content-id.js';

/** Inventory positions count down from this, so that a listing (ascending keys) is newest first. */
const SEQ_CEILING = 9_000_000_000_000_000; // below 2^53: exact as a JS number
const SEQ_DIGITS = 16;
const PART_DIGITS = 8;
/** `<session>/<index>` under the parts root: a part object (markers live under `<session>/ids/`). */
const UPLOAD_PART = /^([^/]+)\/([0-9]{8})$/;
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

  /** A secret every node reads (kept-secret.ts), e.g. the cursor key. */
  secret(name: string): string {
    return `${this.prefix}secrets/${name}`;
  }

  /** A resumable session's record (upload-catalog.ts): changed only by compare-and-swap. */
  uploadSession(id: string): string {
    return `${this.uploadSessionsPrefix()}${encodeURIComponent(id)}`;
  }

  uploadSessionsPrefix(): string {
    return `${this.prefix}upload-sessions/`;
  }

  /**
   * An empty object naming one of the tenant's sessions (upload-catalog.ts): the tenant's
   * sessions listed without reading every tenant's; the record says what the session holds.
   */
  uploadTenantSession(tenant: string, id: string): string {
    return `${this.uploadTenantSessionsPrefix(tenant)}${encodeURIComponent(id)}`;
  }

  uploadTenantSessionsPrefix(tenant: string): string {
    return `${this.prefix}upload-tenant-sessions/${this.tenantSegment(tenant)}/`;
  }

  /** Every object of a session's parts: its part objects and its part-id markers. */
  uploadParts(id: string): string {
    return `${this.uploadPartsRoot()}${encodeURIComponent(id)}/`;
  }

  uploadPartsRoot(): string {
    return `${this.prefix}upload-parts/`;
  }

  /** The session's part at `index` (8 digits: listed in order). */
  uploadPart(id: string, index: number): string {
    return `${this.uploadParts(id)}${String(index).padStart(PART_DIGITS, '0')}`;
  }

  /** An empty object saying that part `partId` was written at `index` (counted only if the record counts that index and the part there is it). */
  uploadPartId(id: string, partId: string, index: number): string {
    return `${this.uploadPartIdPrefix(id, partId)}${String(index).padStart(PART_DIGITS, '0')}`;
  }

  uploadPartIdPrefix(id: string, partId: string): string {
    return `${this.uploadParts(id)}ids/${encodeURIComponent(partId)}/`;
  }

  /** The session and index of a part object's key (not a marker's); undefined for any other key. */
  parseUploadPart(key: string): { id: string; index: number } | undefined {
    const m = UPLOAD_PART.exec(key.slice(this.uploadPartsRoot().length));
    return key.startsWith(this.uploadPartsRoot()) && m ? { id: decodeURIComponent(m[1]!), index: Number(m[2]) } : undefined;
  }

  /** One GC run at a time: the lease. */
  gcLease(): string {
    return `${this.prefix}gc/lease`;
  }

  gcLastRun(): string {
    return `${this.prefix}gc/last-run`;
  }
}
