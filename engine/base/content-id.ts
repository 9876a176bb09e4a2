import { invalidBlobId } from './errors.js';

/** A parsed `sha-256:<64 lowercase hex>:<decimal length>` content id. */
export interface ContentId {
  readonly hex: string;
  readonly size: number;
}

const FORM = '<algorithm>:<hex-digest>:<byte-length>';
const ID_PATTERN = /^sha-256:([0-9a-f]{64}):([1-9][0-9]{0,15})$/;

export function formatContentId(hex: string, size: number): string {
  return `sha-256:${hex}:${size}`;
}

/** A canonical id's digest and length, or undefined when `id` is not one (no diagnostic). */
export function contentIdOf(id: string): ContentId | undefined {
  const m = ID_PATTERN.exec(id);
  return m ? { hex: m[1], size: Number(m[2]) } : undefined;
}

/** Parse a canonical id; throws 400 invalid_blob_id with a diagnostic. */
export function parseContentId(id: string): ContentId {
  if (id.length === 0 || id.length > 256) throw invalidBlobId(`Blob id must be 1..256 characters of the form ${FORM}`);
  const m = ID_PATTERN.exec(id);
  if (!m) throw invalidBlobId(`Blob id "${printable(id)}" is not of the form ${FORM} with algorithm sha-256, 64 lowercase hex digits and a positive decimal length`);
  const size = Number(m[2]);
  if (!Number.isSafeInteger(size)) throw invalidBlobId(`Blob id length ${m[2]} is out of range`);
  return { hex: m[1], size };
}

/** Parse a URL path segment, which may be percent-encoded. */
export function parseContentIdSegment(segment: string): ContentId {
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    throw invalidBlobId('Invalid blob ID encoding: malformed percent-encoding');
  }
  return parseContentId(decoded);
}

function printable(s: string): string {
  const cut = s.length > 80 ? `${s.slice(0, 80)}…` : s;
  return cut.replace(/[^\x20-\x7e]/g, '?');
}
