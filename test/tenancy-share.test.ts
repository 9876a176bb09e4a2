// Issue 26: a tenant policy's figures hold for the cluster. Each live node enforces its share
// (engine/tenancy/cluster-share.ts): three Budgets as three nodes of one policy admit together
// exactly maxConcurrent operations and maxQueued waiters, and spend the requests per minute
// together, whatever the node count; a node that is alone has the whole figure. Issue 37: every
// node has at least one slot (a maxConcurrent smaller than the node count), a queued operation
// waits at most the queue wait (503 tenant_queue_timeout) and leaves the queue when its client
// aborts, and a bucket keeps its level when the node count changes.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { type ClusterShare, Budgets, ClusterShareTracker, TenantPolicies, shareOf } from '../dist/engine/tenancy/index.js';
import { Logger } from '../dist/engine/base/log.js';

function policies(policy: Record<string, number>): TenantPolicies {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-share-'));
  const file = path.join(dir, 'policy.json');
  fs.writeFileSync(file, JSON.stringify({ default: policy, tenants: {} }));
  return TenantPolicies.open(file, new Logger('error'));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const refusals = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
};

describe('tenant limits shared by the live nodes', () => {
  it('shares of a count add up to it exactly, the remainder to the lowest ranks', () => {
    for (const total of [0, 1, 2, 3, 7, 10, 100]) {
      for (const count of [1, 2, 3, 5]) {
        const shares = Array.from({ length: count }, (_, rank) => shareOf(total, { rank, count }));
        expect(shares.reduce((a, b) => a + b, 0), `${total} over ${count}`).toBe(total);
        expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
      }
    }
  });

  it('three nodes admit maxConcurrent operations and maxQueued waiters together, then 429', () => {
    const p = policies({ maxConcurrent: 7, maxQueued: 4 });
    const nodes = [0, 1, 2].map((rank) => new Budgets(p, () => true, () => ({ rank, count: 3 })));
    let running = 0;
    let queued = 0;
    let refused = 0;
    for (let i = 0; i < 30; i++) {
      const node = nodes[i % 3]!;
      try {
        const admitted = node.admit('t');
        if (admitted instanceof Promise) queued++;
        else running++;
      } catch (err) {
        expect((err as { code: string }).code).toBe('tenant_concurrency_exceeded');
        refused++;
      }
    }
    expect([running, queued, refused]).toEqual([7, 4, 19]);
    // Alone, one node has the whole figure.
    const alone = new Budgets(p, () => true, () => ({ rank: 0, count: 1 }));
    const releases = Array.from({ length: 7 }, () => alone.admit('t'));
    expect(releases.every((r) => typeof r === 'function')).toBe(true);
  });

  it('every node has a slot of a tenant whose maxConcurrent is smaller than the node count', () => {
    const p = policies({ maxConcurrent: 1, maxQueued: 4 });
    for (const count of [2, 3]) {
      const nodes = Array.from({ length: count }, (_, rank) => new Budgets(p, () => true, () => ({ rank, count })));
      // An idle tenant's first operation on every node starts at once (not queued behind nothing).
      for (const node of nodes) expect(typeof node.admit('t'), `${count} nodes`).toBe('function');
    }
    // maxConcurrent 0 admits nothing: refused, never queued for a slot that cannot come.
    const none = new Budgets(policies({ maxConcurrent: 0, maxQueued: 4 }));
    expect(refusals(() => none.admit('t'))).toBe('tenant_concurrency_exceeded');
  });

  it('a queued operation waits at most the queue wait: then 503 tenant_queue_timeout with Retry-After', async () => {
    const p = policies({ maxConcurrent: 1, maxQueued: 2 });
    const node = new Budgets(p, () => true, undefined, 200);
    const running = node.admit('t') as () => void;
    expect(typeof running).toBe('function');
    const started = Date.now();
    const waiting = node.admit('t') as Promise<() => void>;
    const outcome = await Promise.race([waiting.then(() => 'admitted', (err: { kind: string; code: string; details: { retryAfterSeconds?: number } }) => err), sleep(5000).then(() => 'still waiting')]);
    expect(outcome).toMatchObject({ kind: 'unavailable', code: 'tenant_queue_timeout', details: { retryAfterSeconds: 1 } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    // It left the queue: the next one queues, and the running one's end admits it.
    const next = node.admit('t') as Promise<() => void>;
    running();
    expect(typeof (await next)).toBe('function');
  });

  it('a queued operation whose client aborts leaves the queue; the next one takes its place', async () => {
    const p = policies({ maxConcurrent: 1, maxQueued: 2 });
    const node = new Budgets(p);
    const running = node.admit('t') as () => void;
    const gone = new AbortController();
    const first = node.admit('t', { signal: () => gone.signal }) as Promise<() => void>;
    const second = node.admit('t') as Promise<() => void>;
    const left = first.then(() => 'admitted', (err: { code: string }) => err.code);
    gone.abort();
    expect(await Promise.race([left, sleep(5000).then(() => 'still queued')])).toBe('tenant_queue_left');
    // The queue has room again (2 waiters at most: the second and this one).
    const third = node.admit('t') as Promise<() => void>;
    expect(third).toBeInstanceOf(Promise);
    expect(refusals(() => node.admit('t'))).toBe('tenant_concurrency_exceeded');
    running();
    const release = await second;
    release();
    (await third)();
    expect(node.usage('t', 'alice').concurrency.inUse).toBe(0);
    // An aborted signal is refused before it queues.
    const blocker = node.admit('t') as () => void;
    expect(refusals(() => node.admit('t', { signal: () => AbortSignal.abort() }))).toBe('tenant_queue_left');
    blocker();
  });

  it('a bucket keeps its level when nodes come and go: never refilled by a change of the count', () => {
    const p = policies({ requestsPerMinute: 60 });
    let share: ClusterShare = { rank: 0, count: 1 };
    const node = new Budgets(p, () => true, () => share);
    for (let i = 0; i < 30; i++) node.chargeRequest('t', 'alice');
    expect(node.usage('t', 'alice').requests.remaining).toBe(30);
    // A second node joins: this node's bucket is half as large and still half full (15 of 30).
    share = { rank: 0, count: 2 };
    expect(node.usage('t', 'alice').requests.remaining).toBe(30);
    for (let i = 0; i < 15; i++) node.chargeRequest('t', 'alice');
    expect(refusals(() => node.chargeRequest('t', 'alice'))).toBe('rate_limited');
    // It leaves again (a heartbeat that flaps): the bucket stays empty.
    share = { rank: 0, count: 1 };
    expect(node.usage('t', 'alice').requests.remaining).toBe(0);
    expect(refusals(() => node.chargeRequest('t', 'alice'))).toBe('rate_limited');
  });

  it('three nodes spend a principal\'s requests per minute together', () => {
    const p = policies({ requestsPerMinute: 90 });
    const nodes = [0, 1, 2].map((rank) => new Budgets(p, () => true, () => ({ rank, count: 3 })));
    let allowed = 0;
    for (let i = 0; i < 300; i++) if (refusals(() => nodes[i % 3]!.chargeRequest('t', 'alice')) === undefined) allowed++;
    // A bucket refills continuously: a few more may pass while the loop runs, never a node's whole figure again.
    expect(allowed).toBeGreaterThanOrEqual(90);
    expect(allowed).toBeLessThan(95);
  });

  it('the tracker ranks this node among the live ones, itself always included', async () => {
    let live = new Set(['node-b', 'node-c']);
    const tracker = new ClusterShareTracker('node-c', async () => live);
    expect(tracker.get()).toEqual({ rank: 0, count: 1 });
    await tracker.refresh();
    expect(tracker.get()).toEqual({ rank: 1, count: 2 });
    live = new Set(['node-a', 'node-b']);
    await tracker.refresh();
    expect(tracker.get()).toEqual({ rank: 2, count: 3 });
  });
});
