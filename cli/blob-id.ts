// Blob ids as the server mints them: `sha-256:<64 lowercase hex>:<decimal length>`.

import { UsageError } from './errors.js';

interface BlobId {
  id: string;
  hex: string;
  size: number;
}

const ID = /^sha-256:([0-9a-f]{64}):([1-9][0-9]{0,15})$/;

export function parseBlobId(raw: string): BlobId {
  const m = ID.exec(raw);
  if (!m || !Number.isSafeInteger(Number(m[2]))) {
    throw new UsageError(`"${raw.length > 100 ? `${raw.slice(0, 100)}…` : raw}" is not a blob id (sha-256:<64 lowercase hex digits>:<byte length>)`);
  }
  return { id: raw, hex: m[1], size: Number(m[2]) };
}

export function formatBlobId(hex: string, size: number): string {
  return `sha-256:${hex}:${size}`;
}

export function blobPath(id: string): string {
  return `/api/v1/blobs/${encodeURIComponent(id)}`;
}
