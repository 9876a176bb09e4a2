// The S3 API's operations (decisions §5 "S3-compatible API") as the engine's commands: the S3
// listener (server/s3/) parses a request, calls one of these with the caller, and answers. Every
// tenant rule applies here or below: a PutObject's body is an ingest for the caller through the
// tenant gate (engine/ingests `blob`), buckets and objects are the caller's tenant's (S3Index).
//
// How objects, blobs and the blob catalog relate (docs/s3.md): an object is a record of the S3
// index naming a blob of the store. The PUT's publication makes the blob the tenant's in the blob
// catalog (its "hold"); the index counts, per tenant and blob, the objects that name it
// (blob-refs.ts); when a count falls to 0 the hold is released here, at once after the write that
// dropped it, and by a sweep of pending releases (a releaser that died midway) at start and every
// minute. An empty object names no blob at all (the store keeps no empty blobs): its blob id is
// the id of zero bytes, with no manifest, and it takes no hold.

import { createHash } from 'node:crypto';
import type { Principal } from '../auth/index.js';
import type { BlockRoots } from '../base/block-roots.js';
import type { Clock } from '../base/clock.js';
import { formatContentId } from '../base/content-id.js';
import type { Logger } from '../base/log.js';
import type { Blobs } from '../blobs/index.js';
import type { DirectIngest } from '../cas/index.js';
import type { BlobBody, Ingests } from '../ingests/index.js';
import type { BlobCatalog, Manifest, UnitStore } from '../store/index.js';
import { SvcError } from '../base/errors.js';
import { isBlobReleasing, s3CodeOf, s3Refusal } from './errors.js';
import type { ListPage, ListQuery } from './listing.js';
import { checkConditions, type CopySource, type WriteConditions, type WriteOutcome } from './objects.js';
import type { ObjectContent, ObjectMeta, ObjectRecord, S3Owner } from './records.js';
import { S3Index } from './s3-index.js';
import type { Publication, RefChanges } from './blob-refs.js';
import type { StatedObjectChecksum } from './checksum-types.js';
import type { ChecksumAlgorithm } from './checksums.js';
import type { CompletePart } from './multipart.js';
import type { Completed, MultipartUploads, PartBody } from './multipart-uploads.js';
import type { CopyRange } from './part-copy.js';
import { type StatedDigests, measuredAgainst } from './stated-digests.js';

/** The blob id of an empty object: the SHA-256 of nothing (no manifest is ever published for it). */
export const EMPTY_BLOB_ID = formatContentId(createHash('sha256').digest('hex'), 0);
/** MD5 of nothing: an empty object's ETag. */
export const EMPTY_MD5 = createHash('md5').digest('hex');

/** How often pending releases are swept (a releaser that died midway). */
const SWEEP_MS = 60_000;

export interface S3ServiceDeps {
  units: UnitStore;
  clock: Clock;
  /** SVC_S3_API_REGION. */
  region: string;
  manifests: BlobCatalog;
  blobs: Blobs;
  ingests: Ingests;
  log: Logger;
  /** The multipart uploads on this service's index (engine.ts builds them with the store's parts). */
  multipart: (index: S3Index) => MultipartUploads;
}

/** An object to read: its record, and its blob's manifest (none for an empty object). */
export interface ObjectRead {
  record: ObjectRecord;
  manifest?: Manifest;
}

/** DeleteObjects: what happened to each key. */
export interface DeleteOneResult {
  key: string;
  error?: { code: string; message: string };
}

const ownerOf = (p: Principal): S3Owner => ({ tenant: p.tenant, subject: p.subject });

export class S3Service {
  readonly index: S3Index;
  readonly multipart: MultipartUploads;
  private sweeper?: NodeJS.Timeout;

  constructor(private readonly deps: S3ServiceDeps) {
    this.index = new S3Index(deps.units, deps.clock, deps.region);
    this.multipart = deps.multipart(this.index);
  }

  get region(): string {
    return this.deps.region;
  }

  /** Sweeps pending releases now and every minute; expired multipart uploads are aborted now and every SVC_UPLOAD_CLEANUP_INTERVAL. */
  async start(): Promise<void> {
    await this.multipart.start();
    const sweep = () => void this.sweepReleases().catch((err: unknown) => this.deps.log.warn('s3: a sweep of released blobs failed', { err: String(err) }));
    sweep();
    this.sweeper = setInterval(sweep, SWEEP_MS);
    this.sweeper.unref();
  }

  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.multipart.stop();
  }

  // ---- buckets ----

  listBuckets(caller: Principal) {
    return this.index.buckets.list(caller.tenant);
  }

  createBucket(caller: Principal, name: string) {
    return this.index.buckets.create(ownerOf(caller), name);
  }

  headBucket(caller: Principal, name: string) {
    return this.index.buckets.head(caller.tenant, name);
  }

  deleteBucket(caller: Principal, name: string) {
    return this.index.buckets.delete(caller.tenant, name);
  }

  // ---- objects ----

  /**
   * Before a PutObject's body is read: the bucket is the caller's, and `If-None-Match: *` /
   * `If-Match` already hold (decided again when the object is written; checked here so a refused
   * PUT does not store its body first).
   */
  async beforePut(caller: Principal, bucket: string, key: string, conditions?: WriteConditions): Promise<void> {
    if (!conditions || (conditions.ifMatch === undefined && conditions.ifNoneMatch === undefined)) {
      await this.index.buckets.head(caller.tenant, bucket);
      return;
    }
    let current: ObjectRecord | undefined;
    try {
      current = await this.index.objects.get(caller.tenant, bucket, key);
    } catch (err) {
      if ((err as { code?: string }).code !== 'no_such_key') throw err;
    }
    checkConditions(current, conditions);
  }

  /**
   * The ingest of a PutObject's body for the caller: every tenant rule of the blob namespace
   * (engine/ingests); its MD5 (the ETag) measured with its SHA-256, and what the request stated
   * of them checked before the blob is published.
   */
  ingest(caller: Principal | undefined, body: BlobBody, stated: StatedDigests): DirectIngest | Promise<DirectIngest> {
    return this.deps.ingests.blob(caller, { ...body, measure: measuredAgainst(stated) });
  }

  /**
   * PutObject, once its body is published (or empty): the key names `content`. A blob being
   * released meanwhile (blob-refs.ts) is answered 503 SlowDown: the client
   * sends the body again, and its publication holds the blob anew. `tookHold`: the publication
   * made the blob the tenant's (DirectIngest.tookHold); a write refused after it (its condition
   * failed since `beforePut`: a concurrent writer) gives that hold back unless an object names it.
   * `publishedSince`: the clock read before the publication began (ingest.end()); with it, the
   * write is judged against a release that ended meanwhile (blob-refs.ts tombstones: 503 SlowDown).
   */
  async putObject(caller: Principal, bucket: string, key: string, content: ObjectContent, meta: ObjectMeta, conditions?: WriteConditions, tookHold = false, publishedSince?: number): Promise<ObjectRecord> {
    let outcome: WriteOutcome;
    const publication: Publication | undefined = publishedSince === undefined || content.blobId === EMPTY_BLOB_ID ? undefined : { blobId: content.blobId, tookHold, since: publishedSince };
    try {
      outcome = await this.retryReleasing(() => this.index.objects.put(ownerOf(caller), bucket, key, content, meta, conditions, publication));
    } catch (err) {
      if (tookHold && content.blobId !== EMPTY_BLOB_ID) await this.releaseOrphan(caller.tenant, content.blobId);
      throw err;
    }
    await this.settle(caller.tenant, outcome);
    return outcome.record;
  }

  /**
   * HeadObject, GetObject: the record and its blob's manifest; at once when both are (a node's
   * own LMDB with the record and the manifest decoded: no wait between the request and its answer).
   */
  getObject(caller: Principal, bucket: string, key: string): ObjectRead | Promise<ObjectRead> {
    const record = this.index.objects.get(caller.tenant, bucket, key);
    return record instanceof Promise ? record.then((r) => this.readOf(caller.tenant, bucket, key, r)) : this.readOf(caller.tenant, bucket, key, record);
  }

  private readOf(tenant: string, bucket: string, key: string, record: ObjectRecord): ObjectRead | Promise<ObjectRead> {
    if (record.blobId === EMPTY_BLOB_ID) return { record };
    const gone = (err: unknown): never => {
      // The tenant's hold went: not by the blob API's delete (refused while objects name the blob), so a fault to log.
      this.deps.log.error('s3: an object names a blob its tenant does not hold', { bucket, key, blob: record.blobId, err: String(err) });
      throw s3Refusal('NoSuchKey', 'The specified key does not exist (its blob is gone).');
    };
    let manifest: Manifest | Promise<Manifest>;
    try {
      // The record's id is one svc formatted: the catalog's key as it stands.
      manifest = this.deps.blobs.manifest(record.blobId, tenant);
    } catch (err) {
      return gone(err);
    }
    return manifest instanceof Promise ? manifest.then((m) => ({ record, manifest: m }), gone) : { record, manifest };
  }

  async deleteObject(caller: Principal, bucket: string, key: string): Promise<void> {
    const outcome = await this.index.objects.delete(caller.tenant, bucket, key);
    await this.settle(caller.tenant, outcome);
  }

  /** DeleteObjects: each key on its own (an absent key is deleted too, as S3 says). */
  async deleteObjects(caller: Principal, bucket: string, keys: readonly string[]): Promise<DeleteOneResult[]> {
    await this.index.buckets.head(caller.tenant, bucket);
    const results: DeleteOneResult[] = [];
    for (const key of keys) {
      try {
        await this.deleteObject(caller, bucket, key);
        results.push({ key });
      } catch (err) {
        const code = s3CodeOf(err);
        if (code === undefined) throw err;
        results.push({ key, error: { code, message: (err as Error).message } });
      }
    }
    return results;
  }

  /** CopyObject: a new record naming the source's blob; `meta` given: REPLACE, else COPY. No bytes move. */
  async copyObject(caller: Principal, source: CopySource, bucket: string, key: string, meta?: ObjectMeta, conditions?: WriteConditions): Promise<ObjectRecord> {
    const outcome = await this.retryReleasing(() => this.index.objects.copy(ownerOf(caller), source, bucket, key, meta, conditions));
    await this.settle(caller.tenant, outcome);
    return outcome.record;
  }

  listObjects(caller: Principal, bucket: string, query: ListQuery): Promise<ListPage<ObjectRecord>> {
    return this.index.objects.list(caller.tenant, bucket, query);
  }

  // ---- multipart uploads (engine/s3/multipart-uploads.ts) ----

  createMultipart(caller: Principal, bucket: string, key: string, meta: ObjectMeta, checksum?: { algorithm?: ChecksumAlgorithm; type?: string }) {
    return this.multipart.create(ownerOf(caller), bucket, key, meta, checksum);
  }

  /** UploadPart: the part's ingest for the edge to feed (through the tenant gate first). */
  uploadPart(caller: Principal, bucket: string, key: string, uploadId: string, partNumber: number, body: PartBody) {
    return this.multipart.uploadPart(ownerOf(caller), bucket, key, uploadId, partNumber, body);
  }

  /**
   * UploadPartCopy of an object the caller may read (`source`: getObject's, its copy conditions
   * checked), whole or `range` (416 outside it): engine/s3/part-copy.ts says what is read and
   * what is copied. `signal`: the client went away (the copy stops, no part recorded).
   */
  copyPart(caller: Principal, source: ObjectRead, bucket: string, key: string, uploadId: string, partNumber: number, range?: CopyRange, signal?: AbortSignal) {
    const { record, manifest } = source;
    return this.multipart.copyPart(ownerOf(caller), bucket, key, uploadId, partNumber, {
      blobId: record.blobId, size: record.size, etag: record.etag, multipart: record.parts !== undefined, checksums: record.checksums,
      ...(manifest ? { manifest } : {}), ...(range ? { range } : {}),
    }, signal);
  }

  /** CompleteMultipartUpload; an object it replaced releases its blob as a PutObject's would. */
  async completeMultipart(caller: Principal, bucket: string, key: string, uploadId: string, listed: readonly CompletePart[], conditions?: WriteConditions, stated?: StatedObjectChecksum): Promise<Completed> {
    const outcome = await this.multipart.complete(ownerOf(caller), bucket, key, uploadId, listed, conditions, stated);
    await this.settle(caller.tenant, outcome);
    return outcome;
  }

  abortMultipart(caller: Principal, bucket: string, key: string, uploadId: string): Promise<void> {
    return this.multipart.abort(caller.tenant, bucket, key, uploadId);
  }

  listParts(caller: Principal, bucket: string, key: string, uploadId: string, options: { partNumberMarker?: number; maxParts?: number }) {
    return this.multipart.listParts(caller.tenant, bucket, key, uploadId, options);
  }

  listUploads(caller: Principal, bucket: string, query: Parameters<MultipartUploads['listUploads']>[2]) {
    return this.multipart.listUploads(caller.tenant, bucket, query);
  }

  // ---- holds and releases ----

  /**
   * A write that meets a blob being released (blob-refs.ts): a PutObject's publication may have
   * come before the catalog's removal, so it is not written; 503 SlowDown, and the client's retry
   * publishes the blob anew. (A copy never meets one: its source object keeps the count above 0.)
   */
  private async retryReleasing<T>(write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (isBlobReleasing(err)) throw new SvcError('unavailable', 'slow_down', 'Please reduce your request rate (the object\'s blob was being released); send the request again', { retryAfterSeconds: 1 });
      throw err;
    }
  }

  /** After a write: counts that fell to 0 release the tenant's hold (a count that rose was held by the publication). */
  private async settle(tenant: string, changes: RefChanges & Partial<WriteOutcome>): Promise<void> {
    for (const blobId of changes.released) {
      await this.release(tenant, blobId).catch((err: unknown) => this.deps.log.warn('s3: a blob release failed; the sweep retries it', { tenant, blob: blobId, err: String(err) }));
    }
  }

  /** The release protocol (blob-refs.ts): begin, remove the catalog's hold, end. */
  private release(tenant: string, blobId: string): Promise<void> {
    return this.index.refs.release(tenant, blobId, async () => {
      if (blobId !== EMPTY_BLOB_ID) await this.deps.manifests.remove(blobId, tenant);
    });
  }

  /** A hold a refused write's publication took: released now unless an object names the blob (else the sweep does it). */
  private async releaseOrphan(tenant: string, blobId: string): Promise<void> {
    try {
      await this.index.refs.orphaned(tenant, blobId, this.deps.clock.now());
      await this.release(tenant, blobId);
    } catch (err) {
      this.deps.log.warn('s3: the hold of a refused write was not released; the sweep retries it', { tenant, blob: blobId, err: String(err) });
    }
  }

  /** Releases whose releaser died midway, or that failed; then tombstones past their time (blob-refs.ts). */
  async sweepReleases(): Promise<void> {
    await this.index.refs.pruneTombstones(this.deps.clock.now());
    for (;;) {
      const pending = await this.index.refs.pendingReleases(100);
      for (const { tenant, blobId, deleting } of pending) {
        if (deleting) await this.index.refs.endRelease(tenant, blobId);
        else await this.release(tenant, blobId);
      }
      if (pending.length < 100) return;
    }
  }

  /** GC's roots of the S3 index: the blocks of the blobs objects and parts name. */
  blockRoots(): BlockRoots {
    const manifests = this.deps.manifests;
    return this.index.refs.roots(async (blobId, tenant) => {
      if (blobId === EMPTY_BLOB_ID) return undefined;
      const manifest = await manifests.get(blobId, tenant);
      return manifest?.record.refs;
    });
  }
}
