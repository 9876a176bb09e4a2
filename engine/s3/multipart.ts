// Multipart uploads' records (decisions §5: a multipart upload is a resumable session of the
// store; this is its S3 face): the upload (who, when, the object's metadata), its parts by number
// (ETag, size, checksums, and PartContent: what the wiring stored the part's bytes as). A part
// number sent again replaces the earlier part, whose content is returned for the wiring to
// release; so is every part of an aborted upload, and every part a Complete did not list.
// Complete is two steps around the wiring's manifest: `prepareComplete` checks the listed parts
// as S3 does (at least one; ascending: InvalidPartOrder; each uploaded with that ETag:
// InvalidPart; each but the last at least 5 MiB: EntityTooSmall), computes the multipart ETag
// (MD5 of the parts' binary MD5s, `-N`) and returns the parts' contents in order; the wiring
// composes and publishes the blob; `commitComplete` writes the object and removes the upload in
// one unit, refusing (InvalidPart) if a listed part changed meanwhile.

import { createHash, randomBytes } from 'node:crypto';
import { S3_MAX_PARTS, S3_MIN_PART_BYTES } from '../base/limits.js';
import type { Clock } from '../base/clock.js';
import type { Unit, UnitStore } from '../store/index.js';
import type { MultipartChecksum } from './checksum-types.js';
import type { ChecksumAlgorithm } from './checksums.js';
import { type S3Buckets, bucketOf } from './buckets.js';
import { noSuchUpload, s3Refusal } from './errors.js';
import { type ListPage, listGrouped, maxKeysOf } from './listing.js';
import { afterStored, checkKey, compareKeys, encodeKey } from './names.js';
import type { Publication } from './blob-refs.js';
import { type WriteConditions, type WriteOutcome, bareEtag, checkMeta, writeObjectIn } from './objects.js';
import { type ObjectMeta, PARTS, PART_BYTES, type PartContent, type PartRecord, type S3Owner, UPLOADS, type UploadRecord } from './records.js';

/** A part as ListParts and Complete see it. */
export interface ListedPart extends PartRecord {
  partNumber: number;
}

/** A part a CompleteMultipartUpload names. */
export interface CompletePart {
  partNumber: number;
  etag: string;
  /** Checksums the request states for the part: each must be the part's. */
  checksums?: Partial<Record<ChecksumAlgorithm, string>>;
}

export interface PreparedComplete {
  upload: UploadRecord;
  /** The listed parts in order: their contents are what the wiring composes. */
  parts: ListedPart[];
  /** The multipart ETag, `<md5 of md5s>-N`. */
  etag: string;
  size: number;
}

export interface UploadSummary {
  uploadId: string;
  record: UploadRecord;
}

/** An upload id: 24 random bytes, base64url (unguessable; its characters sort above '!'). */
const newUploadId = () => randomBytes(24).toString('base64url');

/** A part number S3 accepts: 1 to 10,000. */
export function checkPartNumber(partNumber: number): void {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > S3_MAX_PARTS) {
    throw s3Refusal('InvalidArgument', `Part number must be an integer between 1 and ${S3_MAX_PARTS}, inclusive`);
  }
}

/** S3's ETag of a multipart object: the MD5 of the parts' MD5s (binary), then `-` and the part count. */
export function multipartEtag(partEtags: readonly string[]): string {
  const md5 = createHash('md5');
  for (const etag of partEtags) md5.update(Buffer.from(bareEtag(etag), 'hex'));
  return `${md5.digest('hex')}-${partEtags.length}`;
}

/** S3's checks of a Complete's list against the parts uploaded; the listed parts in order. */
export function checkCompleteList(listed: readonly CompletePart[], uploaded: ReadonlyMap<number, PartRecord>): ListedPart[] {
  if (listed.length === 0) throw s3Refusal('MalformedXML', 'You must specify at least one part');
  for (let i = 1; i < listed.length; i++) {
    if (listed[i]!.partNumber <= listed[i - 1]!.partNumber) {
      throw s3Refusal('InvalidPartOrder', 'The list of parts was not in ascending order. The parts list must be specified in order by part number.');
    }
  }
  const parts = listed.map((p) => {
    const part = uploaded.get(p.partNumber);
    const sameChecksums = Object.entries(p.checksums ?? {}).every(([algorithm, value]) => part?.checksums[algorithm as ChecksumAlgorithm] === value);
    if (!part || part.etag !== bareEtag(p.etag) || !sameChecksums) {
      throw s3Refusal(
        'InvalidPart',
        `One or more of the specified parts could not be found. The part might not have been uploaded, or the specified entity tag might not have matched the part's entity tag (part ${p.partNumber}).`,
      );
    }
    return { ...part, partNumber: p.partNumber };
  });
  const small = parts.slice(0, -1).find((p) => p.size < S3_MIN_PART_BYTES);
  if (small) throw s3Refusal('EntityTooSmall', `Your proposed upload is smaller than the minimum allowed object size: part ${small.partNumber} has ${small.size} bytes, each part but the last at least ${S3_MIN_PART_BYTES}`);
  return parts;
}

/** In a unit that removes parts: their bytes leave the tenant's parts total. */
export function releasePartBytes(unit: Unit, tenant: string, parts: ReadonlyArray<{ value: PartRecord }>): void {
  const bytes = parts.reduce((sum, p) => sum + p.value.size, 0);
  if (bytes > 0) unit.add(PART_BYTES, tenant, -bytes);
}

export class S3Multipart {
  constructor(
    private readonly units: UnitStore,
    private readonly clock: Clock,
    private readonly buckets: S3Buckets,
  ) {}

  /** CreateMultipartUpload: a new upload of `key` (its id random and unguessable). */
  async create(owner: S3Owner, bucket: string, key: string, meta: ObjectMeta, checksum?: MultipartChecksum): Promise<{ uploadId: string; record: UploadRecord }> {
    checkKey(key);
    checkMeta(meta);
    const uploadId = newUploadId();
    const record: UploadRecord = { owner: { ...owner }, initiated: this.clock.now(), meta, ...(checksum ? { checksumAlgorithm: checksum.algorithm, checksumType: checksum.type } : {}) };
    await this.units.run(async (unit) => {
      await bucketOf(unit, owner.tenant, bucket);
      unit.put(UPLOADS, [bucket, encodeKey(key), uploadId], record);
    });
    return { uploadId, record };
  }

  /** UploadPart, UploadPartCopy: records the part (replacing one of the same number: its content is returned to release). */
  async putPart(tenant: string, bucket: string, key: string, uploadId: string, partNumber: number, part: Omit<PartRecord, 'lastModified'>): Promise<{ replaced?: PartContent }> {
    checkKey(key);
    checkPartNumber(partNumber);
    return this.units.run(async (unit) => {
      await bucketOf(unit, tenant, bucket);
      if (!(await unit.get(UPLOADS, [bucket, encodeKey(key), uploadId]))) throw noSuchUpload();
      const earlier = await unit.get(PARTS, [uploadId, partNumber]);
      unit.put(PARTS, [uploadId, partNumber], { ...part, etag: bareEtag(part.etag), lastModified: this.clock.now() });
      if (part.size !== (earlier?.size ?? 0)) unit.add(PART_BYTES, tenant, part.size - (earlier?.size ?? 0));
      return earlier && earlier.content.blobId !== part.content.blobId ? { replaced: earlier.content } : {};
    });
  }

  /**
   * What the tenant's open uploads hold (their parts' bytes), `except` one of them left out (its
   * own part or Complete is judged against the others'): the quota's reservation (tenant gate).
   */
  async stagedBytes(tenant: string, except?: string): Promise<number> {
    const total = (await this.units.get(PART_BYTES, tenant)) ?? 0;
    if (except === undefined || total === 0) return total;
    const own = await this.units.range(PARTS, { start: [except, 0], end: [except, S3_MAX_PARTS + 1] });
    return Math.max(0, total - own.reduce((sum, p) => sum + p.value.size, 0));
  }

  /** The upload's record, else NoSuchUpload (NoSuchBucket, AccessDenied for the bucket). */
  async upload(tenant: string, bucket: string, key: string, uploadId: string): Promise<UploadRecord> {
    checkKey(key);
    await this.buckets.head(tenant, bucket);
    const record = await this.units.get(UPLOADS, [bucket, encodeKey(key), uploadId]);
    if (!record) throw noSuchUpload();
    return record;
  }

  /** ListParts: parts above `partNumberMarker`, at most `maxParts` (≤ 1000). */
  async listParts(tenant: string, bucket: string, key: string, uploadId: string, options: { partNumberMarker?: number; maxParts?: number } = {}) {
    const upload = await this.upload(tenant, bucket, key, uploadId);
    const max = maxKeysOf(options.maxParts);
    const entries = await this.units.range(PARTS, { start: [uploadId, (options.partNumberMarker ?? 0) + 1], end: [uploadId, S3_MAX_PARTS + 1], limit: max + 1 });
    const parts: ListedPart[] = entries.slice(0, max).map(({ key: [, partNumber], value }) => ({ ...value, partNumber }));
    const truncated = entries.length > max;
    return { upload, parts, truncated, ...(truncated ? { nextPartNumberMarker: parts[parts.length - 1]!.partNumber } : {}) };
  }

  /**
   * ListMultipartUploads: by key (UTF-8 order), then upload id; above `keyMarker` (with
   * `uploadIdMarker`: its key's uploads above that id too), rolled up by `delimiter` as objects are.
   */
  async listUploads(
    tenant: string,
    bucket: string,
    query: { prefix?: string; delimiter?: string; keyMarker?: string; uploadIdMarker?: string; maxUploads?: number },
  ): Promise<ListPage<UploadSummary> & { nextKeyMarker?: string; nextUploadIdMarker?: string }> {
    await this.buckets.head(tenant, bucket);
    const prefix = query.prefix ?? '';
    const marker = query.keyMarker ?? '';
    const storedPrefix = encodeKey(prefix);
    const fromMarker = marker === '' ? undefined : query.uploadIdMarker ? [bucket, encodeKey(marker), `${query.uploadIdMarker}!`] : [bucket, afterStored(encodeKey(marker))];
    const start = fromMarker !== undefined && compareKeys(fromMarker[1]!, storedPrefix) >= 0 ? fromMarker : [bucket, storedPrefix];
    const units = this.units;
    const page = await listGrouped<UploadSummary>(
      {
        read: async (range) => (await units.range(UPLOADS, range)).map(({ key, value }) => ({ key, value: { uploadId: key[2], record: value } })),
        storedKeyOf: (key) => (key as string[])[1]!,
        startAfter: (key) => [bucket, (key as string[])[1]!, `${(key as string[])[2]}!`],
      },
      bucket,
      { prefix, delimiter: query.delimiter || undefined, max: maxKeysOf(query.maxUploads), start, suppress: marker === '' || query.uploadIdMarker ? undefined : marker },
    );
    if (!page.truncated) return page;
    const last = page.items[page.items.length - 1]!;
    return { ...page, nextKeyMarker: last.prefix ?? last.key, ...(last.value ? { nextUploadIdMarker: last.value.uploadId } : {}) };
  }

  /** AbortMultipartUpload: the upload and its parts go; their contents are for the wiring to release. */
  async abort(tenant: string, bucket: string, key: string, uploadId: string): Promise<{ released: PartContent[] }> {
    checkKey(key);
    return this.units.run(async (unit) => {
      await bucketOf(unit, tenant, bucket);
      const at: [string, string, string] = [bucket, encodeKey(key), uploadId];
      if (!(await unit.get(UPLOADS, at))) throw noSuchUpload();
      const parts = await unit.range(PARTS, { start: [uploadId, 0], end: [uploadId, S3_MAX_PARTS + 1] });
      unit.remove(UPLOADS, at);
      for (const { key: partKey } of parts) unit.remove(PARTS, partKey);
      releasePartBytes(unit, tenant, parts);
      return { released: parts.map((p) => p.value.content) };
    });
  }

  /** CompleteMultipartUpload, step one: the list checked, the ETag computed, the parts' contents in order. */
  async prepareComplete(tenant: string, bucket: string, key: string, uploadId: string, listed: readonly CompletePart[]): Promise<PreparedComplete> {
    const upload = await this.upload(tenant, bucket, key, uploadId);
    const entries = await this.units.range(PARTS, { start: [uploadId, 0], end: [uploadId, S3_MAX_PARTS + 1] });
    const parts = checkCompleteList(listed, new Map(entries.map(({ key: [, n], value }) => [n, value])));
    return { upload, parts, etag: multipartEtag(parts.map((p) => p.etag)), size: parts.reduce((sum, p) => sum + p.size, 0) };
  }

  /**
   * Step two, once the wiring published the composed blob: the object (the upload's metadata,
   * the prepared ETag and part sizes) and the upload's removal in one unit. Refuses InvalidPart
   * when a listed part was replaced since step one, NoSuchUpload when the upload is gone.
   * `discarded`: contents of parts not listed, for the wiring to release.
   */
  async commitComplete(
    owner: S3Owner,
    bucket: string,
    key: string,
    uploadId: string,
    prepared: PreparedComplete,
    blob: { blobId: string; checksums: PartRecord['checksums'] },
    conditions?: WriteConditions,
    publication?: Publication,
  ): Promise<WriteOutcome & { discarded: PartContent[] }> {
    return this.units.run(async (unit) => {
      const at: [string, string, string] = [bucket, encodeKey(key), uploadId];
      const upload = await unit.get(UPLOADS, at);
      if (!upload) throw noSuchUpload();
      const entries = await unit.range(PARTS, { start: [uploadId, 0], end: [uploadId, S3_MAX_PARTS + 1] });
      const now = new Map(entries.map(({ key: [, n], value }) => [n, value]));
      for (const p of prepared.parts) {
        const current = now.get(p.partNumber);
        if (current?.content.blobId !== p.content.blobId || current.etag !== p.etag) {
          throw s3Refusal('InvalidPart', `Part ${p.partNumber} was uploaded again while the upload was being completed`);
        }
      }
      const listed = new Set(prepared.parts.map((p) => p.partNumber));
      const outcome = await writeObjectIn(
        unit,
        owner.tenant,
        bucket,
        key,
        conditions,
        async () => ({
          ...upload.meta,
          blobId: blob.blobId,
          size: prepared.size,
          etag: prepared.etag,
          checksums: { ...blob.checksums },
          parts: prepared.parts.map((p) => p.size),
          lastModified: this.clock.now(),
          owner: { ...owner },
        }),
        this.clock.now(),
        publication,
      );
      unit.remove(UPLOADS, at);
      for (const { key: partKey } of entries) unit.remove(PARTS, partKey);
      releasePartBytes(unit, owner.tenant, entries);
      return { ...outcome, discarded: entries.filter(({ key: [, n] }) => !listed.has(n)).map((e) => e.value.content) };
    });
  }
}
