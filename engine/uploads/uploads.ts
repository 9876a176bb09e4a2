// Resumable upload sessions: create, parts, status, commit, cancel, expiry and cleanup.
//
// Parts are cut and hashed as they arrive (docs/architecture.md, "Resumable uploads"): a part
// runs through the direct-upload pipeline continuing its object, so its blocks are stored, the
// object's SHA-256 (kept on the scanning thread between parts) advances, and the bytes after the
// last stored block are staged as the session's tail. A part of a segment or more is answered
// before its pipeline drains: its tail is then what the pipeline has not stored yet, and the
// ingest goes on with the session's next part (a "live" ingest) or, if none comes soon, drains
// and closes. A commit cuts the tail, takes the digest and publishes: its cost does not grow
// with the object. Above 400 lines: leases and staged tails are one session's state, changed by
// every step here (the part protocol itself is ./part-ingest.ts, live ingests ./live-parts.ts).

import { randomUUID } from 'node:crypto';
import { type Clock, systemClock } from '../base/clock.js';
import type { BlockRoots } from '../cas/index.js';
import { chunkerName } from '../cas/index.js';
import { formatContentId } from '../cas/index.js';
import type { PartIngest, PartOptions, PartResult } from './part-ingest.js';
import { type BlobCatalog, type BlockStore, type CommittedSession, type CommittingSession, type LeasedSession, type Manifest, type OpenSession, type PartLeasedSession, type SessionRecord, type StoredBlock, type TailStaging, type UploadCatalog, packBlocks } from '../store/index.js';
import type { StreamScanner } from '../cas/index.js';
import type { UploadConfig } from '../base/config.js';
import {
  SvcError, ingestFailed, invalidBlob, invalidUpload, uploadBusy, uploadExists, uploadExpired, uploadNotFound, uploadOffsetMismatch, uploadState,
} from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { Stats } from '../ops/index.js';
import { type BlobRoom, type ByteCaller, type TenantGate, publicationQuota } from '../tenancy/index.js';
import { type ConcatenationRequest, concatenate } from './concatenation.js';

import type { BufferPool } from './buffer-pool.js';
import { KeptHashes } from './kept-hashes.js';
import type { AdmittedPart, CreateRequest, PartRequest, PartUpload } from './requests.js';
import { LiveParts, type StoredOfTail } from './live-parts.js';
import { type SessionEvent, moveSession } from './session-machine.js';

interface UploadsDeps {
  config: UploadConfig;
  ledger: UploadCatalog;
  staging: TailStaging;
  /** This node's id: leases name it, so a node tells its own earlier process's leases (dead) from another node's. */
  nodeId?: string;
  /**
   * A shared catalog: which nodes are alive now (their heartbeats), so that a lease held by a
   * node that died is not waited for until it expires.
   */
  liveNodes?: () => Promise<ReadonlySet<string>>;
  /** The time leases and expiry are judged by (the database's on pg-s3); default the system clock. */
  clock?: Clock;
  blocks: BlockStore;
  scanner: StreamScanner;
  manifests: BlobCatalog;
  /** A published blob's bytes, in order (tus concatenation hashes its partial uploads' blobs). */
  readBlob: (manifest: Manifest) => AsyncIterable<Buffer>;
  stats: Stats;
  log: Logger;
  startPart: (options: PartOptions) => PartIngest;
  /** Buffers for the staged tail a part replays and the one it leaves. */
  tailBuffers: BufferPool;
  /** Throws (507) while the data directory is below its free-space floor: no part starts then. */
  assertRoom?: () => void;
  /** Security on: a committed blob is its session's tenant's, and counts only its own blocks as duplicates. */
  tenantBlobs?: boolean;
  /** Called before a part's blocks are recorded in a ledger of this node's own (Collector.holdRoots). */
  holdRoots?: () => Promise<void>;
  /**
   * The tenant's limits (engine/tenancy/tenant-gate.ts), applied here to every session's bytes
   * whatever the protocol: a declared length reserves its room, a part is judged by its end and
   * charged its length, a commit or a concatenation publishes within the room the quota leaves.
   */
  gate: TenantGate;
}

/**
 * The staged file a part writes its tail to: of two names, the one the session's record does not
 * name (a crash while it is written leaves the acknowledged tail intact).
 */
function otherTail(current: string | undefined): string {
  return current === 'tail-a' ? 'tail-b' : 'tail-a';
}

/** A continued part replays nothing. */
const NO_REPLAY = Buffer.alloc(0);
/** Thrown out of a cleanup's update to leave a session that moved on since it was listed (moveListed). */
const MOVED_ON = Symbol('moved on');
/** Terminal sessions are kept this long past their expiry, then forgotten. */
const TOMBSTONE_MS = 24 * 60 * 60 * 1000;
export class Uploads {
  /** Leases taken by this process: `<node id>/<process uuid>`; an earlier process's are dead. */
  readonly owner: string;
  private readonly nodePrefix: string;
  private cleanupTimer?: NodeJS.Timeout;
  /** Ingests of acknowledged parts kept for their session's next part, and what closed ones stored (./live-parts.ts). */
  private readonly live: LiveParts;
  /** The object's hash kept on this node's scanning thread between parts, rebuilt when missing (./kept-hashes.ts). */
  private readonly hashes: KeptHashes;
  private readonly clock: Clock;

  constructor(private readonly deps: UploadsDeps) {
    this.clock = deps.clock ?? systemClock;
    this.nodePrefix = `${deps.nodeId ?? ''}/`;
    this.owner = this.nodePrefix + randomUUID();
    this.live = new LiveParts(deps.log);
    this.hashes = new KeptHashes(deps);
  }

  /**
   * A new session. With `caller` (security on), a declared length past the tenant's object limit
   * (413) or the room its quota leaves beside its other open uploads (507) is refused now; else
   * its room is reserved until the session is committed, cancelled or expires.
   */
  async create(request: CreateRequest, caller?: ByteCaller): Promise<OpenSession> {
    if (caller && request.declaredLength !== undefined) await this.deps.gate.reserve(caller.tenant, request.declaredLength);
    const record = moveSession(undefined, { type: 'create', ...request, now: this.clock.now(), ttlMs: this.deps.config.ttlMs });
    return this.deps.ledger.update(request.id, (current) => {
      if (current) throw uploadExists(request.id);
      return record;
    });
  }

  /** What the tenant's open sessions hold in its quota (their declared lengths, else what they received), `except` left out. */
  stagedBytes(tenant: string, except?: string): Promise<number> {
    return this.deps.ledger.stagedBytes(tenant, this.clock.now(), except);
  }

  /** The session as its tenant sees it; an expired open session is 410. */
  async status(tenant: string, id: string): Promise<SessionRecord> {
    const record = await this.deps.ledger.get(id);
    if (!record || record.tenant !== tenant) throw uploadNotFound(id);
    if (record.state === 'Expired' || (record.state === 'Open' && this.clock.now() >= record.expiresAt)) throw uploadExpired(id);
    return record;
  }

  /**
   * A part through the tenant gate, before its body is read: with `caller` (security on), the
   * object limit against the part's end and the byte budget against its length are applied at
   * once (thrown), then, for a tenant with a quota, the room its end needs (a promise, 507).
   * Without a caller, or nothing to wait for, the request itself: no await, no allocation.
   */
  admitPart(request: PartRequest, caller?: ByteCaller): AdmittedPart | Promise<AdmittedPart> {
    const admitted = request as AdmittedPart;
    if (!caller) return admitted;
    const room = this.deps.gate.part(caller, request.id, request.offset + request.length, request.length);
    return room ? room.then(() => admitted) : admitted;
  }

  /**
   * Starts a part (its body held meanwhile) that the gate admitted: the answer for a part id
   * already applied, else a lease on the session and an ingest continuing its object.
   */
  async beginPart(request: AdmittedPart): Promise<{ replayed: OpenSession } | { part: PartUpload }> {
    const { config, ledger } = this.deps;
    const current = await this.status(request.tenant, request.id);
    const alive = await this.aliveNodes();
    if (current.state !== 'Open') this.refuse(current, 'add a part', alive);
    if (await ledger.hasPart(request.id, request.partId)) return { replayed: current };
    // An Open session's lease is a part's (a commit's makes it Committing).
    if (this.liveLease(current, alive)) throw uploadBusy('part upload');
    if (request.offset !== current.offset) throw uploadOffsetMismatch(current.offset);
    const maxPart = request.maxPartBytes ?? config.maxPartBytes;
    if (request.length < 1 || request.length > maxPart) throw invalidUpload(`A part must carry 1 to ${maxPart} bytes${request.maxPartBytes === undefined ? ' (SVC_UPLOAD_MAX_PART_BYTES)' : ''}`);
    if (current.partCount >= config.maxParts) throw invalidUpload(`The session already has ${config.maxParts} parts (SVC_UPLOAD_MAX_PARTS)`);
    if (current.declaredLength !== undefined && current.offset + request.length > current.declaredLength) {
      throw invalidUpload(`The part would take the object past its Upload-Length of ${current.declaredLength} bytes`);
    }
    this.deps.assertRoom?.();
    const leased = await this.takeLease(current, 'part', request.offset, alive);
    const { tailBuffers } = this.deps;
    const continued = this.live.continue(leased, request.length);
    const stored = continued ? undefined : this.live.storedOfTail(leased);
    let replay: Buffer = NO_REPLAY;
    if (!continued) {
      try {
        replay = await this.readStagedTail(leased);
      } catch (err) {
        await this.releaseLease(leased).catch(() => {});
        throw err;
      }
    }
    const ingest =
      continued ??
      this.deps.startPart({
        alwaysWrite: this.deps.tenantBlobs,
        declaredLength: request.length,
        contentType: leased.contentType,
        part: { hashKey: leased.id, replay: replay.subarray(stored?.bytes ?? 0), decided: leased.decided, maxBytes: maxPart, tailBuffers },
      });
    // The ingest copies the replayed tail when it is admitted: the buffer is free once the part ends.
    const giveReplay = () => tailBuffers.give(replay);
    let settled = false;
    // A part that takes long keeps its lease alive; only a dead process or client loses it.
    const renewal = setInterval(() => void this.renewLease(leased).catch(() => {}), Math.max(1000, config.partLeaseMs / 3));
    renewal.unref();
    /** Gives the session back as it was; resolves once the lease is released (a retry then finds it free). */
    const release = async (): Promise<void> => {
      clearInterval(renewal);
      if (settled) return;
      settled = true;
      const hashed = ingest.scanStarted;
      ingest.abort();
      giveReplay();
      // The kept hash may have taken some of this part's bytes: it is rebuilt on the next part.
      // A part that never got that far leaves it (a rebuild it waited for is not wasted).
      if (hashed) this.hashes.drop(leased.id);
      await this.releaseLease(leased).catch((err: unknown) => this.deps.log.warn('uploads: lease not released', { session: leased.id, err: String(err) }));
    };
    const abort = () => void release();
    const finish = async (): Promise<OpenSession> => {
      // A part that may be continued is answered before its pipeline drains (ackPart).
      const early = ingest.continuable;
      let result: PartResult;
      try {
        result = await (early ? ingest.ackPart() : ingest.endPart());
      } catch (err) {
        await release();
        throw err;
      } finally {
        giveReplay();
      }
      let record: OpenSession;
      try {
        record = await this.recordPart(leased, request, stored ? [...stored.blocks, ...result.blocks] : result.blocks, result);
      } catch (err) {
        await release();
        throw err;
      } finally {
        settled = true;
        clearInterval(renewal);
        result.free();
      }
      // The kept hash covers the part once its bytes are scanned: the next part here continues it.
      this.hashes.keptAt(leased.id, record.offset);
      if (early) this.live.keep(leased.id, ingest, record.offset);
      return record;
    };
    return { part: { ingest, ready: continued ? Promise.resolve() : this.hashes.ensure(leased), finish, abort, release } };
  }

  /**
   * Publishes the object; a committed session answers with the same blob again. With `caller`
   * (security on), within the room the tenant's quota leaves beside its other open uploads (this
   * one's reservation becomes the blob).
   */
  async commit(tenant: string, id: string, caller?: ByteCaller): Promise<CommittedSession> {
    const quota: BlobRoom = caller ? await this.deps.gate.room(caller.tenant, { session: id }) : {};
    const current = await this.status(tenant, id);
    if (current.state === 'Committed') return current;
    const alive = await this.aliveNodes();
    if (current.state !== 'Open') this.refuse(current, 'commit', alive);
    if (this.liveLease(current, alive)) throw uploadBusy('part upload');
    if (current.offset === 0) throw invalidBlob('Empty blobs are not supported');
    if (current.declaredLength !== undefined && current.offset !== current.declaredLength) {
      throw invalidUpload(`${current.offset} bytes staged but Upload-Length declared ${current.declaredLength}`);
    }
    const leased = await this.takeLease(current, 'commit', current.offset, alive);
    // A live ingest drained: its blocks since the last answer and the rest as the tail to cut
    // (rather than cutting the larger staged tail again).
    let drained: PartResult | undefined;
    let result: PartResult | undefined;
    try {
      drained = await this.live.take(id);
      const stored = drained ? undefined : this.live.storedOfTail(leased);
      await this.hashes.ensure(leased);
      result = await this.cutTail(leased, drained, stored);
      const hex = await this.deps.scanner.keptDigest(id);
      const blocks = [...(await this.deps.ledger.blocks(id)), ...((drained ?? stored)?.blocks ?? []), ...result.blocks];
      const blobId = formatContentId(hex, leased.offset);
      await this.deps.ledger.update(id, (r) => moveSession(r, { type: 'publishing', blob: blobId }));
      const publication = this.deps.tenantBlobs ? { tenant: leased.tenant, tenantBlocks: true, ...publicationQuota(quota, leased.offset) } : {};
      const { manifest, existed, newToTenant } = await this.deps.manifests.publish(hex, leased.offset, result.decided!.mediaType, chunkerName(result.decided!.spec), blocks, undefined, publication);
      this.deps.stats.recordPublication(newToTenant ? blocks.map((b, i) => ({ size: b.size, fresh: newToTenant[i]! })) : blocks, existed);
      const committed = await this.deps.ledger.update(id, (r) => moveSession(r, { type: 'published', blob: manifest.id }));
      await this.forgetStaged(id);
      return committed;
    } catch (err) {
      this.hashes.drop(id);
      // Back to Open, unless the session moved on without this commit (its lease lost, then
      // recovered, taken or committed elsewhere): that is not this commit's to undo.
      await this.releaseLease(leased);
      if (err instanceof SvcError) throw err;
      this.deps.log.error('uploads: commit failed', { session: id, err: String((err as Error)?.stack ?? err) });
      throw ingestFailed('The upload could not be committed');
    } finally {
      drained?.free();
      result?.free();
    }
  }

  /**
   * Declares the length of a session created without one (tus creation-defer-length). The same
   * length again is a no-op; another, or one below the bytes already acknowledged, is 400.
   * With `caller`, the length reserves its room first (413, 507), as at creation.
   */
  async declareLength(tenant: string, id: string, length: number, caller?: ByteCaller): Promise<SessionRecord> {
    // With `caller`, the length reserves its room when it is declared: 413 or 507 now, as at creation.
    if (caller) await this.deps.gate.reserve(caller.tenant, length, id);
    const current = await this.status(tenant, id);
    if (current.declaredLength === length) return current;
    if (current.declaredLength !== undefined) throw invalidUpload(`The upload's length is already ${current.declaredLength}`);
    if (length < current.offset) throw invalidUpload(`Upload-Length ${length} is below the ${current.offset} bytes already received`);
    if (current.state !== 'Open') this.refuse(current, 'declare its length', await this.aliveNodes());
    return this.deps.ledger.update(id, (r) => (r?.declaredLength === length ? r : moveSession(r, { type: 'declare', length })));
  }

  /**
   * A tus final upload: the tenant's finished partial uploads, in order, as one blob of their
   * blocks (./concatenation.ts); with `caller`, within the tenant's limits (TenantGate.assembled).
   */
  concatenate(request: ConcatenationRequest, caller?: ByteCaller): Promise<CommittedSession> {
    return concatenate({ ...this.deps, clock: this.clock, status: (tenant, id) => this.status(tenant, id) }, request, caller);
  }

  /**
   * A session whose every declared byte is in is committed (tus: an upload completes when its
   * offset reaches its length; with `caller`, within the tenant's room as `commit`); else the
   * record as it is.
   */
  async commitIfWhole(record: SessionRecord, caller?: ByteCaller): Promise<SessionRecord> {
    if (record.state === 'Committed' || record.declaredLength === undefined || record.offset !== record.declaredLength) return record;
    return this.commit(record.tenant, record.id, caller);
  }

  /** Cancels an open session and removes what it staged. Cancelling again is a no-op. */
  async cancel(tenant: string, id: string): Promise<void> {
    const current = await this.status(tenant, id);
    if (current.state === 'Cancelled') return;
    const alive = await this.aliveNodes();
    if (current.state !== 'Open') this.refuse(current, 'cancel', alive);
    if (this.liveLease(current, alive)) throw uploadBusy('part upload');
    await this.deps.ledger.update(id, (r) => {
      if (!r || r.state !== 'Open' || this.liveLease(r, alive)) throw uploadBusy('request');
      return moveSession(r, { type: 'cancel' });
    });
    this.live.discard(id);
    await this.forgetStaged(id);
  }

  /**
   * Expires open sessions past their lifetime, settles commits a crash interrupted (published:
   * Committed; not: Open again), removes staged files nobody refers to, and forgets terminal
   * sessions a day past their expiry. Runs at start and every SVC_UPLOAD_CLEANUP_INTERVAL.
   */
  async cleanup(now = this.clock.now()): Promise<{ expired: number; recovered: number; removed: number }> {
    const { ledger, staging, manifests } = this.deps;
    let expired = 0;
    let recovered = 0;
    let removed = 0;
    const alive = await this.aliveNodes();
    for await (const record of ledger.all()) {
      const leaseDead = !this.liveLease(record, alive, now);
      if (record.state === 'Open' && now >= record.expiresAt && leaseDead) {
        if (!(await this.moveListed(record, { type: 'expire' }))) continue;
        this.live.discard(record.id);
        await this.forgetStaged(record.id);
        expired++;
      } else if (record.state === 'Committing' && leaseDead) {
        const published = record.pendingBlob !== undefined && (await manifests.get(record.pendingBlob, this.deps.tenantBlobs ? record.tenant : undefined)) !== undefined;
        if (!(await this.moveListed(record, { type: 'recover', blob: published ? record.pendingBlob : undefined }))) continue;
        if (published) await this.forgetStaged(record.id);
        recovered++;
      } else if (record.state === 'Open') {
        // A crash after a tail was written but before its part was recorded leaves a stray file.
        if (leaseDead) await staging.prune(record.id, record.tail);
      } else if (now >= record.expiresAt + TOMBSTONE_MS) {
        await this.forgetStaged(record.id);
        await ledger.remove(record.id);
        removed++;
      } else {
        await staging.remove(record.id);
      }
    }
    // Staged files of sessions that are gone (a crash between the record's removal and theirs).
    // Listed first, then looked up one by one: a session's files are staged only after its record exists.
    for (const id of await staging.sessions()) if (!(await ledger.get(id))) await staging.remove(id);
    return { expired, recovered, removed };
  }

  /**
   * Moves a session the cleanup listed, unless it has moved on since (another node's cleanup, a
   * commit that ended meanwhile): then it is left as it is, for the next run to look at again.
   */
  private async moveListed(listed: SessionRecord, event: SessionEvent): Promise<boolean> {
    try {
      await this.deps.ledger.update(listed.id, (r) => {
        if (r?.state !== listed.state || r.lease?.token !== listed.lease?.token) throw MOVED_ON;
        return moveSession(r, event);
      });
      return true;
    } catch (err) {
      if (err === MOVED_ON) return false;
      throw err;
    }
  }

  /** Blocks of open sessions, recorded or stored of their staged tails: garbage collection keeps them. */
  blockRoots(): BlockRoots {
    const { ledger } = this.deps;
    const live = this.live;
    return {
      name: 'upload sessions',
      // Sessions in this node's LMDB outlive it; the stored blocks of staged tails are memory only.
      persistent: ledger.liveBlockDigests !== undefined,
      *digests() {
        // A shared catalog's sessions are marked by its collector in the catalog itself.
        if (ledger.liveBlockDigests) yield* ledger.liveBlockDigests();
        yield* live.storedDigests();
      },
    };
  }

  /**
   * A cleanup now, then every SVC_UPLOAD_CLEANUP_INTERVAL. Shared sessions (pg-s3, s3) are any
   * node's to clean up: the backend's open refused a store it cannot reach, and one that stops
   * answering after that does not stop the start (readiness says so; the next interval tries again).
   */
  async start(): Promise<void> {
    const cleaned = await this.cleanup().catch((err: unknown) => {
      if (!this.deps.ledger.shared) throw err;
      this.deps.log.warn('uploads: cleanup at start failed; the next interval tries again', { err: String(err) });
      return { expired: 0, recovered: 0, removed: 0 };
    });
    if (cleaned.expired || cleaned.recovered || cleaned.removed) this.deps.log.info('uploads: cleanup at start', cleaned);
    const run = () =>
      this.cleanup().then(
        (r) => (r.expired || r.recovered || r.removed) && this.deps.log.info('uploads: cleanup', r),
        (err) => this.deps.log.error('uploads: cleanup failed', { err: String(err) }),
      );
    this.cleanupTimer = setInterval(run, this.deps.config.cleanupIntervalMs);
    this.cleanupTimer.unref();
  }

  /**
   * Lets the session's live ingest drain and close, if it has one (its kept hash then covers the
   * acknowledged bytes, and the next part starts from the staged tail).
   */
  closeLive(id: string): Promise<void> {
    return this.live.close(id);
  }

  stop(): void {
    clearInterval(this.cleanupTimer);
    this.live.discardAll();
  }

  private refuse(record: SessionRecord, action: string, alive: ReadonlySet<string> | undefined): never {
    if (record.state === 'Committing' && this.liveLease(record, alive)) throw uploadBusy('commit');
    throw uploadState(record.state, action);
  }

  /**
   * Whether the session's lease holds: this process's until it expires; with a shared catalog
   * also another node's, while that node is alive (`alive`: the nodes seen within their TTL).
   * A lease of an earlier process of this node is dead, as every lease is on an embedded catalog.
   */
  private liveLease(record: SessionRecord, alive: ReadonlySet<string> | undefined, now = this.clock.now()): boolean {
    const lease = record.lease;
    if (lease === undefined || lease.until <= now) return false;
    if (lease.owner === this.owner) return true;
    if (!this.deps.ledger.shared || lease.owner.startsWith(this.nodePrefix)) return false;
    const node = lease.owner.slice(0, lease.owner.lastIndexOf('/'));
    return alive === undefined || alive.has(node);
  }

  /** The nodes alive now, for a shared catalog's leases; undefined when the catalog is not shared. */
  private async aliveNodes(): Promise<ReadonlySet<string> | undefined> {
    if (!this.deps.ledger.shared || !this.deps.liveNodes) return undefined;
    return this.deps.liveNodes();
  }

  /** Takes the lease in one transaction (synchronous where the catalog can), checking again against the current record. */
  private takeLease(seen: OpenSession, kind: 'part', offset: number, alive: ReadonlySet<string> | undefined): Promise<PartLeasedSession>;
  private takeLease(seen: OpenSession, kind: 'commit', offset: number, alive: ReadonlySet<string> | undefined): Promise<CommittingSession>;
  private async takeLease(seen: OpenSession, kind: 'part' | 'commit', offset: number, alive: ReadonlySet<string> | undefined): Promise<LeasedSession> {
    const until = this.clock.now() + (kind === 'part' ? this.deps.config.partLeaseMs : this.deps.config.commitLeaseMs);
    const { ledger } = this.deps;
    return (ledger.updateSync ? ledger.updateSync.bind(ledger) : ledger.update.bind(ledger))(seen.id, (r) => {
      if (!r || r.state !== 'Open') throw uploadState(r?.state ?? 'gone', kind === 'part' ? 'add a part' : 'commit');
      if (this.liveLease(r, alive)) throw uploadBusy('part upload');
      if (r.offset !== offset) throw uploadOffsetMismatch(r.offset);
      return moveSession(r, { type: 'take', lease: { kind, owner: this.owner, token: randomUUID(), until } });
    });
  }

  private async renewLease(leased: PartLeasedSession): Promise<void> {
    const until = this.clock.now() + this.deps.config.partLeaseMs;
    await this.deps.ledger.update(leased.id, (r) => {
      if (!r || r.lease?.token !== leased.lease.token) throw uploadBusy('part upload');
      return moveSession(r, { type: 'renew', until });
    });
  }

  /** Gives the lease back, if it is still this one. */
  private async releaseLease(leased: LeasedSession): Promise<void> {
    await this.deps.ledger.update(leased.id, (r) => {
      if (!r) throw uploadNotFound(leased.id);
      return r.lease?.token === leased.lease.token ? moveSession(r, { type: 'release' }) : r;
    });
  }

  /** Stages the part's tail and records `blocks` (the part's, after any a closed ingest stored) with the new offset. */
  private async recordPart(leased: PartLeasedSession, request: PartRequest, blocks: StoredBlock[], result: PartResult): Promise<OpenSession> {
    const { ledger, staging } = this.deps;
    const index = leased.partCount;
    // Shared sessions: a name of the lease's own, so a part whose lease was taken over (its node
    // was thought dead) can never write over the tail its successor recorded.
    const tail = result.tailBytes > 0 ? (ledger.shared ? `tail-${leased.lease.token}` : otherTail(leased.tail)) : undefined;
    if (tail) await staging.overwrite(leased.id, tail, result.tail);
    // A ledger in this node's data directory is a root only this node can mark.
    if (!ledger.shared) await this.deps.holdRoots?.();
    const next = moveSession(leased, { type: 'part', length: request.length, tailBytes: result.tailBytes, tail, decided: result.decided });
    await ledger.addPart(next, index, { partId: request.partId, offset: leased.offset, length: request.length, blocks: packBlocks(blocks) }, (current) => {
      // Only the holder of this very lease may move the offset.
      if (current?.lease?.token !== leased.lease.token || current.offset !== leased.offset) throw uploadBusy('part upload');
    });
    // What a closed ingest stored of the tail is in the record now.
    this.live.forgetStored(leased.id);
    // The previous tail stays for the next part to write over. It goes when this part left no
    // tail (rare: a cut at its very end), when names are the leases' own (shared sessions) or of
    // an earlier layout (one new file per part); before the answer, since the next part may write
    // a file of the same name.
    if (leased.tail && (!tail || otherTail(tail) !== leased.tail)) {
      await staging.removeFile(leased.id, leased.tail).catch((err: unknown) => this.deps.log.warn('uploads: staged tail not removed', { session: leased.id, err: String(err) }));
    }
    return next;
  }

  /** The session's staged tail, read into a pooled buffer (the caller gives it back) and checked against its record. */
  private async readStagedTail(record: SessionRecord): Promise<Buffer> {
    let tail: Buffer;
    let lent: Buffer | undefined;
    try {
      tail = await this.deps.staging.read(record.id, record.tail, (size) => (lent = this.deps.tailBuffers.take(size)));
    } catch (err) {
      if (lent) this.deps.tailBuffers.give(lent);
      this.deps.log.error('uploads: staged tail unreadable', { session: record.id, err: String(err) });
      throw ingestFailed('The staged bytes of this session could not be read');
    }
    try {
      this.checkTail(record, tail);
    } catch (err) {
      this.deps.tailBuffers.give(tail);
      throw err;
    }
    return tail;
  }

  /** A staged tail must hold exactly the bytes its record says (a damaged one would make a wrong object). */
  private checkTail(record: SessionRecord, tail: Uint8Array): void {
    const recorded = record.offset - record.tailStart;
    if (tail.length === recorded) return;
    this.deps.log.error('uploads: staged tail does not match its record', { session: record.id, bytes: tail.length, recorded });
    throw ingestFailed('The staged bytes of this session do not match its record');
  }

  /**
   * Cuts the tail (a drained live ingest's, else the staged one after what a closed ingest
   * stored of it) to the object's end and stores its blocks.
   */
  private async cutTail(leased: CommittingSession, drained?: PartResult, stored?: StoredOfTail): Promise<PartResult> {
    let replay: Uint8Array;
    if (drained) replay = drained.tail.length === 1 ? drained.tail[0] : Buffer.concat(drained.tail);
    else {
      const staged = await this.deps.staging.read(leased.id, leased.tail);
      this.checkTail(leased, staged);
      replay = staged.subarray(stored?.bytes ?? 0);
    }
    const ingest = this.deps.startPart({
        alwaysWrite: this.deps.tenantBlobs,
      contentType: leased.contentType,
      part: { hashKey: leased.id, replay, decided: leased.decided, maxBytes: this.deps.config.maxPartBytes, final: true },
    });
    const admitted = new Promise<void>((resolve) => ingest.admit(resolve));
    await admitted;
    return ingest.endPart();
  }

  /**
   * The object's hash must cover every acknowledged byte before a part continues it. It lives on
   * the scanning thread; after a restart (or a failed part) it is rebuilt from the stored blocks
   * and the staged tail: the one case whose cost grows with the object.
   */
  private async forgetStaged(id: string): Promise<void> {
    this.hashes.drop(id);
    this.live.forgetStored(id);
    await this.deps.staging.remove(id);
    await this.deps.ledger.dropParts(id);
  }
}

/** A publication's quota options: the room, and the refusal that tells the tenant's whole numbers. */
