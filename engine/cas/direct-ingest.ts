import { xxh64 } from '@node-rs/xxhash';
import { SvcError, blobQuotaExceeded, ingestFailed, invalidBlob, tenantObjectLimit } from '../base/errors.js';
import { formatContentId } from '../base/content-id.js';
import { type BlobSummary, type ManifestRecord, type StoredBlock, pack } from '../store/index.js';
import { chunkerName } from './chunkers.js';
import { Ingest, type IngestDeps } from './ingest.js';
import { moveIngest } from './ingest-lifecycle.js';

interface IngestResult {
  blob: BlobSummary;
  /** The body's MD5 (hex), when the options asked for it. */
  md5?: string;
  freshBlocks: number;
  duplicateBlocks: number;
  durationSeconds: number;
}

/** An unlisted ingest's result: the manifest record is the caller's to keep (not in the blob namespace). */
interface UnlistedResult {
  id: string;
  record: ManifestRecord;
  /** This upload's media type (a listed manifest keeps the first uploader's). */
  mediaType: string;
  /** The body's MD5 (hex), when the options asked for it. */
  md5?: string;
  /**
   * With `recordedByUnit`: the blocks the caller's unit records (Unit.recordBlocks), and `settle`,
   * to call once that unit committed or gave up (until then the ingest holds GC's purge fence).
   */
  toRecord?: { blocks: readonly StoredBlock[]; settle(): void };
}

/** What an ingest measured of the whole body, for `verify`. */
export interface MeasuredIngest {
  size: number;
  sha256: string;
  md5?: string;
}

export interface IngestOptions {
  /** Whose blob it is (default: the default tenant). */
  tenant?: string;
  /** Count blocks as fresh only when new to the tenant (security on: nothing may tell of other tenants' data). */
  tenantBlocks?: boolean;
  /** The tenant's policy: its largest object (413 tenant_object_limit_exceeded) and retained-byte quota (507 at publication). */
  maxObjectBytes?: number;
  /** The room the quota leaves the tenant's blobs (its quota less `documentBytes` and `stagedBytes`). */
  quotaBytes?: number;
  /** The tenant's document content, which its quota counts beside its blobs (a refusal's numbers). */
  documentBytes?: number;
  /** What the tenant's open uploads reserve, also outside `quotaBytes` (a refusal's numbers). */
  stagedBytes?: number;
  /** The Content-Type header as sent, if any. */
  contentType?: string;
  /** The Content-Length header, if any: an exact contract. */
  declaredLength?: number;
  /** A body without a declared length: charged to the caller's byte budget as it streams (engine/tenancy TenantGate.body). */
  meter?: (bytes: number) => void;
  /**
   * Blocks are stored and recorded, but no manifest is published in the blob namespace: the
   * caller keeps the record (document content, which the blob API must not list or delete).
   */
  unlisted?: boolean;
  /**
   * An unlisted ingest's last check before its blocks are recorded (a tenant's quota, once the
   * size is known): a throw refuses the ingest, and the blocks it wrote go back at once.
   */
  beforeRecord?: (size: number) => Promise<void>;
  /**
   * An unlisted ingest's blocks are recorded by its caller's unit of work, in its commit
   * (Unit.recordBlocks, where UnitStore.recordsBlocks), not by the ingest: one statement fewer on
   * pg-s3. The answer's `toRecord` hands them over; the ingest's end is reported to GC (whose
   * purge fence it holds, engine/gc/ingest-fence.ts) only once the caller settles it.
   */
  recordedByUnit?: boolean;
  /** Also measure the body's MD5 (S3's ETag): in the results and for `verify`. */
  md5?: boolean;
  /**
   * The last check of the body as measured, before anything is published or recorded (an S3
   * body's signed SHA-256 and Content-MD5): a throw refuses the ingest, and its blocks go back.
   */
  verify?: (measured: MeasuredIngest) => void | Promise<void>;
}

/**
 * A whole object in one body (`POST /api/v1/blobs`, document content): when the body has ended
 * and every block is stored, its manifest is published (or, unlisted, recorded for the caller).
 * A small body that the chunker cannot cut is one block; at most SVC_INLINE_MAX_BYTES it goes
 * into the catalog with its manifest, without a block file.
 */
export class DirectIngest extends Ingest {
  private readonly startedAt = process.hrtime.bigint();
  /** Decided when the scan is opened: a body too small for any cut is one block, not scanned for cuts. */
  private oneBlock?: boolean;
  private finish?: { resolve: (r: IngestResult) => void; reject: (e: unknown) => void };
  #tookHold?: boolean;

  constructor(
    deps: IngestDeps,
    private readonly options: IngestOptions,
  ) {
    super(deps, {
      contentType: options.contentType,
      declaredLength: options.declaredLength,
      streamLength: options.declaredLength,
      ...objectLimit(deps.config.maxUploadBytes, options.maxObjectBytes),
      mayHashHere: true,
      alwaysWrite: options.tenantBlocks,
      meter: options.meter,
      measureMd5: options.md5,
    });
  }

  /** The body ended: resolves once the manifest is published. */
  end(): Promise<IngestResult> {
    return this.reported(() => {
      this.ended = true;
      if (this.failure) return Promise.reject(this.failure);
      if (this.received === 0) throw this.fail(invalidBlob('Empty blobs are not supported'), false);
      this.checkDeclaredLength();
      const done = new Promise<IngestResult>((resolve, reject) => (this.finish = { resolve, reject }));
      this.pump();
      return done;
    });
  }

  /**
   * Once `end` resolved: whether this publication made the blob the tenant's (false: the tenant
   * held it already). Not in the result: the blob API answers that as it is. A writer that names
   * the blob afterwards (S3) gives the hold back if its write is refused and it took the hold.
   */
  get tookHold(): boolean | undefined {
    return this.#tookHold;
  }

  /** The body of an unlisted ingest ended: resolves once its blocks are durable, with the manifest record. */
  endUnlisted(): Promise<UnlistedResult> {
    return this.end() as unknown as Promise<UnlistedResult>;
  }

  /** Blocks for the caller's unit to record: the ingest's end waits for `settle` (its fence held, its blocks claimed). */
  private handOver(blocks: readonly StoredBlock[]): { blocks: readonly StoredBlock[]; settle(): void } {
    this.handedOver.add(blocks);
    this.holdEnd();
    let settled = false;
    return {
      blocks,
      settle: () => {
        if (settled) return;
        settled = true;
        this.giveBack(blocks);
        this.endHeldUntilNow();
      },
    };
  }

  protected rejectPending(err: SvcError): boolean {
    if (!this.finish) return false;
    this.finish.reject(err);
    return true;
  }

  protected advance(allStored: boolean, complete: boolean): void {
    const stored = this.ring.stored;
    if (this.oneBlock === undefined && (complete || this.paused || stored >= this.ring.segmentSize)) {
      this.oneBlock = complete && this.isOneBlock(stored);
      if (!this.oneBlock || !this.sha) this.openScan(!this.sha, this.oneBlock ? null : this.spec!);
    }
    this.postRanges(complete, true);
    if (!allStored) return;
    if (this.oneBlock && this.cutStart === 0) {
      this.cutStart = stored;
      if (stored <= this.deps.config.inlineMaxBytes && !this.options.unlisted) {
        // A small one-block body goes into the catalog with its manifest: no file, no worker.
        void this.publish(this.ring.head.subarray(0, stored));
        return;
      }
      this.queue.cut(0, stored);
      this.queue.dispatch();
      return;
    }
    if (this.cutStart === stored && this.queue.idle) void this.publish();
  }

  /** Whether the chunker cannot cut a body of `size` bytes (PDF bodies may cut at any %%EOF). */
  private isOneBlock(size: number): boolean {
    const spec = this.spec!;
    return (spec.kind === 'fastcdc' && size <= spec.min) || (spec.kind === 'fixed' && size <= spec.size);
  }

  private async publish(inline?: Uint8Array): Promise<void> {
    this.stage = moveIngest(this.stage, 'settling');
    let answer: IngestResult | UnlistedResult;
    try {
      const { sha256: hex, md5 } = await this.wholeDigests();
      await this.options.verify?.({ size: this.received, sha256: hex, ...(md5 === undefined ? {} : { md5 }) });
      const blocks: StoredBlock[] = inline ? [{ hex, size: inline.length, checksum: xxh64(inline), fresh: true }] : this.queue.from(0);
      if (this.options.unlisted) {
        await this.options.beforeRecord?.(this.received);
        await this.deps.holdRoots?.();
        const chunker = chunkerName(this.spec!);
        if (this.options.recordedByUnit) {
          answer = { ...unlistedRecord(hex, this.received, this.mediaType, chunker, blocks), mediaType: this.mediaType, ...(md5 === undefined ? {} : { md5 }), toRecord: this.handOver(blocks) };
        } else {
          const unlisted = await this.deps.manifests.recordUnlisted(hex, this.received, this.mediaType, chunker, blocks);
          answer = { ...unlisted, mediaType: this.mediaType, ...(md5 === undefined ? {} : { md5 }) };
        }
      } else {
        const { manifest, existed, newToTenant } = await this.deps.manifests.publish(hex, this.received, this.mediaType, chunkerName(this.spec!), blocks, inline, {
          tenant: this.options.tenant,
          tenantBlocks: this.options.tenantBlocks,
          quotaBytes: this.options.quotaBytes,
          quotaExceeded: blobQuotaExceeded(this.options.quotaBytes ?? Infinity, this.options.documentBytes ?? 0, this.received, this.options.stagedBytes ?? 0),
        });
        this.#tookHold = !existed;
        const counted = newToTenant ? blocks.map((b, i) => ({ size: b.size, fresh: newToTenant[i]! && !existed })) : blocks;
        const fresh = this.deps.stats.recordPublication(counted, inline !== undefined && existed);
        answer = {
          blob: manifest.summary(),
          ...(md5 === undefined ? {} : { md5 }),
          freshBlocks: fresh,
          duplicateBlocks: blocks.length - fresh,
          durationSeconds: Number(process.hrtime.bigint() - this.startedAt) / 1e9,
        };
      }
    } catch (err) {
      this.stage = moveIngest(this.stage, 'failed');
      this.release();
      // A refusal of the catalog's (a quota) is the answer; anything else is logged.
      if (err instanceof SvcError) return this.finish?.reject(err);
      this.deps.log.error('ingest: manifest publication failed', { err: String((err as Error)?.stack ?? err) });
      return this.finish?.reject(ingestFailed('The catalog could not publish the manifest'));
    }
    // Moved only once the answer is made: nothing after it can fail a succeeded ingest.
    this.stage = moveIngest(this.stage, 'succeeded');
    this.release();
    (this.finish?.resolve as ((r: IngestResult | UnlistedResult) => void) | undefined)?.(answer);
  }
}

/** The record of an unlisted manifest whose blocks its caller records (the time: this node's). */
function unlistedRecord(hex: string, size: number, mediaType: string, chunker: string, blocks: readonly StoredBlock[]): { id: string; record: ManifestRecord } {
  const { refs, sizes } = pack(blocks);
  return { id: formatContentId(hex, size), record: { size, mediaType, chunker, createdAt: Date.now(), seq: 0, refs, sizes } };
}

/** The body's limit: SVC_MAX_UPLOAD_BYTES, or the tenant's object limit (with its own code) when that is lower. */
export function objectLimit(maxUploadBytes: number, maxObjectBytes: number | undefined): { maxBytes: number; tooLarge?: (max: number) => SvcError } {
  return maxObjectBytes !== undefined && maxObjectBytes < maxUploadBytes ? { maxBytes: maxObjectBytes, tooLarge: tenantObjectLimit } : { maxBytes: maxUploadBytes };
}
