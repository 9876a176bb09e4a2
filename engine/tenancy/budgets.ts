// Budgets of tenants and principals: token buckets of requests and body bytes per principal
// (`sub`), and the operations a tenant has in flight with a bounded queue behind them. Every
// refusal says when to come back (Retry-After, seconds). A policy's figures are the cluster's:
// on several nodes each node enforces its share (./cluster-share.ts), so no request waits for
// another node. A queued operation waits at most `SVC_TENANT_QUEUE_WAIT` and leaves the queue
// when its client goes away (its abort signal), so no request waits without end.

import { SvcError } from '../base/errors.js';
import type { Policy, TenantPolicies } from './policy.js';
import { type ClusterShare, type ShareScope, SINGLE_NODE, shareOf, slotsOf } from './cluster-share.js';

const rateLimited = (retryAfter: number, what: string) =>
  new SvcError('too_many_requests', 'rate_limited', `The ${what} budget of this principal is spent; retry in ${retryAfter} s`, { retryAfterSeconds: retryAfter });
const concurrencyExceeded = () =>
  new SvcError('too_many_requests', 'tenant_concurrency_exceeded', 'The tenant has as many operations in flight and waiting as its policy allows', { retryAfterSeconds: 1 });
const admissionUnavailable = () =>
  new SvcError('unavailable', 'tenant_admission_unavailable', 'The server cannot queue another operation safely now', { retryAfterSeconds: 1 });
const queueTimeout = (waitMs: number) =>
  new SvcError('unavailable', 'tenant_queue_timeout', `The operation waited ${waitMs / 1000} s for one of its tenant's slots; retry later`, { retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) });
/** Never answered (the client is gone): what the waiting admission rejects with. */
const clientGone = () => new SvcError('unavailable', 'tenant_queue_left', 'The client went away while its operation waited for a slot');

/** Waiters of every tenant together: beyond this the queues could not be held safely (503). */
const MAX_QUEUED_IN_ALL = 10_000;
/** Buckets not used for this long are forgotten (a full bucket is the same as none). */
const IDLE_BUCKET_MS = 10 * 60_000;
/** Floating-point slack when a bucket's share is compared or counted (a level is a sum of fractions). */
const EPSILON = 1e-9;

/**
 * A token bucket kept as the fraction of a full one (1 full; below 0 after a charge larger than
 * a whole minute's). It refills a whole bucket a minute, whatever its size, so a change of its
 * size (this node's share of the figure when nodes come and go, a policy reloaded, a route whose
 * share is the whole figure) keeps its level in proportion: never refilled by the change.
 */
class Bucket {
  level = 1;
  at = Date.now();

  /** What the bucket holds now (a fraction, refilled to this instant) and when it will be full again (ms), without taking anything. */
  peek(now = Date.now()): { level: number; fullAt: number } {
    const level = Math.min(1, this.level + (now - this.at) / 60_000);
    return { level, fullAt: now + Math.ceil((1 - level) * 60_000) };
  }

  /**
   * Takes `amount` of a bucket of `size` when it holds it (an amount larger than a whole minute's
   * needs a full bucket, and leaves it below zero); else the seconds until it will.
   */
  take(amount: number, size: number): number | undefined {
    const now = Date.now();
    this.level = this.peek(now).level;
    this.at = now;
    const need = Math.min(amount, size) / size;
    if (this.level + EPSILON < need) return Math.max(1, Math.ceil((need - this.level) * 60));
    this.level -= amount / size;
    return undefined;
  }
}

/** How one operation is admitted. */
export interface AdmitOptions {
  /**
   * Aborted when the client goes away: a queued operation then leaves the queue at once. A
   * getter, called only when the operation must queue (most are admitted or need no slot).
   */
  signal?: () => AbortSignal;
  /** Whose share of the figures applies (./cluster-share.ts); `cluster` by default. */
  scope?: ShareScope;
}

/** The end of an admitted operation: frees its slot (once; later calls do nothing). */
export type Release = () => void;

/** An operation waiting for a slot of its tenant. */
interface Waiter {
  scope: ShareScope;
  admit(): void;
  /** Takes the waiter out of the queue (a timeout, its client gone) and rejects it. */
  leave(err: SvcError): void;
}

/** A rate budget as GET /api/v1/usage tells it: null fields when the policy sets no rate. */
export interface RateUsage {
  remaining: number | null;
  limit: number | null;
  /** When the bucket is full again (ISO 8601): now when it is full. */
  resetsAt: string | null;
}

export interface BudgetUsage {
  /** This node's operations of the tenant in flight and waiting in its queue; the policy's maxConcurrent. */
  concurrency: { inUse: number | null; queued: number | null; limit: number | null };
  requests: RateUsage;
  bytes: RateUsage;
}

export class Budgets {
  private readonly requests = new Map<string, Bucket>();
  private readonly bytes = new Map<string, Bucket>();
  private readonly inFlight = new Map<string, number>();
  private readonly queues = new Map<string, Waiter[]>();
  private queued = 0;
  private lastSweep = Date.now();

  constructor(
    private readonly policies: TenantPolicies,
    /**
     * Whether a queued operation can be held safely now: a waiting upload's held body takes
     * memory, so nothing is queued while the transfer memory itself has uploads waiting.
     */
    private readonly canQueue: () => boolean = () => true,
    /** This node's place among the live nodes that share the policy, for routes of `scope`. */
    private readonly share: (scope: ShareScope) => ClusterShare = () => SINGLE_NODE,
    /** The longest a queued operation waits for a slot (SVC_TENANT_QUEUE_WAIT): then 503 tenant_queue_timeout. */
    private readonly queueWaitMs = 30_000,
  ) {}

  /** One request of `principal` (429 rate_limited when its requests per minute are spent). */
  chargeRequest(tenant: string, principal: string, scope: ShareScope = 'cluster'): void {
    const perMinute = this.policies.for(tenant).requestsPerMinute;
    if (perMinute === undefined) return;
    const wait = bucket(this.requests, `${tenant}\0${principal}`).take(1, perMinute / this.share(scope).count);
    this.sweep();
    if (wait !== undefined) throw rateLimited(wait, 'request');
  }

  /** `bytes` of body to or from `principal` (429 rate_limited when its bytes per minute are spent). */
  chargeBytes(tenant: string, principal: string, bytes: number, scope: ShareScope = 'cluster'): void {
    const perMinute = this.policies.for(tenant).bytesPerMinute;
    if (perMinute === undefined || bytes <= 0) return;
    const wait = bucket(this.bytes, `${tenant}\0${principal}`).take(bytes, perMinute / this.share(scope).count);
    if (wait !== undefined) throw rateLimited(wait, 'byte');
  }

  /**
   * Admits one operation of `tenant` (an upload, a download, a commit): at once while it has
   * fewer than its slots in flight, else after those ahead of it in a queue of maxQueued, for at
   * most the queue wait (then 503 tenant_queue_timeout); aborting `signal` takes it out of the
   * queue. Resolves with the release to call when the operation ends; undefined when the tenant
   * has no limit. A tenant whose maxConcurrent is 0 is admitted nothing (429, never queued).
   */
  admit(tenant: string, options: AdmitOptions = {}): Promise<Release> | Release | undefined {
    const policy: Policy = this.policies.for(tenant);
    if (policy.maxConcurrent === undefined) return undefined;
    const scope = options.scope ?? 'cluster';
    const share = this.share(scope);
    const slots = slotsOf(policy.maxConcurrent, share);
    if (slots === 0) throw concurrencyExceeded();
    // Those queued first go first (a share that grew since they queued lets them in now).
    this.pump(tenant);
    const queue = this.queues.get(tenant);
    if (!queue && (this.inFlight.get(tenant) ?? 0) < slots) return this.start(tenant);
    if ((queue?.length ?? 0) >= shareOf(policy.maxQueued ?? 0, share)) throw concurrencyExceeded();
    if (this.queued >= MAX_QUEUED_IN_ALL || !this.canQueue()) throw admissionUnavailable();
    const signal = options.signal?.();
    if (signal?.aborted) throw clientGone();
    return new Promise<Release>((resolve, reject) => {
      const waiting = queue ?? [];
      if (!queue) this.queues.set(tenant, waiting);
      this.queued++;
      const onAbort = () => waiter.leave(clientGone());
      const timer = setTimeout(() => waiter.leave(queueTimeout(this.queueWaitMs)), this.queueWaitMs);
      timer.unref();
      signal?.addEventListener('abort', onAbort, { once: true });
      const dequeue = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.queued--;
      };
      const waiter: Waiter = {
        scope,
        admit: () => {
          dequeue();
          resolve(this.start(tenant));
        },
        leave: (err) => {
          const at = waiting.indexOf(waiter);
          if (at < 0) return;
          waiting.splice(at, 1);
          if (waiting.length === 0 && this.queues.get(tenant) === waiting) this.queues.delete(tenant);
          dequeue();
          reject(err);
        },
      };
      waiting.push(waiter);
    });
  }

  /** Operations of `tenant` waiting on this node (tests, operators). */
  waiting(tenant: string): number {
    return this.queues.get(tenant)?.length ?? 0;
  }

  /**
   * What `principal` of `tenant` has left of its budgets, and its tenant's operations (GET
   * /api/v1/usage). Limits are the policy's figures (the cluster's); on several nodes `remaining`
   * is this node's share scaled to the cluster (what is left if the balancer spreads requests
   * evenly) and `inUse` and `queued` are this node's operations. A figure not configured is null; without a
   * concurrency limit operations are not counted (`inUse` null).
   */
  usage(tenant: string, principal: string): BudgetUsage {
    const policy = this.policies.for(tenant);
    const now = Date.now();
    const rate = (map: Map<string, Bucket>, perMinute: number | undefined): RateUsage => {
      if (perMinute === undefined) return { remaining: null, limit: null, resetsAt: null };
      const peek = map.get(`${tenant}\0${principal}`)?.peek(now) ?? { level: 1, fullAt: now };
      return { remaining: Math.max(0, Math.min(perMinute, Math.floor(peek.level * perMinute + EPSILON))), limit: perMinute, resetsAt: new Date(peek.fullAt).toISOString() };
    };
    const limit = policy.maxConcurrent ?? null;
    return {
      concurrency: { inUse: limit === null ? null : (this.inFlight.get(tenant) ?? 0), queued: limit === null ? null : this.waiting(tenant), limit },
      requests: rate(this.requests, policy.requestsPerMinute),
      bytes: rate(this.bytes, policy.bytesPerMinute),
    };
  }

  private start(tenant: string): Release {
    this.inFlight.set(tenant, (this.inFlight.get(tenant) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(tenant) ?? 1) - 1;
      if (left > 0) this.inFlight.set(tenant, left);
      else this.inFlight.delete(tenant);
      this.pump(tenant);
    };
  }

  /** Starts the tenant's first waiters while it has free slots (each by its own route's share). */
  private pump(tenant: string): void {
    const queue = this.queues.get(tenant);
    if (!queue) return;
    const maxConcurrent = this.policies.for(tenant).maxConcurrent;
    while (queue.length > 0) {
      // A policy reloaded without a limit lets every waiter in.
      const slots = maxConcurrent === undefined ? Infinity : slotsOf(maxConcurrent, this.share(queue[0]!.scope));
      if ((this.inFlight.get(tenant) ?? 0) >= slots) break;
      queue.shift()!.admit();
    }
    if (queue.length === 0 && this.queues.get(tenant) === queue) this.queues.delete(tenant);
  }

  private sweep(): void {
    const now = Date.now();
    if (now - this.lastSweep < IDLE_BUCKET_MS) return;
    this.lastSweep = now;
    for (const map of [this.requests, this.bytes]) for (const [key, b] of map) if (now - b.at > IDLE_BUCKET_MS) map.delete(key);
  }
}

function bucket(map: Map<string, Bucket>, key: string): Bucket {
  let b = map.get(key);
  if (!b) map.set(key, (b = new Bucket()));
  return b;
}
