// A catalog's journal in the block store's bucket: every publication's holding (tenant, blob,
// manifest) and every removal, so that the bucket alone suffices to rebuild the catalog
// (`svc catalog rebuild`, docs/backends.md). The catalog numbers its entries in commit order and
// hands them over in groups, each written as one segment; for each (tenant, blob) the entry with
// the largest number says whether it is held.
import { createHash } from 'node:crypto';
import { contentIdOf } from '../base/content-id.js';

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

/** One journal entry: a tenant holds a blob (with its manifest), or holds it no more. */
export type JournalEntry = { op: 'put'; holding: Holding } | { op: 'remove'; tenant: string; id: string };

/** An entry and its number (commit order; a number is written once, maybe in two segments after a retry). */
export interface JournalRecord {
  seq: number;
  entry: JournalEntry;
}

export interface CatalogJournal {
  /** Writes the records as one segment (durable when it resolves). */
  write(records: readonly JournalRecord[]): Promise<void>;
  /** Every record, a segment at a time (an unreadable segment is passed to `unreadable`). */
  listRecords(unreadable?: (key: string, err: unknown) => void): AsyncIterable<JournalRecord[]>;
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
  return Buffer.from(JSON.stringify(holdingDoc(h)));
}

function holdingDoc(h: Holding): HoldingV1 {
  return {
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
}

/** Reads a holding document; throws on a version or shape this svc does not know. */
export function decodeHolding(bytes: Uint8Array): Holding {
  return holdingOf(JSON.parse(Buffer.from(bytes).toString('utf8')) as Partial<HoldingV1>);
}

function holdingOf(doc: Partial<HoldingV1>): Holding {
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

/**
 * A segment (JSON lines, readable with any tool): a header `{ v: 1, entries }`, then one line per
 * entry, a holding document with `seq` and `op: "put"`, or `{ v: 1, seq, op: "remove", tenant, id }`.
 */
export function encodeSegment(records: readonly JournalRecord[]): Buffer {
  const lines = [JSON.stringify({ v: 1, entries: records.length })];
  for (const { seq, entry: e } of records) {
    lines.push(JSON.stringify(e.op === 'put' ? { seq, op: 'put', ...holdingDoc(e.holding) } : { v: 1, seq, op: 'remove', tenant: e.tenant, id: e.id }));
  }
  return Buffer.from(`${lines.join('\n')}\n`);
}

/** Reads a segment; throws on a version or shape this svc does not know, or a torn segment. */
export function decodeSegment(bytes: Uint8Array): JournalRecord[] {
  const lines = Buffer.from(bytes).toString('utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  const header = JSON.parse(lines[0] ?? 'null') as { v?: unknown; entries?: unknown } | null;
  if (header?.v !== 1 || header.entries !== lines.length - 1) {
    throw new Error('journal segment: the header is not version 1, or does not count its entries');
  }
  return lines.slice(1).map((line): JournalRecord => {
    const doc = JSON.parse(line) as Partial<HoldingV1> & { op?: unknown; seq?: unknown };
    if (!Number.isSafeInteger(doc.seq)) throw new Error('journal segment: an entry without its number');
    const seq = doc.seq as number;
    if (doc.op === 'put') return { seq, entry: { op: 'put', holding: holdingOf(doc) } };
    if (doc.op === 'remove' && doc.v === 1 && typeof doc.tenant === 'string' && typeof doc.id === 'string' && contentIdOf(doc.id)) {
      return { seq, entry: { op: 'remove', tenant: doc.tenant, id: doc.id } };
    }
    throw new Error(`journal segment: an entry of unknown shape (op ${String(doc.op)})`);
  });
}
