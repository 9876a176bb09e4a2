// S3 objects: a key of a bucket naming a store blob, with its metadata (records.ts ObjectRecord).
// Every change is one unit of work that reads the bucket (so a DeleteBucket cannot pass between),
// the object's current record (concurrent writes to one key run one after the other: the last to
// commit wins), adjusts the tenant's blob counts (blob-refs.ts) and writes. The outcome says
// which blobs became held or released, for the wiring to tell the blob catalog. Conditions
// (If-None-Match: *, If-Match, and CopyObject's x-amz-copy-source-if-*) are decided inside the
// unit, against the record the write replaces. No method here touches bytes: CopyObject is a
// new record naming the same blob.

import { S3_USER_METADATA_MAX_BYTES } from '../base/limits.js';
import type { Clock } from '../base/clock.js';
import type { Entry, Unit, UnitKey, UnitRange, UnitStore } from '../store/index.js';
import { type Publication, type RefChanges, addDelta, adjustRefs } from './blob-refs.js';
import { type S3Buckets, bucketOf } from './buckets.js';
import { noSuchKey, preconditionFailed, s3Refusal } from './errors.js';
import { type ListPage, type ListQuery, listObjects } from './listing.js';
import { afterStored, checkKey, encodeKey } from './names.js';
import { OBJECTS, type ObjectContent, type ObjectMeta, type ObjectRecord, type S3Owner } from './records.js';

/** Conditions of a write, decided against the record it would replace (S3's conditional writes: 412 PreconditionFailed). */
export interface WriteConditions {
  /** If-None-Match: * — only if the key holds no object. */
  ifNoneMatch?: '*';
  /** If-Match — only if the object's ETag is this one (quoted or not); no object: NoSuchKey. */
  ifMatch?: string;
}

export interface WriteOutcome extends RefChanges {
  record: ObjectRecord;
}

export interface DeleteOutcome extends RefChanges {
  /** Whether there was an object (S3 answers 204 either way). */
  deleted: boolean;
}

/** CopyObject: where from, and what the copy's metadata is (COPY: the source's; REPLACE: `meta`). */
export interface CopySource {
  bucket: string;
  key: string;
  /** x-amz-copy-source-if-*: the listener's checks of the source record, run inside the unit (throw to refuse). */
  check?: (source: ObjectRecord) => void;
}

/** An ETag as compared: without its quotes. */
export const bareEtag = (etag: string) => etag.replace(/^"(.*)"$/, '$1');

/** S3's bound on user metadata: names and values, UTF-8 bytes summed, at most 2 KiB (MetadataTooLarge). */
export function checkMeta(meta: ObjectMeta): void {
  let bytes = 0;
  for (const [name, value] of Object.entries(meta.userMetadata)) bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
  if (bytes > S3_USER_METADATA_MAX_BYTES) {
    throw s3Refusal('MetadataTooLarge', `Your metadata headers exceed the maximum allowed metadata size: ${bytes} bytes, at most ${S3_USER_METADATA_MAX_BYTES}`);
  }
}

/** Decides `conditions` against the record a write would replace. */
export function checkConditions(current: ObjectRecord | undefined, conditions: WriteConditions | undefined): void {
  if (!conditions) return;
  if (conditions.ifNoneMatch === '*' && current) throw preconditionFailed();
  if (conditions.ifMatch !== undefined) {
    if (!current) throw noSuchKey();
    if (conditions.ifMatch !== '*' && bareEtag(conditions.ifMatch) !== current.etag) throw preconditionFailed();
  }
}

const metaOf = (r: ObjectMeta): ObjectMeta => ({
  ...(r.contentType === undefined ? {} : { contentType: r.contentType }),
  ...(r.contentEncoding === undefined ? {} : { contentEncoding: r.contentEncoding }),
  ...(r.contentDisposition === undefined ? {} : { contentDisposition: r.contentDisposition }),
  ...(r.cacheControl === undefined ? {} : { cacheControl: r.cacheControl }),
  ...(r.expires === undefined ? {} : { expires: r.expires }),
  userMetadata: { ...r.userMetadata },
});

const contentOf = (r: ObjectContent): ObjectContent => ({
  blobId: r.blobId,
  size: r.size,
  etag: r.etag,
  checksums: { ...r.checksums },
  ...(r.parts === undefined ? {} : { parts: [...r.parts] }),
});

export class S3Objects {
  constructor(
    private readonly units: UnitStore,
    private readonly clock: Clock,
    private readonly buckets: S3Buckets,
  ) {}

  /** PutObject: the key now names `content`; `publication`, how the writer holds its blob (blob-refs.ts). */
  async put(owner: S3Owner, bucket: string, key: string, content: ObjectContent, meta: ObjectMeta, conditions?: WriteConditions, publication?: Publication): Promise<WriteOutcome> {
    checkKey(key);
    checkMeta(meta);
    const record = (): ObjectRecord => ({ ...contentOf(content), ...metaOf(meta), etag: bareEtag(content.etag), lastModified: this.clock.now(), owner: { ...owner } });
    return this.write(owner.tenant, bucket, key, conditions, async () => record(), publication);
  }

  /**
   * HeadObject, GetObject: the record (frozen on LMDB: a cached table's), else NoSuchKey
   * (NoSuchBucket, AccessDenied for the bucket). At once when the store reads synchronously.
   */
  get(tenant: string, bucket: string, key: string): ObjectRecord | Promise<ObjectRecord> {
    checkKey(key);
    // Plain reads, no unit (the GET path). An object lives only in a bucket of its owner's tenant,
    // and a bucket is deleted only empty: a record of the caller's tenant answers for the bucket
    // too (one read, not two). Otherwise the bucket says which refusal: NoSuchBucket, AccessDenied.
    const at: [string, string] = [bucket, encodeKey(key)];
    const now = this.units.getNow?.(OBJECTS, at);
    if (now?.owner.tenant === tenant) return now;
    return this.getRead(tenant, bucket, at);
  }

  private async getRead(tenant: string, bucket: string, at: [string, string]): Promise<ObjectRecord> {
    const record = await this.units.get(OBJECTS, at);
    if (record && record.owner.tenant === tenant) return record;
    await this.buckets.head(tenant, bucket);
    if (!record) throw noSuchKey();
    return record;
  }

  /** ListObjects, ListObjectsV2 (listing.ts): keys in UTF-8 order, rolled up by a delimiter. */
  async list(tenant: string, bucket: string, query: ListQuery): Promise<ListPage<ObjectRecord>> {
    await this.buckets.head(tenant, bucket);
    const units = this.units;
    return listObjects<ObjectRecord>(
      {
        read: (range) => units.range(OBJECTS, range as UnitRange) as Promise<Array<Entry<ObjectRecord, UnitKey>>>,
        storedKeyOf: (key) => (key as [string, string])[1],
        startAfter: (key) => [bucket, afterStored((key as [string, string])[1])],
      },
      bucket,
      query,
    );
  }

  /** DeleteObject: an absent key is no error (S3 answers 204). */
  async delete(tenant: string, bucket: string, key: string): Promise<DeleteOutcome> {
    checkKey(key);
    return this.units.run(async (unit) => {
      await bucketOf(unit, tenant, bucket);
      const at: [string, string] = [bucket, encodeKey(key)];
      const current = await unit.get(OBJECTS, at);
      if (!current) return { deleted: false, held: [], released: [] };
      unit.remove(OBJECTS, at);
      const changes = await adjustRefs(unit, tenant, new Map([[current.blobId, -1]]), this.clock.now());
      return { deleted: true, ...changes };
    });
  }

  /**
   * CopyObject: a new record of `bucket`/`key` naming the source's blob (no bytes). `meta`
   * given: REPLACE; absent: COPY (the source's). Both buckets must be the tenant's. Copying an
   * object onto itself with COPY is S3's 400 InvalidRequest (nothing would change).
   */
  async copy(owner: S3Owner, source: CopySource, bucket: string, key: string, meta?: ObjectMeta, conditions?: WriteConditions): Promise<WriteOutcome> {
    checkKey(source.key);
    checkKey(key);
    if (meta) checkMeta(meta);
    if (!meta && source.bucket === bucket && source.key === key) {
      throw s3Refusal(
        'InvalidRequest',
        "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
      );
    }
    return this.write(owner.tenant, bucket, key, conditions, async (unit) => {
      await bucketOf(unit, owner.tenant, source.bucket);
      const from = await unit.get(OBJECTS, [source.bucket, encodeKey(source.key)]);
      if (!from) throw noSuchKey();
      source.check?.(from);
      return { ...contentOf(from), ...metaOf(meta ?? from), lastModified: this.clock.now(), owner: { ...owner } };
    });
  }

  /** One write of a key in a unit of its own. */
  private write(tenant: string, bucket: string, key: string, conditions: WriteConditions | undefined, make: (unit: Unit) => Promise<ObjectRecord>, publication?: Publication): Promise<WriteOutcome> {
    return this.units.run((unit) => writeObjectIn(unit, tenant, bucket, key, conditions, make, this.clock.now(), publication));
  }
}

/**
 * In the caller's unit: one write of a key (the bucket read, the conditions decided against the
 * record replaced, the tenant's blob counts adjusted, the record written).
 */
export async function writeObjectIn(
  unit: Unit,
  tenant: string,
  bucket: string,
  key: string,
  conditions: WriteConditions | undefined,
  make: (unit: Unit) => Promise<ObjectRecord>,
  now: number,
  publication?: Publication,
): Promise<WriteOutcome> {
  await bucketOf(unit, tenant, bucket);
  const at: [string, string] = [bucket, encodeKey(key)];
  const current = await unit.get(OBJECTS, at);
  checkConditions(current, conditions);
  const record = await make(unit);
  const deltas = new Map<string, number>();
  addDelta(deltas, record.blobId, 1);
  if (current) addDelta(deltas, current.blobId, -1);
  const changes = await adjustRefs(unit, tenant, deltas, now, publication);
  unit.put(OBJECTS, at, record);
  return { record, ...changes };
}
