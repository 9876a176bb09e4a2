// Stored content in and out of memory for the content engines, which need whole inputs (a PDF's
// cross-reference table is at its end; OCR works on whole pages). Both directions are bounded:
// inputs by SVC_VIEW_MAX_INPUT_BYTES, outputs by what an engine makes of such an input.

import { type BlobReader, type DirectIngest, type IngestOptions, pushAll } from '../cas/index.js';
import type { Manifest, ManifestRecord } from '../store/index.js';

/** Pushes of at most this many bytes: an ingest copies each into its segments. */
const PUSH_BYTES = 256 * 1024;

/** The content's bytes in a buffer of their own (transferable to a worker thread). */
export async function readWhole(reader: BlobReader, manifest: Manifest): Promise<Buffer> {
  const size = manifest.record.size;
  // Not from Node's pool: the buffer's ArrayBuffer is moved to the worker whole.
  const out = Buffer.allocUnsafeSlow(size);
  let at = 0;
  for await (const piece of reader.range(manifest, 0, size)) {
    out.set(piece, at);
    at += piece.length;
  }
  if (at !== size) throw new Error(`content of ${manifest.id} ended at ${at} of ${size} bytes`);
  return out;
}

export interface StoredBytes {
  blobId: string;
  record: ManifestRecord;
}

/** Stores `bytes` through the same ingest as every upload, unlisted (the caller keeps the record); undefined for no bytes. */
export async function storeBytes(startIngest: (options: IngestOptions) => DirectIngest, bytes: Uint8Array, mediaType: string): Promise<StoredBytes | undefined> {
  if (bytes.length === 0) return undefined;
  const ingest = startIngest({ unlisted: true, declaredLength: bytes.length, contentType: mediaType });
  try {
    await pushAll(ingest, pieces(bytes));
    const result = await ingest.endUnlisted();
    return { blobId: result.id, record: result.record };
  } catch (err) {
    ingest.abort();
    throw err;
  }
}

function* pieces(bytes: Uint8Array): Generator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += PUSH_BYTES) yield bytes.subarray(at, at + PUSH_BYTES);
}
