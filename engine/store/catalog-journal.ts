// A catalog's journal in the block store's bucket: one holding per (tenant, blob), so that the
// bucket alone suffices to rebuild the catalog (`svc catalog rebuild`, docs/backends.md).
// A holding is written before the publication commits and deleted after the removal commits:
// the bucket knows at least what the catalog knows.
import { createHash } from 'node:crypto';
import { contentIdOf } from '../cas/content-id.js';

/** What a tenant's hold on a blob needs to be recreated, with the manifest it holds. */
export interface Holding {
  tenant: string;
  id: string;
  size: number;
  /** The tenant's media type. */
  mediaType: string;
  /** Milliseconds since the epoch, on the catalog's clock, read just before the publication. */
  createdAt: number;
  chunker: string;
  /** Packed block references and sizes, as in a ManifestRecord. */
  refs: Buffer;
  sizes: Buffer;
  /** The bytes of an inline blob (it has no block object). */
  inline?: Buffer;
  /** The publication recorded the blocks as the tenant's (tenant_blocks). */
  claims?: true;
  /** The S3-only backend: the blob's position in the tenant's inventory (its inventory entry's key). */
  seq?: number;
}

export interface CatalogJournal {
  /** Writes (or overwrites) the tenant's holding of `holding.id`. */
  putHolding(holding: Holding): Promise<void>;
  /** Deletes the tenant's holding of `id`; nothing when there is none. */
  deleteHolding(tenant: string, id: string): Promise<void>;
  /** Every holding, a page at a time (a holding that cannot be read is passed to `unreadable`). */
  listHoldings(unreadable?: (key: string, err: unknown) => void): AsyncIterable<Holding[]>;
}

/** Version 1 of the holding document (JSON: small, readable with any tool). */
interface HoldingV1 {
  v: 1;
  tenant: string;
  id: string;
  size: number;
  mediaType: string;
  createdAt: number;
  chunker: string;
  refs: string;
  sizes: string;
  inline?: string;
  claims?: true;
  seq?: number;
}

export function encodeHolding(h: Holding): Buffer {
  const doc: HoldingV1 = {
    v: 1,
    tenant: h.tenant,
    id: h.id,
    size: h.size,
    mediaType: h.mediaType,
    createdAt: h.createdAt,
    chunker: h.chunker,
    refs: h.refs.toString('base64'),
    sizes: h.sizes.toString('base64'),
    ...(h.inline ? { inline: h.inline.toString('base64') } : {}),
    ...(h.claims ? { claims: true as const } : {}),
    ...(h.seq !== undefined ? { seq: h.seq } : {}),
  };
  return Buffer.from(JSON.stringify(doc));
}

/** Reads a holding document; throws on a version or shape this svc does not know. */
export function decodeHolding(bytes: Uint8Array): Holding {
  const doc = JSON.parse(Buffer.from(bytes).toString('utf8')) as Partial<HoldingV1>;
  if (doc.v !== 1) throw new Error(`holding version ${String(doc.v)} is not known to this svc`);
  const str = (v: unknown, name: string): string => {
    if (typeof v !== 'string') throw new Error(`holding: "${name}" is not a string`);
    return v;
  };
  const id = str(doc.id, 'id');
  const parsed = contentIdOf(id);
  if (!parsed || parsed.size !== doc.size) throw new Error(`holding: id "${id}" and size ${String(doc.size)} disagree`);
  if (!Number.isSafeInteger(doc.createdAt)) throw new Error('holding: "createdAt" is not an integer');
  const refs = Buffer.from(str(doc.refs, 'refs'), 'base64');
  const sizes = Buffer.from(str(doc.sizes, 'sizes'), 'base64');
  if (refs.length !== (sizes.length / 4) * 40 || sizes.length % 4 !== 0) throw new Error('holding: refs and sizes disagree');
  const inline = doc.inline === undefined ? undefined : Buffer.from(str(doc.inline, 'inline'), 'base64');
  // Inline bytes are the blob itself: a rebuild must not serve bytes that are not the id's.
  if (inline && (inline.length !== doc.size || createHash('sha256').update(inline).digest('hex') !== parsed.hex)) {
    throw new Error('holding: the inline bytes are not the blob\'s');
  }
  return {
    tenant: str(doc.tenant, 'tenant'),
    id,
    size: doc.size!,
    mediaType: str(doc.mediaType, 'mediaType'),
    createdAt: doc.createdAt!,
    chunker: str(doc.chunker, 'chunker'),
    refs,
    sizes,
    ...(inline ? { inline } : {}),
    ...(doc.claims === true ? { claims: true as const } : {}),
    ...(Number.isSafeInteger(doc.seq) ? { seq: doc.seq } : {}),
  };
}
