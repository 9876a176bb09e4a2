// The s3 backend has no shared store for the document platform: its records stay in one node's
// LMDB (its data directory). So that a cluster never splits them, one node at a time serves /v1:
// the holder of `<prefix>documents-node`, a lease in the bucket (docs/backends.md, "s3").
//
// - Taken with `If-None-Match: *` where there is none; renewed by its holder every 5 s or a third
//   of SVC_DOCUMENTS_LEASE_TTL with `If-Match` of the ETag it wrote last, so a holder whose claim
//   was taken over learns it at its next renewal (412) and stops serving.
// - The holder serves only while its last renewal was *sent* less than the TTL ago (this
//   process's monotonic clock): a process paused past the TTL (SIGSTOP, a long GC pause) answers
//   503 from its first request after, before it hears of any take-over.
// - Another node takes the claim over once it has not been renewed for the TTL, judged by the
//   bucket's clock: the GET's Date minus the claim's Last-Modified (whole seconds both, so one
//   more second is waited). Last-Modified is after the renewal was sent, so by then the holder has
//   stopped serving by its own clock.
// - A holder stopped cleanly writes `stoppedAt`: that claim never lapses (its documents are in its
//   data directory; the platform waits for it) until it starts again or an operator hands it on
//   (engine/ops/documents-release.ts). A node started again under its id takes its own claim back.
// - On a server that ignores conditions there is one node (s3-only.ts admits no second), so the
//   writes are plain PUTs.
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../base/log.js';
import { type DocumentsClaim, type DocumentsClaimRead, type DocumentsElsewhere, claimRenewalMs } from '../documents-claim.js';
import type { S3OnlyKeys } from './keys.js';
import type { ObjectIo } from './objects.js';

interface ClaimV2 {
  v: 2;
  nodeId: string;
  /** The holder's process (a node started again is another boot). */
  boot: string;
  /** When this node took it (its clock; for people). */
  since: string;
  /** Its last renewal (its clock; for people: expiry is the bucket's Last-Modified). */
  renewedAt: string;
  /** Stopped cleanly (its clock): the claim waits for it. */
  stoppedAt?: string;
}

/** The claim of versions before the lease: held for good. */
interface ClaimV1 {
  v: 1;
  nodeId: string;
  since: string;
}

/** Last-Modified and Date are whole seconds: a lapse is judged one second late. */
const CLOCK_GRAIN_MS = 1000;

interface Deps {
  io: ObjectIo;
  keys: S3OnlyKeys;
  nodeId: string;
  boot: string;
  leaseMs: number;
  /** Whether a node's heartbeat is live (a claim of the version before leases lapses only when its node is down). */
  nodeLive: (nodeId: string) => Promise<boolean>;
  log?: Logger;
}

export class S3DocumentsClaim implements DocumentsClaim {
  /** The ETag of the claim this node wrote last while it holds it. */
  private etag?: string;
  private since = '';
  /** performance.now() until which this node serves (its last renewal's send time + the TTL). */
  private validUntil = 0;
  private other?: { nodeId: string; stoppedAt?: number };
  private timer?: NodeJS.Timeout;
  /** One step at a time: a renewal, a look at the claim, a take-over. */
  private chain: Promise<unknown> = Promise.resolve();
  private ticking = false;
  private renewFailing = false;

  constructor(private readonly deps: Deps) {}

  /** Takes the claim when it is free (the first node of a cluster), then renews or watches it. */
  async start(): Promise<void> {
    await this.tick();
    this.timer = setInterval(() => {
      if (this.ticking) return;
      this.tick().catch((err) => this.deps.log?.warn('documents: reading or renewing the claim failed (the next heartbeat retries)', { err: String(err) }));
    }, claimRenewalMs(this.deps.leaseMs));
    this.timer.unref();
  }

  /** A clean stop: the claim stays this node's, marked stopped, so no node takes it over. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.serial(async () => {
      if (this.etag === undefined) return;
      await this.write({ ifMatch: this.etag }, new Date().toISOString());
      this.etag = undefined;
      this.validUntil = 0;
    }).catch(() => {});
  }

  serving(): boolean {
    return this.etag !== undefined && performance.now() < this.validUntil;
  }

  elsewhere(): DocumentsElsewhere {
    if (this.etag !== undefined) return { kind: 'lapsed' };
    return this.other ? { kind: 'held', ...this.other } : { kind: 'unknown' };
  }

  holderId(): string | undefined {
    return this.etag !== undefined ? this.deps.nodeId : this.other?.nodeId;
  }

  async read(): Promise<DocumentsClaimRead | undefined> {
    const { object, serverNowMs } = await this.deps.io.getWithClock(this.deps.keys.documentsNode());
    if (!object) return undefined;
    const claim = JSON.parse(object.body.toString('utf8')) as ClaimV1 | ClaimV2;
    const stoppedAt = claim.v === 2 && claim.stoppedAt !== undefined ? Date.parse(claim.stoppedAt) : undefined;
    let lapsed = stoppedAt === undefined && serverNowMs - object.lastModifiedMs > this.deps.leaseMs + CLOCK_GRAIN_MS;
    // A node of the version before leases never renews: its claim lapses only once it is down.
    if (lapsed && claim.v === 1) lapsed = !(await this.deps.nodeLive(claim.nodeId));
    return { nodeId: claim.nodeId, ...(claim.v === 2 ? { boot: claim.boot } : {}), ...(stoppedAt === undefined ? {} : { stoppedAt }), lapsed, version: object.etag };
  }

  takeFrom(read: DocumentsClaimRead | undefined): Promise<boolean> {
    return this.serial(() => this.take(read));
  }

  /** One heartbeat's step: the holder renews; another node looks and takes a claim that is free or lapsed. */
  private async tick(): Promise<void> {
    this.ticking = true;
    try {
      await this.serial(() => (this.etag !== undefined ? this.renew() : this.watch()));
    } finally {
      this.ticking = false;
    }
  }

  private async renew(): Promise<void> {
    const sentAt = performance.now();
    let written: { etag: string } | 'refused';
    try {
      written = await this.write({ ifMatch: this.etag! });
    } catch (err) {
      if (!this.renewFailing) this.deps.log?.warn('documents: renewing this node\'s claim failed; it stops serving /v1 once the lease lapses', { err: String(err) });
      this.renewFailing = true;
      return;
    }
    this.renewFailing = false;
    if (written !== 'refused') {
      this.etag = written.etag;
      this.validUntil = sentAt + this.deps.leaseMs;
      return;
    }
    const now = await this.read().catch(() => undefined);
    // This process's own claim all the same (a renewal whose answer was lost landed): renewed from it.
    if (now?.nodeId === this.deps.nodeId && now.boot === this.deps.boot && (await this.take(now))) return;
    // Another node took the claim (this one's lapsed, or an operator handed it on).
    this.etag = undefined;
    this.validUntil = 0;
    this.other = now ? { nodeId: now.nodeId, ...(now.stoppedAt === undefined ? {} : { stoppedAt: now.stoppedAt }) } : undefined;
    this.deps.log?.error('documents: this node\'s claim to the document platform was taken over; it no longer serves /v1', { holder: now?.nodeId });
  }

  private async watch(): Promise<void> {
    const claim = await this.read();
    if (claim && claim.nodeId !== this.deps.nodeId && !claim.lapsed) {
      this.other = { nodeId: claim.nodeId, ...(claim.stoppedAt === undefined ? {} : { stoppedAt: claim.stoppedAt }) };
      return;
    }
    // Free, lapsed, or this node's own (an earlier boot's, or stopped cleanly): taken.
    if (await this.take(claim)) {
      if (claim && claim.nodeId !== this.deps.nodeId) this.deps.log?.warn('documents: took over the document platform from a node whose claim lapsed; its documents stay in its data directory', { previous: claim.nodeId });
    }
  }

  private async take(read: DocumentsClaimRead | undefined): Promise<boolean> {
    const sentAt = performance.now();
    this.since = new Date().toISOString();
    const written = await this.write(read ? { ifMatch: read.version } : { ifNoneMatch: true });
    if (written === 'refused') return false;
    this.etag = written.etag;
    this.validUntil = sentAt + this.deps.leaseMs;
    this.other = undefined;
    return true;
  }

  private write(condition: { ifMatch: string } | { ifNoneMatch: true }, stoppedAt?: string) {
    const { nodeId, boot } = this.deps;
    const claim: ClaimV2 = { v: 2, nodeId, boot, since: this.since, renewedAt: new Date().toISOString(), ...(stoppedAt ? { stoppedAt } : {}) };
    return this.deps.io.put(this.deps.keys.documentsNode(), Buffer.from(JSON.stringify(claim)), condition);
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => {});
    return next;
  }
}
