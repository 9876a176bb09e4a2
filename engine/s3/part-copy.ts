// How an UploadPartCopy makes its part (docs/s3.md "UploadPartCopy"): the part's ETag must be the
// MD5 of its bytes and, with the upload's checksum algorithm, its checksum that of its bytes.
// A manifest is a list of whole blocks (no entry names part of a block), so:
// - `whole`: a whole object that was not uploaded in parts, whose MD5 (its ETag) and checksum are
//   on record: its blocks become the part; nothing read, nothing copied.
// - `blocks`: bytes that begin and end on the source's block boundaries (a whole multipart object,
//   a range on boundaries, a whole object without the upload's checksum): those blocks become the
//   part, nothing written; the bytes are read once through the store to take the MD5, the
//   checksum and the part's SHA-256 (its content id), since none of them is on record.
// - `ingest`: a range that cuts a block, or any bytes of an inline blob (its one block lives in
//   the catalog, which a part's blocks cannot name): the bytes are read through the store and
//   streamed into the part's own ingest, as an UploadPart's body is.

import { createHash } from 'node:crypto';
import type { Manifest } from '../store/index.js';
import type { ChecksumAlgorithm } from './checksums.js';
import { s3Refusal } from './errors.js';
import type { PartBlocks } from './records.js';

/** `x-amz-copy-source-range: bytes=first-last`, both inclusive. */
export interface CopyRange {
  first: number;
  last: number;
}

/** The source of an UploadPartCopy: the object the caller may read, its blob's manifest (none when empty), the range asked for. */
export interface PartSource {
  blobId: string;
  size: number;
  etag: string;
  /** The object was uploaded in parts: its ETag (`…-N`) is no MD5 of its bytes. */
  multipart: boolean;
  checksums: Partial<Record<ChecksumAlgorithm, string>>;
  manifest?: Manifest;
  range?: CopyRange;
}

export type PartCopyPlan =
  | { kind: 'whole'; length: number; etag: string; blocks: PartBlocks }
  | { kind: 'blocks'; length: number; start: number; end: number; blocks: PartBlocks }
  | { kind: 'ingest'; length: number; start: number; end: number };

const EMPTY_MD5 = createHash('md5').digest('hex');
const NO_BLOCKS: PartBlocks = { refs: Buffer.alloc(0), sizes: Buffer.alloc(0), chunker: 'concatenation' };

/** S3's 416 for a range outside the source (`first > last` is the edge's 400). */
export function checkCopyRange(range: CopyRange, size: number): void {
  if (range.first > range.last || range.last >= size) {
    throw s3Refusal('InvalidRange', `The requested range is not satisfiable: bytes=${range.first}-${range.last} of an object of ${size} bytes`);
  }
}

/** The part's length: the range's (checked: 416 outside the source), else the source's size. */
export function copyLength(source: PartSource): number {
  if (!source.range) return source.size;
  checkCopyRange(source.range, source.size);
  return source.range.last + 1 - source.range.first;
}

/** What the part of `source` will be; `algorithm`: the upload's checksum algorithm, if any. */
export function planPartCopy(source: PartSource, algorithm: ChecksumAlgorithm | undefined): PartCopyPlan {
  if (source.range) checkCopyRange(source.range, source.size);
  const { manifest } = source;
  // An empty object (no manifest, no range can be asked of it): an empty part.
  if (!manifest) return { kind: 'whole', length: 0, etag: EMPTY_MD5, blocks: NO_BLOCKS };
  const start = source.range?.first ?? 0;
  const end = source.range ? source.range.last + 1 : source.size;
  const length = end - start;
  if (manifest.record.inline) return { kind: 'ingest', length, start, end };
  const whole = start === 0 && end === source.size;
  const blocks = { refs: manifest.record.refs, sizes: manifest.record.sizes, chunker: manifest.record.chunker };
  // The ETag on record is the MD5 of the bytes only for an object not uploaded in parts.
  const md5OnRecord = !source.multipart && /^[0-9a-f]{32}$/.test(source.etag);
  if (whole && md5OnRecord && (!algorithm || source.checksums[algorithm] !== undefined)) return { kind: 'whole', length, etag: source.etag, blocks };
  const firstBlock = manifest.blockAt(start);
  const lastBlock = manifest.blockAt(end - 1);
  if (manifest.offsets[firstBlock] !== start || manifest.offsets[lastBlock + 1] !== end) return { kind: 'ingest', length, start, end };
  // A copy of the entries: the part's record must not hold the source manifest's buffers.
  const slice = (b: Buffer, width: number) => Buffer.from(b.subarray(firstBlock * width, (lastBlock + 1) * width));
  return { kind: 'blocks', length, start, end, blocks: { refs: slice(blocks.refs, 40), sizes: slice(blocks.sizes, 4), chunker: blocks.chunker } };
}
