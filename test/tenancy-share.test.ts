// Issue 26: a tenant policy's figures hold for the cluster. Each live node enforces its share
// (engine/tenancy/cluster-share.ts): three Budgets as three nodes of one policy admit together
// exactly maxConcurrent operations and maxQueued waiters, and spend the requests per minute
// together, whatever the node count; a node that is alone has the whole figure.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Budgets, ClusterShareTracker, TenantPolicies, shareOf } from '../dist/engine/tenancy/index.js';
import { Logger } from '../dist/engine/log.js';

function policies(policy: Record<string, number>): TenantPolicies {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-share-'));
  const file = path.join(dir, 'policy.json');
  fs.writeFileSync(file, JSON.stringify({ default: policy, tenants: {} }));
  return TenantPolicies.open(file, new Logger('error'));
}

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
