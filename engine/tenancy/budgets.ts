// Budgets of tenants and principals: token buckets of requests and body bytes per principal
// (`sub`), and the operations a tenant has in flight with a bounded queue behind them. Every
// refusal says when to come back (Retry-After, seconds). A policy's figures are the cluster's:
// on several nodes each node enforces its share (./cluster-share.ts), so the nodes together
// never exceed them, and no request waits for another node.

import { SvcError } from '../errors.js';
import type { Policy, TenantPolicies } from './policy.js';
import { type ClusterShare, SINGLE_NODE, shareOf } from './cluster-share.js';

const rateLimited = (retryAfter: number, what: string) =>
  new SvcError('too_many_requests', 'rate_limited', `The ${what} budget of this principal is spent; retry in ${retryAfter} s`, { retryAfterSeconds: retryAfter });
const concurrencyExceeded = () =>
  new SvcError('too_many_requests', 'tenant_concurrency_exceeded', 'The tenant has as many operations in flight and waiting as its policy allows', { retryAfterSeconds: 1 });
const admissionUnavailable = () =>
  new SvcError('unavailable', 'tenant_admission_unavailable', 'The server cannot queue another operation safely now', { retryAfterSeconds: 1 });

/** Waiters of every tenant together: beyond this the queues could not be held safely (503). */
const MAX_QUEUED_IN_ALL = 10_000;
/** Buckets not used for this long are forgotten (a full bucket is the same as none). */
const IDLE_BUCKET_MS = 10 * 60_000;

class Bucket {
  level: number;
  at = Date.now();

  constructor(readonly perMinute: number) {
    this.level = perMinute;
  }

  /** What the bucket holds now (refilled to this instant) and when it will be full again (ms), without taking anything. */
  peek(now = Date.now()): { level: number; fullAt: number } {
    const level = Math.min(this.perMinute, this.level + ((now - this.at) / 60_000) * this.perMinute);
    return { level, fullAt: now + Math.ceil(((this.perMinute - level) / this.perMinute) * 60_000) };
  }

  /**
   * Takes `amount` when the bucket holds it (an amount larger than a whole minute's needs a full
   * bucket, and leaves it below zero); else the seconds until it will.
   */
  take(amount: number): number | undefined {
    const now = Date.now();
    this.level = Math.min(this.perMinute, this.level + ((now - this.at) / 60_000) * this.perMinute);
    this.at = now;
    const need = Math.min(amount, this.perMinute);
    if (this.level < need) return Math.max(1, Math.ceil((need - this.level) / (this.perMinute / 60)));
    this.level -= amount;
    return undefined;
  }
}

/** A rate budget as GET /api/v1/usage tells it: null fields when the policy sets no rate. */
export interface RateUsage {
  remaining: number | null;
  limit: number | null;
  /** When the bucket is full again (ISO 8601): now when it is full. */
  resetsAt: string | null;
}

export interface BudgetUsage {
  concurrency: { inUse: number | null; limit: number | null };
  requests: RateUsage;
  bytes: RateUsage;
}

export class Budgets {
  private readonly requests = new Map<string, Bucket>();
  private readonly bytes = new Map<string, Bucket>();
  private readonly inFlight = new Map<string, number>();
  private readonly queues = new Map<string, Array<() => void>>();
  private queued = 0;
  private lastSweep = Date.now();

  constructor(
    private readonly policies: TenantPolicies,
    /**
     * Whether a queued operation can be held safely now: a waiting upload's held body takes
     * memory, so nothing is queued while the transfer memory itself has uploads waiting.
     */
    private readonly canQueue: () => boolean = () => true,
    /** This node's place among the live nodes that share the policy. */
    private readonly share: () => ClusterShare = () => SINGLE_NODE,
  ) {}

  /** One request of `principal` (429 rate_limited when its requests per minute are spent). */
  chargeRequest(tenant: string, principal: string): void {
    const perMinute = this.policies.for(tenant).requestsPerMinute;
    if (perMinute === undefined) return;
    const wait = bucket(this.requests, `${tenant}\0${principal}`, perMinute / this.share().count).take(1);
    this.sweep();
    if (wait !== undefined) throw rateLimited(wait, 'request');
  }

  /** `bytes` of body to or from `principal` (429 rate_limited when its bytes per minute are spent). */
  chargeBytes(tenant: string, principal: string, bytes: number): void {
    const perMinute = this.policies.for(tenant).bytesPerMinute;
    if (perMinute === undefined || bytes <= 0) return;
    const wait = bucket(this.bytes, `${tenant}\0${principal}`, perMinute / this.share().count).take(bytes);
    if (wait !== undefined) throw rateLimited(wait, 'byte');
  }

  /**
   * Admits one operation of `tenant` (an upload, a download, a commit): at once while it has
   * fewer than maxConcurrent in flight, else after those ahead of it in a queue of maxQueued.
   * Resolves with the release to call when the operation ends; undefined when the tenant has no limit.
   */
  admit(tenant: string): Promise<() => void> | (() => void) | undefined {
    const policy: Policy = this.policies.for(tenant);
    if (policy.maxConcurrent === undefined) return undefined;
    const share = this.share();
    const running = this.inFlight.get(tenant) ?? 0;
    if (running < shareOf(policy.maxConcurrent, share)) return this.start(tenant);
    const queue = this.queues.get(tenant) ?? [];
    if (queue.length >= shareOf(policy.maxQueued ?? 0, share)) throw concurrencyExceeded();
    if (this.queued >= MAX_QUEUED_IN_ALL || !this.canQueue()) throw admissionUnavailable();
    this.queues.set(tenant, queue);
    this.queued++;
    return new Promise((resolve) => queue.push(() => resolve(this.start(tenant))));
  }

  /**
   * What `principal` of `tenant` has left of its budgets, and its tenant's operations (GET
   * /api/v1/usage). Limits are the policy's figures (the cluster's); on several nodes `remaining`
   * is this node's share scaled to the cluster (what is left if the balancer spreads requests
   * evenly) and `inUse` is this node's operations. A figure not configured is null; without a
   * concurrency limit operations are not counted (`inUse` null).
   */
  usage(tenant: string, principal: string): BudgetUsage {
    const policy = this.policies.for(tenant);
    const share = this.share();
    const now = Date.now();
    const rate = (map: Map<string, Bucket>, perMinute: number | undefined): RateUsage => {
      if (perMinute === undefined) return { remaining: null, limit: null, resetsAt: null };
      const b = map.get(`${tenant}\0${principal}`);
      const peek = b && b.perMinute === perMinute / share.count ? b.peek(now) : { level: perMinute / share.count, fullAt: now };
      return { remaining: Math.max(0, Math.min(perMinute, Math.floor(peek.level * share.count))), limit: perMinute, resetsAt: new Date(peek.fullAt).toISOString() };
    };
    const limit = policy.maxConcurrent ?? null;
    return {
      concurrency: { inUse: limit === null ? null : (this.inFlight.get(tenant) ?? 0), limit },
      requests: rate(this.requests, policy.requestsPerMinute),
      bytes: rate(this.bytes, policy.bytesPerMinute),
    };
  }

  private start(tenant: string): () => void {
    this.inFlight.set(tenant, (this.inFlight.get(tenant) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(tenant) ?? 1) - 1;
      if (left > 0) this.inFlight.set(tenant, left);
      else this.inFlight.delete(tenant);
      const next = this.queues.get(tenant)?.shift();
      if (this.queues.get(tenant)?.length === 0) this.queues.delete(tenant);
      if (next) {
        this.queued--;
        next();
      }
    };
  }

  private sweep(): void {
    const now = Date.now();
    if (now - this.lastSweep < IDLE_BUCKET_MS) return;
    this.lastSweep = now;
    for (const map of [this.requests, this.bytes]) for (const [key, b] of map) if (now - b.at > IDLE_BUCKET_MS) map.delete(key);
  }
}


function bucket(map: Map<string, Bucket>, key: string, perMinute: number): Bucket {
  let b = map.get(key);
  if (!b || b.perMinute !== perMinute) map.set(key, (b = new Bucket(perMinute)));
  return b;
}
