// The tenant gate: the one place where a tenant's limits are applied, whatever the protocol (blob
// API, contract sessions, tus and its concatenation, document content, JSON bodies, and the S3
// listener next). It is applied by the engine's own operations (engine/ingests: a body for the
// blob namespace; engine/uploads: a session's creation, declared length, part, commit and
// concatenation; engine/documents: a document's bytes), which take the caller; route files only
// parse, call and answer, and hand the router the gate as its meter (requests, operation slots,
// body bytes of JSON requests and downloads). What it applies:
//
// - A declared length (Content-Length, Upload-Length, a part's end, a tus final's sum) is judged
//   before any byte is read: past the object limit (413), or past what the quota leaves once the
//   tenant's retained bytes and what its other open uploads reserve are counted (507).
// - An open upload's declared length reserves its room: the sessions' records say what each holds
//   (engine/store/upload-catalog.ts stagedOf), so every node of a cluster sees the same
//   reservations, and a commit, an abort or an expiry releases one by moving its record.
// - The byte budget (429) is charged a declared length up front, and a body without one (chunked)
//   as it streams: the ingest calls its meter with each chunk; once the budget is spent the
//   request is refused and its ingest aborted.
// - The request budget and the tenant's operation slots (concurrency), per request (RequestMeter).
//
// With security off, or for a tenant whose policy sets none of these, the gate does nothing and
// reads nothing (the 4 KiB upload path pays no catalog read, no await and no allocation).

import { blobQuotaExceeded, tenantObjectLimit, tenantQuotaExceeded } from '../base/errors.js';
import type { Budgets, Release } from './budgets.js';
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

/** What a publication of `size` bytes is given of a tenant's room: the quota its blobs may reach, and its refusal's words. */
export function publicationQuota(room: BlobRoom, size: number): { quotaBytes?: number; quotaExceeded?: (blobBytes: number) => Error } {
  if (room.quotaBytes === undefined) return {};
  return { quotaBytes: room.quotaBytes, quotaExceeded: blobQuotaExceeded(room.quotaBytes, room.documentBytes ?? 0, size, room.stagedBytes ?? 0) };
}

/** Charges a streamed body's bytes as they come (throws 429 rate_limited once the budget is spent). */
export type BodyMeter = (bytes: number) => void;

/**
 * What a router asks of the gate for every request of a caller (security on): its request budget,
 * one of its tenant's operation slots, and the body bytes the handler learns (JSON bodies, downloads).
 */
export interface RequestMeter {
  /** A request of `caller`, before the handler runs (429 when its budget is spent). */
  request(caller: ByteCaller, scope: ShareScope): void;
  /**
   * One of the tenant's operation slots: at once (a release), later (a promise of one, rejected
   * when the wait is too long or `signal`'s signal aborts: the client went away), or none needed (undefined).
   */
  admit(caller: ByteCaller, scope: ShareScope, signal: () => AbortSignal): Release | Promise<Release> | undefined;
  /** Body bytes to or from `caller`, as the handler learns them (429 when its budget is spent). */
  bytes(caller: ByteCaller, bytes: number, scope: ShareScope): void;
}

export class TenantGate implements RequestMeter {
  constructor(
    /** Security on: policies apply. */
    readonly enabled: boolean,
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

  /**
   * A part of a session (the contract's PATCH, tus's PATCH or creation with bytes, an S3
   * UploadPart) of `length` bytes ending at `end`: the object limit against its end and the byte
   * budget against its length, at once (thrown: 413, 429); then, for a tenant with a quota, a
   * promise that rejects (507) unless its end fits beside what the tenant's other open uploads
   * reserve (`session`'s own left out). Undefined when nothing is left to wait for.
   */
  part(caller: ByteCaller, session: string, end: number, length: number): Promise<unknown> | undefined {
    if (!this.enabled) return undefined;
    const { maxObjectBytes, quotaBytes } = this.policies.for(caller.tenant);
    if (maxObjectBytes !== undefined && end > maxObjectBytes) throw tenantObjectLimit(maxObjectBytes);
    this.charge(caller, length);
    return quotaBytes === undefined ? undefined : this.room(caller.tenant, { declaredLength: end, session });
  }

  /**
   * A document's bytes (PUT /v1/uploads/{id}/bytes): a declared length is charged to the byte
   * budget now (429) and judged against the object limit and the quota (413, 507) before any byte
   * is read; the meter, for a body without one, charges it as it streams (the documents' share).
   */
  async content(caller: ByteCaller, declaredLength: number | undefined): Promise<BodyMeter | undefined> {
    const meter = this.body(caller, declaredLength, 'documents');
    if (declaredLength !== undefined && this.enabled) await this.room(caller.tenant, { declaredLength });
    return meter;
  }

  request(caller: ByteCaller, scope: ShareScope): void {
    this.budgets.chargeRequest(caller.tenant, caller.subject, scope);
  }

  admit(caller: ByteCaller, scope: ShareScope, signal: () => AbortSignal): Release | Promise<Release> | undefined {
    return this.budgets.admit(caller.tenant, { scope, signal });
  }

  bytes(caller: ByteCaller, bytes: number, scope: ShareScope): void {
    this.charge(caller, bytes, scope);
  }
}
