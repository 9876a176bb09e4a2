// The S3 index's tables and records, in the units store (engine/store/unit-store.ts): LMDB on
// fs and s3, PostgreSQL shared by every pg-s3 node, so every node answers for every bucket.
//   s3_buckets         name → BucketRecord (names are one namespace for every tenant)
//   s3_tenant_buckets  [tenant, name] → created (ListBuckets)
//   s3_bucket_counts   tenant → buckets it owns (S3_MAX_BUCKETS_PER_TENANT)
//   s3_objects         [bucket, stored key] → ObjectRecord (stored key: names.ts encodeKey)
//   s3_uploads         [bucket, stored key, uploadId] → UploadRecord (ListMultipartUploads' order)
//   s3_parts           [uploadId, partNumber] → PartRecord
//   s3_tenant_part_bytes tenant → bytes of its parts on record (the quota's reservation of open uploads)
//   s3_blob_refs, s3_blob_releases: blob-refs.ts
// Bucket names are unique in the service, so objects and uploads are keyed by bucket, not tenant.

import type { ChecksumAlgorithm, ChecksumType } from './checksums.js';
import { table } from '../store/index.js';

/** Who made a bucket, an object or an upload: the tenant, and the principal (`sub`, S3's Owner ID). */
export interface S3Owner {
  tenant: string;
  subject: string;
}

export interface BucketRecord {
  tenant: string;
  /** The creating principal (S3's bucket Owner ID is the tenant's; kept for audit). */
  subject: string;
  created: number;
}

/** What a PutObject, a CopyObject with REPLACE or a CreateMultipartUpload says about the object besides its bytes. */
export interface ObjectMeta {
  contentType?: string;
  contentEncoding?: string;
  contentDisposition?: string;
  cacheControl?: string;
  /** The Expires header as sent (S3 keeps the string). */
  expires?: string;
  /** `x-amz-meta-*`: names lowercased without the prefix; at most S3_USER_METADATA_MAX_BYTES. */
  userMetadata: Record<string, string>;
}

/** The bytes an object names: a store blob and what was measured of it. */
export interface ObjectContent {
  blobId: string;
  size: number;
  /** MD5 hex of the body; multipart: MD5 of the parts' MD5s, `-N`. No quotes. */
  etag: string;
  /** x-amz-checksum-* values (base64), by algorithm. */
  checksums: Partial<Record<ChecksumAlgorithm, string>>;
  /** Multipart: the parts' sizes in order (GET and HEAD with partNumber). */
  parts?: number[];
}

export interface ObjectRecord extends ObjectContent, ObjectMeta {
  /** Milliseconds since the epoch, by the engine's Clock. */
  lastModified: number;
  owner: S3Owner;
}

/** A part's bytes as the wiring stored them: the blob (or session blob) it filled in. */
export interface PartContent {
  blobId: string;
  size: number;
  /**
   * Its blocks, when the part is unlisted content (engine/s3/multipart-uploads.ts: stored as it
   * came, not published): a manifest's packed refs and sizes. Complete concatenates them, and GC
   * keeps them while the part is on record.
   */
  blocks?: PartBlocks;
}

/** A part's blocks as a manifest records them (engine/store/manifest.ts): 40 bytes of ref and 4 of size per block. */
export interface PartBlocks {
  refs: Buffer;
  sizes: Buffer;
  chunker: string;
}

export interface UploadRecord {
  owner: S3Owner;
  initiated: number;
  meta: ObjectMeta;
  /** x-amz-checksum-algorithm of CreateMultipartUpload: every part then carries that checksum. */
  checksumAlgorithm?: ChecksumAlgorithm;
  /** x-amz-checksum-type of CreateMultipartUpload (or its algorithm's default): what the object's checksum covers. */
  checksumType?: ChecksumType;
}

export interface PartRecord {
  etag: string;
  size: number;
  checksums: Partial<Record<ChecksumAlgorithm, string>>;
  content: PartContent;
  lastModified: number;
}

// Objects and buckets are read by every GetObject and HeadObject outside units, written far less:
// cached on a node of its own LMDB (engine/store/unit-store.ts CACHED; never on pg-s3).
export const BUCKETS = table<BucketRecord, string>('s3_buckets', { cached: true });
export const TENANT_BUCKETS = table<number, [string, string]>('s3_tenant_buckets');
export const BUCKET_COUNTS = table<number, string>('s3_bucket_counts');
export const OBJECTS = table<ObjectRecord, [string, string]>('s3_objects', { cached: true });
export const UPLOADS = table<UploadRecord, [string, string, string]>('s3_uploads');
export const PARTS = table<PartRecord, [string, number]>('s3_parts');
/** The bytes of a tenant's parts on record, changed in the units that write and remove parts (unit.add). */
export const PART_BYTES = table<number, string>('s3_tenant_part_bytes');
