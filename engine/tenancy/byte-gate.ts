// The one place where a tenant's bytes meet its limits, whatever the protocol (blob API, resumable
// sessions, tus and its concatenation, document bytes, JSON bodies): the tenant's object limit
// (413), its quota (507) with the room its open uploads reserve, and the principal's byte budget
// (429). Route files ask the gate and pass on what it answers; they judge nothing themselves.
//
// - A declared length (Content-Length, Upload-Length, a tus final's sum) is judged before any
//   byte is read: past the object limit, or past what the quota leaves once the tenant's retained
//   bytes and what its other open uploads reserve are counted, it is refused at once.
// - An open upload's declared length reserves its room: the sessions' records say what each holds
//   (engine/store/upload-catalog.ts stagedOf), so every node of a cluster sees the same
//   reservations, and a commit, an abort or an expiry releases one by moving its record.
// - The byte budget is charged a declared length up front, and a body without one (chunked) as
//   it streams: once the budget is spent the request is refused and its ingest aborted.
//
// With security off, or for a tenant whose policy sets none of these, the gate does nothing and
// reads nothing (the 4 KiB upload path pays no catalog read).

import { tenantObjectLimit, tenantQuotaExceeded } from '../errors.js';
import type { Budgets } from './budgets.js';
import type { ShareScope } from './cluster-share.js';
import type { TenantPolicies } from './policy.js';

/** Whose bytes they are: the tenant (limits) and the principal (budget). */
export interface ByteCaller {
  tenant: string;
  subject: string;
}

/** What the gate reads of what a tenant holds: only when its policy sets a quota. */
export interface HeldBytes {
  /** The tenant's distinct blobs' bytes. */
  blobs(tenant: string): Promise<number>;
  /** The tenant's distinct document content's bytes. */
  documents(tenant: string): Promise<number>;
  /** What the tenant's open uploads reserve, the session `except` left out. */
  staged(tenant: string, except?: string): Promise<number>;
}

/**
 * The room a tenant's limits leave one object, for its publication: the object limit, and the
 * room its quota leaves its blobs (`quotaBytes`: the quota less its document content and what
 * its open uploads reserve, which the catalog checks the tenant's blob bytes against).
 */
export interface BlobRoom {
  maxObjectBytes?: number;
  quotaBytes?: number;
  documentBytes?: number;
  stagedBytes?: number;
}

/** Charges a streamed body's bytes as they come (throws 429 rate_limited once the budget is spent). */
export type BodyMeter = (bytes: number) => void;

export class ByteGate {
  constructor(
    /** Security on: policies apply. */
    private readonly enabled: boolean,
    private readonly policies: TenantPolicies,
    private readonly budgets: Budgets,
    private readonly held: HeldBytes,
  ) {}

  /** The tenant's object limit and quota (none with security off). Synchronous: no read. */
  limits(tenant: string): { maxObjectBytes?: number; quotaBytes?: number } {
    if (!this.enabled) return {};
    const { maxObjectBytes, quotaBytes } = this.policies.for(tenant);
    return { maxObjectBytes, quotaBytes };
  }

  /** 413 for a length past the tenant's object limit. */
  checkObject(tenant: string, length: number): void {
    const max = this.limits(tenant).maxObjectBytes;
    if (max !== undefined && length > max) throw tenantObjectLimit(max);
  }

  /**
   * The room the tenant's limits leave one object, for its publication; with `declaredLength`,
   * a length that cannot fit is refused now: 413 past the object limit, 507 past what the quota
   * leaves beside the retained bytes and the reservations of the tenant's open uploads (but
   * `session`'s own: its part or commit is judged against the others'). A repeat of a blob the
   * tenant holds would be free at publication; a declaration is judged as new bytes.
   */
  async room(tenant: string, options: { declaredLength?: number; session?: string } = {}): Promise<BlobRoom> {
    const { maxObjectBytes, quotaBytes } = this.limits(tenant);
    const { declaredLength, session } = options;
    if (declaredLength !== undefined && maxObjectBytes !== undefined && declaredLength > maxObjectBytes) throw tenantObjectLimit(maxObjectBytes);
    if (quotaBytes === undefined) return { maxObjectBytes };
    const [documentBytes, stagedBytes, blobBytes] = await Promise.all([
      this.held.documents(tenant),
      this.held.staged(tenant, session),
      declaredLength === undefined ? 0 : this.held.blobs(tenant),
    ]);
    if (declaredLength !== undefined) {
      const retainedBytes = documentBytes + blobBytes;
      if (declaredLength > quotaBytes - retainedBytes - stagedBytes) throw tenantQuotaExceeded({ quotaBytes, retainedBytes, stagedBytes, size: declaredLength }, 'The declared length');
    }
    return { maxObjectBytes, quotaBytes: quotaBytes - documentBytes - stagedBytes, documentBytes, stagedBytes };
  }

  /**
   * A new upload's declared length (a session's or tus upload's Upload-Length, at creation or
   * when a deferred one is declared): refused unless its room is free now (413, 507). Once its
   * record says the length, the room is reserved until the upload is committed, aborted or expires.
   */
  async reserve(tenant: string, declaredLength: number, session?: string): Promise<void> {
    await this.room(tenant, { declaredLength, session });
  }

  /** `bytes` of body to or from the caller, against its byte budget (429 rate_limited when spent); `scope`: whose share of it (cluster-share.ts). */
  charge(caller: ByteCaller, bytes: number, scope: ShareScope = 'cluster'): void {
    if (this.enabled) this.budgets.chargeBytes(caller.tenant, caller.subject, bytes, scope);
  }

  /**
   * A request body's charge: a declared length now, whole (429 before any byte is read); a body
   * without one, as it streams: the meter to call with each chunk. Undefined when nothing is left
   * to charge (a declared length, no caller, no byte budget).
   */
  body(caller: ByteCaller | undefined, declaredLength: number | undefined, scope: ShareScope = 'cluster'): BodyMeter | undefined {
    if (!caller || !this.enabled) return undefined;
    if (declaredLength !== undefined) {
      this.charge(caller, declaredLength, scope);
      return undefined;
    }
    if (this.policies.for(caller.tenant).bytesPerMinute === undefined) return undefined;
    return (bytes) => this.charge(caller, bytes, scope);
  }

  /**
   * An object assembled from bytes the tenant already stored (a tus final upload): it is a new
   * object of `length` bytes all the same, so it obeys the object limit (413), the quota (507) and
   * is charged its length to the caller's byte budget (429), before any byte of it is read.
   */
  async assembled(caller: ByteCaller | undefined, length: number): Promise<BlobRoom> {
    if (!caller || !this.enabled) return {};
    const room = await this.room(caller.tenant, { declaredLength: length });
    this.charge(caller, length);
    return room;
  }
}
