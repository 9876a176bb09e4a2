// S3 multipart uploads on the store (decisions §5: a multipart upload is a resumable session of
// the store; Complete copies nothing). What the S3 listener calls; the records are the index's
// (./multipart.ts), the bytes the store's:
// - A part is its own unlisted content: an ingest like document content's (blocks cut by the
//   chunker within the part, recorded, not published), so parts arrive in any order and in
//   parallel; its blocks are kept in its record (PartContent.blocks), a GC root while it is on
//   record (`blockRoots`). Its MD5 (the part's ETag), its checksum and, when every part before it
//   is hashed, the whole object's running SHA-256 are taken as it streams (`chunk`).
// - Complete publishes a manifest whose blocks are the listed parts' blocks in order (a part's
//   last block, shorter than the chunker's minimum, sits in the middle: readers, verification
//   and GC take blocks of any size, as tus concatenation's manifests have them); the blob id's
//   SHA-256 is what the marks (./part-hashes.ts) leave to hash. Then the index writes the object.
// - A replaced, discarded or aborted part's content is released by its record's removal: nothing
//   else names its blocks, and GC takes them. Uploads expire after SVC_UPLOAD_TTL (`cleanup`).

import { createHash } from 'node:crypto';
import type { Clock } from '../base/clock.js';
import { ingestFailed } from '../base/errors.js';
import { S3_MAX_PARTS, S3_UPLOAD_CLEANUP_PAGE } from '../base/limits.js';
import type { Logger } from '../base/log.js';
import { type BlockRoots, type DirectIngest, type IngestOptions, formatContentId, pushAll } from '../cas/index.js';
import type { Stats } from '../ops/index.js';
import type { BlobCatalog, Manifest, StoredBlock, UnitStore } from '../store/index.js';
import { type ByteCaller, type TenantGate, publicationQuota } from '../tenancy/index.js';
import { type StatedObjectChecksum, checkStatedChecksum, multipartChecksum, multipartObjectChecksums } from './checksum-types.js';
import { type Checksum, type ChecksumAlgorithm, createChecksum } from './checksums.js';
import { isBlobReleasing, s3Refusal } from './errors.js';
import { type CompletePart, type PreparedComplete, checkPartNumber, releasePartBytes } from './multipart.js';
import type { WriteConditions, WriteOutcome } from './objects.js';
import { type PartSource, copyLength, planPartCopy } from './part-copy.js';
import { type HashAtPart, PartHashes } from './part-hashes.js';
import { type ObjectMeta, PARTS, type PartContent, type S3Owner, UPLOADS } from './records.js';
import type { S3Index } from './s3-index.js';
import { measuredAgainst } from './stated-digests.js';

/** An upload's key: [bucket, stored key, upload id]. */
type UploadKey = [string, string, string];
const sameKey = (a: UploadKey, b: UploadKey) => a[0] === b[0] && a[1] === b[1] && a[2] === b[2];

/** The content id of an empty part (the SHA-256 of nothing): no bytes, no blocks. */
const EMPTY_CONTENT_ID = formatContentId(createHash('sha256').digest('hex'), 0);

export interface MultipartUploadsDeps {
  index: S3Index;
  units: UnitStore;
  /** An ingest whose limits the caller sets (Ingests.start: the free-space floor, GC's tracking). */
  startIngest(options: IngestOptions): DirectIngest;
  gate: TenantGate;
  manifests: BlobCatalog;
  /** A block's bytes (BlockStore.read): parts that came early are hashed from them. */
  readBlock(hex: string, size: number): Promise<Uint8Array>;
  /** Bytes [start, end) of a blob, verified pieces in order (BlobReader.range: a piece is valid until the next is asked for). */
  readRange(manifest: Manifest, start: number, end: number): AsyncIterable<Uint8Array>;
  stats: Stats;
  log: Logger;
  clock: Clock;
  /** Security on: a blob is its tenant's, and counts only its own blocks as duplicates. */
  tenantBlobs: boolean;
  /** SVC_UPLOAD_TTL and SVC_UPLOAD_CLEANUP_INTERVAL. */
  config: { ttlMs: number; cleanupIntervalMs: number };
}

/** What an UploadPart says of its body besides its bytes (parsed at the edge). */
export interface PartBody {
  /** The body's length (Content-Length, or x-amz-decoded-content-length of aws-chunked). */
  declaredLength: number;
  /** Content-MD5 as sent (base64): BadDigest unless it is the body's. */
  contentMd5?: string;
  /** The SHA-256 the request's signature covers (x-amz-content-sha256), when it is one: XAmzContentSHA256Mismatch unless it is the body's. */
  sha256?: string;
  /** x-amz-checksum-*: the algorithm and, unless it comes in a trailer (`finish`), its value. */
  checksum?: { algorithm: ChecksumAlgorithm; value?: string };
}

export interface UploadedPart {
  /** The part's MD5, hex, without quotes. */
  etag: string;
  size: number;
  checksums: Partial<Record<ChecksumAlgorithm, string>>;
}

/** A part being received: the edge feeds `ingest` (feedIngest), calling `chunk` with each piece first, then `finish`. */
export interface MultipartPart {
  ingest: DirectIngest;
  /** Sees each piece before the ingest takes it: MD5, checksum and, in order, the object's hash. */
  chunk(bytes: Uint8Array): void;
  /** After the body: the part checked (BadDigest) and on record. `trailerChecksum`: the value of an aws-chunked trailer. */
  finish(trailerChecksum?: string): Promise<UploadedPart>;
  /** The request failed or the client went away. */
  abort(): void;
}

export interface Completed extends WriteOutcome {
  blobId: string;
  etag: string;
  size: number;
  /** Parts whose bytes Complete read to finish the blob id (the others were hashed before). */
  partsHashedAtComplete: number;
  /** The blob was published already (another object, or a repeat). */
  existed: boolean;
}

export class MultipartUploads {
  readonly hashes: PartHashes;
  private cleanupTimer?: NodeJS.Timeout;

  constructor(private readonly deps: MultipartUploadsDeps) {
    this.hashes = new PartHashes({ units: deps.units, readBlock: deps.readBlock, log: deps.log });
  }

  /** CreateMultipartUpload: `checksum`, x-amz-checksum-algorithm and -type as asked (./checksum-types.ts: S3's defaults, 400 for a pair S3 refuses). */
  async create(owner: S3Owner, bucket: string, key: string, meta: ObjectMeta, checksum?: { algorithm?: ChecksumAlgorithm; type?: string }) {
    return this.deps.index.multipart.create(owner, bucket, key, meta, multipartChecksum(checksum?.algorithm, checksum?.type));
  }

  /**
   * UploadPart: through the tenant gate before any byte (the object limit against the upload's
   * running total, the byte budget against the part: 413, 429; the quota: 507), then an unlisted
   * ingest of the part for the edge to feed.
   */
  async uploadPart(caller: S3Owner, bucket: string, key: string, uploadId: string, partNumber: number, body: PartBody): Promise<MultipartPart> {
    const { upload, contents } = await this.admitPart(caller, bucket, key, uploadId, partNumber, body.declaredLength);
    const algorithm = body.checksum?.algorithm ?? upload.checksumAlgorithm;
    if (upload.checksumAlgorithm && algorithm !== upload.checksumAlgorithm) {
      throw s3Refusal('InvalidRequest', `Checksum Type mismatch occurred, expected checksum Type: ${upload.checksumAlgorithm.toLowerCase()}, actual checksum Type: ${algorithm?.toLowerCase()}`);
    }
    const at = await this.hashes.before(uploadId, partNumber, contents);
    const checksum = algorithm ? await createChecksum(algorithm) : undefined;
    const ingest = this.deps.startIngest({
      unlisted: true,
      tenant: caller.tenant,
      tenantBlocks: this.deps.tenantBlobs,
      declaredLength: body.declaredLength,
      contentType: 'application/octet-stream',
      // Its MD5 (the part's ETag) taken by the ingest; Content-MD5 and the signed SHA-256 checked before its blocks are recorded.
      ...measuredAgainst({ sha256: body.sha256, contentMd5: body.contentMd5 }),
    });
    return this.partOf(caller, bucket, key, uploadId, partNumber, body, { ingest, checksum, at });
  }

  /** A part of `length` bytes about to be stored: the upload, and the tenant gate against the upload's total with it (413, 429, 507). */
  private async admitPart(caller: S3Owner, bucket: string, key: string, uploadId: string, partNumber: number, length: number) {
    checkPartNumber(partNumber);
    const { index, units, gate } = this.deps;
    const upload = await index.multipart.upload(caller.tenant, bucket, key, uploadId);
    const parts = await units.range(PARTS, { start: [uploadId, 1], end: [uploadId, S3_MAX_PARTS + 1] });
    const contents = new Map(parts.map(({ key: [, n], value }) => [n, value.content]));
    const others = parts.reduce((sum, { key: [, n], value }) => (n === partNumber ? sum : sum + value.size), 0);
    const room = gate.enabled ? gate.part(caller as ByteCaller, uploadId, others + length, length) : undefined;
    if (room) await room;
    return { upload, contents };
  }

  /**
   * UploadPartCopy (./part-copy.ts): through the tenant gate as an UploadPart of the part's length
   * (413, 429, 507), then the source's blocks become the part (`whole`: nothing read; `blocks`:
   * read once to hash, nothing written), or the range's bytes are read and streamed into the
   * part's own ingest (`ingest`). The part's ETag is the MD5 of its bytes; with the upload's
   * checksum algorithm, its checksum is that of its bytes; the object's hash is taken as it goes
   * when the parts before it are hashed, as an UploadPart's. `signal`: the client went away; the
   * copy stops where it is (its ingest aborted, its reads closed) and records no part.
   */
  async copyPart(caller: S3Owner, bucket: string, key: string, uploadId: string, partNumber: number, source: PartSource, signal?: AbortSignal): Promise<UploadedPart> {
    const { upload, contents } = await this.admitPart(caller, bucket, key, uploadId, partNumber, copyLength(source));
    signal?.throwIfAborted();
    const algorithm = upload.checksumAlgorithm;
    const plan = planPartCopy(source, algorithm);
    if (plan.kind === 'whole') {
      // An empty part's checksum is that of nothing (an empty source's on record may be a multipart one's, `-N`).
      const known = algorithm && (plan.length === 0 ? (await createChecksum(algorithm)).digest() : source.checksums[algorithm]);
      const checksums: UploadedPart['checksums'] = algorithm && known ? { [algorithm]: known } : {};
      const content: PartContent = { blobId: plan.length === 0 ? EMPTY_CONTENT_ID : source.blobId, size: plan.length, blocks: plan.blocks };
      return this.record(caller, bucket, key, uploadId, partNumber, { etag: plan.etag, size: plan.length, checksums, content });
    }
    const at = await this.hashes.before(uploadId, partNumber, contents);
    const checksum = algorithm ? await createChecksum(algorithm) : undefined;
    const pieces = this.deps.readRange(source.manifest!, plan.start, plan.end);
    if (plan.kind === 'ingest') {
      const ingest = this.deps.startIngest({
        unlisted: true, tenant: caller.tenant, tenantBlocks: this.deps.tenantBlobs, declaredLength: plan.length, contentType: 'application/octet-stream',
        // Its MD5 (the part's ETag) taken by the ingest; nothing stated to check.
        ...measuredAgainst({}),
      });
      const part = this.partOf(caller, bucket, key, uploadId, partNumber, { declaredLength: plan.length }, { ingest, checksum, at });
      try {
        await pushAll(ingest, pieces, (piece) => part.chunk(piece), signal);
        signal?.throwIfAborted();
      } catch (err) {
        part.abort();
        throw err;
      }
      return part.finish();
    }
    // `blocks`: the bytes read once for their hashes; the part names the source's blocks.
    const md5 = createHash('md5');
    const sha256 = createHash('sha256');
    let seen = 0;
    for await (const piece of pieces) {
      signal?.throwIfAborted();
      seen += piece.length;
      md5.update(piece);
      sha256.update(piece);
      checksum?.update(piece);
      at?.hash.update(piece);
    }
    if (seen !== plan.length) throw ingestFailed(`The copied range read ${seen} of its ${plan.length} bytes`);
    signal?.throwIfAborted();
    const content: PartContent = { blobId: formatContentId(sha256.digest('hex'), plan.length), size: plan.length, blocks: plan.blocks };
    const checksums: UploadedPart['checksums'] = checksum ? { [checksum.algorithm]: checksum.digest() } : {};
    return this.record(caller, bucket, key, uploadId, partNumber, { etag: md5.digest('hex'), size: plan.length, checksums, content }, at);
  }

  /**
   * The part on record (replacing one of its number: its content goes with its record), then the
   * object's hash: kept from `at` when the part went into it as it streamed, else advanced later
   * (at the latest by Complete).
   */
  private async record(
    caller: S3Owner, bucket: string, key: string, uploadId: string, partNumber: number,
    part: { etag: string; size: number; checksums: UploadedPart['checksums']; content: PartContent }, at?: HashAtPart,
  ): Promise<UploadedPart> {
    await this.deps.index.multipart.putPart(caller.tenant, bucket, key, uploadId, partNumber, part);
    const unkept = (err: unknown) => this.deps.log.warn('s3 multipart: the object hash did not advance', { upload: uploadId, err: String(err) });
    if (at) await this.hashes.keep(uploadId, partNumber, part.content, at).catch(unkept);
    void this.hashes.advance(uploadId).catch(unkept);
    return { etag: part.etag, size: part.size, checksums: part.checksums };
  }

  /** The bytes of the tenant's open uploads' parts, `except` one upload (the tenant gate's reservation). */
  stagedBytes(tenant: string, except?: string): Promise<number> {
    return this.deps.index.multipart.stagedBytes(tenant, except);
  }

  /** The part's streaming state and its end. */
  private partOf(
    caller: S3Owner, bucket: string, key: string, uploadId: string, partNumber: number, body: PartBody,
    s: { ingest: DirectIngest; checksum?: Checksum; at?: HashAtPart },
  ): MultipartPart {
    let seen = 0;
    return {
      ingest: s.ingest,
      chunk: (bytes) => {
        seen += bytes.length;
        s.checksum?.update(bytes);
        s.at?.hash.update(bytes);
      },
      abort: () => s.ingest.abort(),
      finish: async (trailerChecksum) => {
        // The checksum is compared before the part's blocks are recorded: a refused part leaves nothing.
        const checksums: UploadedPart['checksums'] = {};
        if (s.checksum) {
          const value = s.checksum.digest();
          const stated = trailerChecksum ?? body.checksum?.value;
          if (stated !== undefined && stated !== value) {
            s.ingest.abort();
            throw s3Refusal('BadDigest', `The ${s.checksum.algorithm} you specified did not match the calculated checksum.`);
          }
          checksums[s.checksum.algorithm] = value;
        }
        const result = await s.ingest.endUnlisted();
        const size = result.record.size;
        // Every byte must have been seen by `chunk`: the checksum and the object's hash are taken there.
        if (seen !== size) throw ingestFailed(`The part's hashes saw ${seen} of its ${size} bytes`);
        const etag = result.md5!;
        const content: PartContent = { blobId: result.id, size, blocks: { refs: result.record.refs, sizes: result.record.sizes, chunker: result.record.chunker } };
        return this.record(caller, bucket, key, uploadId, partNumber, { etag, size, checksums, content }, s.at);
      },
    };
  }

  /**
   * CompleteMultipartUpload: the list checked (./multipart.ts), the size stated (x-amz-mp-object-size)
   * and the checksum stated checked against it, the whole object within the
   * tenant's limits (413, 507; its bytes were charged as parts), its SHA-256 finished, the
   * manifest of the parts' blocks published for the tenant (an existing blob: nothing new), the
   * object written. The outcome's `released` are for the wiring's release protocol (blob-refs.ts).
   */
  async complete(
    owner: S3Owner, bucket: string, key: string, uploadId: string, listed: readonly CompletePart[], conditions?: WriteConditions, stated: StatedObjectChecksum = {},
  ): Promise<Completed> {
    const { index, gate, manifests } = this.deps;
    const prepared = await index.multipart.prepareComplete(owner.tenant, bucket, key, uploadId, listed);
    if (stated.objectSize !== undefined && stated.objectSize !== prepared.size) {
      throw s3Refusal('InvalidRequest', `The provided 'x-amz-mp-object-size' header value ${stated.objectSize} does not match the size of the listed parts, ${prepared.size}.`);
    }
    // The object's checksum from the parts' (no byte read), checked against what the request stated before anything is published.
    const checksums = await multipartObjectChecksums(prepared.upload, prepared.parts);
    checkStatedChecksum(prepared.upload, stated, checksums);
    // Judged beside the tenant's other open uploads: this one's parts are the object's bytes.
    const room = gate.enabled ? await gate.room(owner.tenant, { declaredLength: prepared.size, session: uploadId }) : {};
    const { hex, partsRead } = await this.hashes.digest(uploadId, prepared.parts);
    const blocks = blocksOf(prepared);
    const chunkers = new Set(prepared.parts.map((p) => p.content.blocks!.chunker));
    const chunker = chunkers.size === 1 ? [...chunkers][0]! : 'concatenation';
    const mediaType = prepared.upload.meta.contentType ?? 'application/octet-stream';
    const publication = this.deps.tenantBlobs ? { tenant: owner.tenant, tenantBlocks: true, ...publicationQuota(room, prepared.size) } : {};
    // `since`: read before each publication, for the release protocol's tombstones (blob-refs.ts).
    let since = this.deps.clock.now();
    const publish = () => manifests.publish(hex, prepared.size, mediaType, chunker, blocks, undefined, publication);
    let published = await publish();
    this.deps.stats.recordPublication(published.newToTenant ? blocks.map((b, i) => ({ size: b.size, fresh: published.newToTenant![i]! && !published.existed })) : blocks, published.existed);
    const blobId = published.manifest.id;
    let outcome: Awaited<ReturnType<S3Index['multipart']['commitComplete']>>;
    let tookHold = !published.existed;
    for (let attempt = 1; ; attempt++) {
      try {
        const held = { blobId, tookHold: !published.existed, since };
        outcome = await index.multipart.commitComplete(owner, bucket, key, uploadId, prepared, { blobId, checksums }, conditions, held);
        break;
      } catch (err) {
        // The blob is being released by an object's earlier end (or was, after this publication): published again, the write again.
        if (isBlobReleasing(err) && attempt < 4) {
          since = this.deps.clock.now();
          published = await publish();
          if (!published.existed) tookHold = true;
          continue;
        }
        // Refused after the publication: the hold it took goes now, unless an object names the blob.
        if (tookHold) await this.releaseOrphan(owner.tenant, blobId);
        throw err;
      }
    }
    await this.hashes.drop(uploadId);
    return { ...outcome, blobId, etag: prepared.etag, size: prepared.size, partsHashedAtComplete: partsRead, existed: published.existed };
  }

  /** The hold a refused Complete's publication took (blob-refs.ts `orphaned`, then `release`); a failure is left to the sweep. */
  private async releaseOrphan(tenant: string, blobId: string): Promise<void> {
    const refs = this.deps.index.refs;
    try {
      await refs.orphaned(tenant, blobId, this.deps.clock.now());
      await refs.release(tenant, blobId, () => this.deps.manifests.remove(blobId, tenant));
    } catch (err) {
      this.deps.log.warn('s3 multipart: the hold of a refused Complete was not released; the sweep retries it', { tenant, blob: blobId, err: String(err) });
    }
  }

  /** AbortMultipartUpload: the upload and its parts go (their contents with their records). */
  async abort(tenant: string, bucket: string, key: string, uploadId: string): Promise<void> {
    await this.deps.index.multipart.abort(tenant, bucket, key, uploadId);
    await this.hashes.drop(uploadId);
  }

  listParts(...args: Parameters<S3Index['multipart']['listParts']>) {
    return this.deps.index.multipart.listParts(...args);
  }

  listUploads(...args: Parameters<S3Index['multipart']['listUploads']>) {
    return this.deps.index.multipart.listUploads(...args);
  }

  /** Resolves once the object hash's advance running on this node for the upload is done (tests, shutdown). */
  hashIdle(uploadId: string): Promise<void> {
    return this.hashes.idle(uploadId);
  }

  /**
   * Uploads initiated more than SVC_UPLOAD_TTL ago are aborted, as sessions expire. The uploads
   * are read a page at a time by key, and a page's expired ones deleted after it is read: deleting
   * while a scan without a snapshot walks the table skips entries on LMDB (the one after each).
   */
  async cleanup(now = this.deps.clock.now()): Promise<{ expired: number }> {
    const { units, config } = this.deps;
    let expired = 0;
    let from: UploadKey | undefined;
    for (;;) {
      // `start` is inclusive: the page begins with the previous page's last upload unless it went.
      const page = await units.range(UPLOADS, { ...(from ? { start: from } : {}), limit: S3_UPLOAD_CLEANUP_PAGE });
      for (const { key, value } of page) {
        if (from && sameKey(key, from)) continue;
        if (value.initiated + config.ttlMs <= now && (await this.expire(key, value.initiated))) expired++;
      }
      if (page.length < S3_UPLOAD_CLEANUP_PAGE) return { expired };
      from = page[page.length - 1]!.key;
    }
  }

  /** One expired upload aborted, unless it changed since it was read (false). */
  private async expire(key: UploadKey, initiated: number): Promise<boolean> {
    const uploadId = key[2];
    const gone = await this.deps.units.run(async (unit) => {
      const current = await unit.get(UPLOADS, key);
      if (!current || current.initiated !== initiated) return false;
      unit.remove(UPLOADS, key);
      const parts = await unit.range(PARTS, { start: [uploadId, 0], end: [uploadId, S3_MAX_PARTS + 1] });
      for (const part of parts) unit.remove(PARTS, part.key);
      releasePartBytes(unit, current.owner.tenant, parts);
      return true;
    });
    if (gone) await this.hashes.drop(uploadId);
    return gone;
  }

  /** A cleanup now, then every SVC_UPLOAD_CLEANUP_INTERVAL. */
  async start(): Promise<void> {
    const run = () =>
      this.cleanup().then(
        (r) => r.expired && this.deps.log.info('s3 multipart: expired uploads aborted', r),
        (err: unknown) => this.deps.log.error('s3 multipart: cleanup failed', { err: String(err) }),
      );
    await run();
    this.cleanupTimer = setInterval(run, this.deps.config.cleanupIntervalMs);
    this.cleanupTimer.unref();
  }

  stop(): void {
    clearInterval(this.cleanupTimer);
  }

  /** The blocks of every part on record: garbage collection keeps them (the parts' contents are unlisted). */
  blockRoots(): BlockRoots {
    const units = this.deps.units;
    return {
      name: 's3 multipart parts',
      // In the data directory where the units are this node's (fs, s3); pg-s3's are any node's to mark.
      persistent: !units.shared,
      async *digests() {
        for await (const { value } of units.scan(PARTS)) {
          const refs = value.content.blocks?.refs;
          if (refs) for (let at = 0; at < refs.length; at += 40) yield refs.subarray(at, at + 32);
        }
      },
    };
  }
}

/** The listed parts' blocks in order: the object's manifest (nothing copied). */
function blocksOf(prepared: PreparedComplete): StoredBlock[] {
  const blocks: StoredBlock[] = [];
  for (const part of prepared.parts) {
    const recorded = part.content.blocks;
    if (!recorded) throw ingestFailed(`Part ${part.partNumber} has no blocks on record`);
    for (let i = 0; i < recorded.sizes.length / 4; i++) {
      blocks.push({ hex: recorded.refs.toString('hex', i * 40, i * 40 + 32), checksum: recorded.refs.readBigUInt64LE(i * 40 + 32), size: recorded.sizes.readUInt32LE(i * 4), fresh: false });
    }
  }
  return blocks;
}
