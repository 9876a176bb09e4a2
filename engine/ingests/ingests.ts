// Where every ingest of this node starts: the blob namespace's bodies through the tenant gate
// (`blob`: POST /api/v1/blobs today, S3's PutObject next), and the ingests the engine's own
// services start within the limits they apply themselves (document content, views, a session's
// parts). Each is tracked by garbage collection, and none starts below the free-space floor (507).

import { DirectIngest, type IngestDeps, type IngestOptions } from '../cas/index.js';
import { tenantObjectLimit } from '../base/errors.js';
import type { Collector } from '../gc/index.js';
import type { DiskSpace } from '../store/index.js';
import type { ByteCaller, TenantGate } from '../tenancy/index.js';
import { PartIngest, type PartOptions } from '../uploads/index.js';

/** What an ingest of a whole body into the blob namespace is told: the request's two headers, parsed. */
export interface BlobBody {
  /** The Content-Type as sent, if any (a media type, checked at the edge). */
  contentType?: string;
  /** The Content-Length, if any: an exact contract, and what the gate judges before any byte. */
  declaredLength?: number;
  /** Measure the body's MD5 too, and check the body before publication (an S3 PutObject: engine/s3/stated-digests.ts). */
  measure?: Pick<IngestOptions, 'md5' | 'verify'>;
}

export interface IngestsDeps {
  /** What every ingest is given: made at the first ingest (an upload of a few KiB should not pay for it). */
  ingestDeps: () => IngestDeps;
  /** Garbage collection, which tracks every ingest (built after the services that start them). */
  gc: () => Pick<Collector, 'track'>;
  space: Pick<DiskSpace, 'assertRoom'>;
  gate: TenantGate;
}

export class Ingests {
  private made?: IngestDeps;

  constructor(private readonly deps: IngestsDeps) {}

  /**
   * A body for the blob namespace of `caller`'s tenant, through the tenant gate. Without a caller
   * (security off) the ingest itself, at once: nothing read, nothing more allocated. With one: a
   * declared length past the object limit is 413; with a quota, the room it leaves is read first
   * (the tenant's document content and its open uploads' reservations count; a declared length
   * that cannot fit is 507), so the answer is a promise; the byte budget is charged a declared
   * length before any byte (429), else each chunk as it is pushed. The blob is the tenant's and
   * its publication checks the quota again in its transaction.
   */
  blob(caller: ByteCaller | undefined, body: BlobBody): DirectIngest | Promise<DirectIngest> {
    const gate = this.deps.gate;
    const { declaredLength, contentType, measure } = body;
    if (!caller || !gate.enabled) return this.start({ contentType, declaredLength, ...measure });
    const { tenant } = caller;
    const { maxObjectBytes, quotaBytes } = gate.limits(tenant);
    if (quotaBytes === undefined) {
      if (declaredLength !== undefined && maxObjectBytes !== undefined && declaredLength > maxObjectBytes) throw tenantObjectLimit(maxObjectBytes);
      return this.start({ tenant, tenantBlocks: true, maxObjectBytes, contentType, declaredLength, meter: gate.body(caller, declaredLength), ...measure });
    }
    return gate.room(tenant, { declaredLength }).then((room) => this.start({ tenant, tenantBlocks: true, ...room, contentType, declaredLength, meter: gate.body(caller, declaredLength), ...measure }));
  }

  /**
   * An ingest whose limits its caller sets (document content, a view, a test): 507
   * insufficient_storage below SVC_MIN_FREE_SPACE, before any byte is read.
   */
  start(options: IngestOptions): DirectIngest {
    this.deps.space.assertRoom();
    return this.deps.gc().track(new DirectIngest(this.ingestDeps(), options));
  }

  /** An ingest of a resumable part (engine/uploads checks the free space and the gate; a commit's, which only cuts bytes already staged, is not refused). */
  startPart(options: PartOptions): PartIngest {
    return this.deps.gc().track(new PartIngest(this.ingestDeps(), options));
  }

  private ingestDeps(): IngestDeps {
    return (this.made ??= this.deps.ingestDeps());
  }
}
