// What a tenant stores and may still do (GET /api/v1/usage), and the dashboard's table of the
// tenants the operator knows by name. The figures are read from their owners (the blob catalog,
// the document platform, the upload sessions, the gate, the budgets); nothing is kept here but a
// short-lived reading of the table.
import type { TenantUsageRow } from '../ops/index.js';
import { DEFAULT_TENANT } from '../store/index.js';
import type { BudgetUsage, Budgets } from './budgets.js';
import type { TenantGate } from './tenant-gate.js';
import type { TenantPolicies } from './policy.js';

/** A tenant's usage and limits (GET /api/v1/usage); a limit not configured is null. */
export interface TenantUsageReport {
  tenant: string;
  retainedBytes: number;
  /** What the tenant's open uploads reserve in its quota (declared lengths, else bytes received). */
  stagedBytes: number;
  objects: number;
  quotaBytes: number | null;
  maxObjectBytes: number | null;
  concurrency: BudgetUsage['concurrency'];
  budgets: { requests: BudgetUsage['requests']; bytes: BudgetUsage['bytes'] };
}

export interface TenantUsageDeps {
  securityEnabled: boolean;
  policies: Pick<TenantPolicies, 'named'>;
  budgets: Pick<Budgets, 'usage'>;
  gate: Pick<TenantGate, 'limits'>;
  /** The tenant's blobs: their distinct bytes and how many. */
  blobs(tenant: string): Promise<{ bytes: number; objects: number }>;
  /** The tenant's document content's distinct bytes. */
  documentBytes(tenant: string): Promise<number>;
  /** What the tenant's open uploads reserve. */
  stagedBytes(tenant: string): Promise<number>;
}

/** Tenants in the dashboard's usage table, and how long one reading of them serves the snapshots. */
const OPS_TENANTS = 50;
const OPS_TENANTS_MS = 5000;

const NO_RATE = { remaining: null, limit: null, resetsAt: null };
const NO_BUDGETS: BudgetUsage = { concurrency: { inUse: null, queued: null, limit: null }, requests: NO_RATE, bytes: NO_RATE };

export class TenantUsage {
  private tenantsRead?: { at: number; rows: Promise<TenantUsageRow[]> };

  constructor(private readonly deps: TenantUsageDeps) {}

  /** The tenant's storage limits (SVC_TENANT_POLICY_FILE), applied with security on; none with it off. */
  limits(tenant: string): { maxObjectBytes?: number; quotaBytes?: number } {
    return this.deps.gate.limits(tenant);
  }

  /**
   * What `tenant` stores and may still do (GET /api/v1/usage): its retained bytes (blobs and
   * document content, as its quota counts them), its blobs, its limits and, for `subject` (the
   * caller), the budgets left. With security off no policy applies: every limit is null.
   */
  async usage(tenant: string, subject?: string): Promise<TenantUsageReport> {
    const { deps } = this;
    const [blobs, documentBytes, stagedBytes] = await Promise.all([deps.blobs(tenant), deps.documentBytes(tenant), deps.stagedBytes(tenant)]);
    const { maxObjectBytes, quotaBytes } = this.limits(tenant);
    const budgets = deps.securityEnabled && subject !== undefined ? deps.budgets.usage(tenant, subject) : NO_BUDGETS;
    return {
      tenant,
      retainedBytes: blobs.bytes + documentBytes,
      stagedBytes,
      objects: blobs.objects,
      quotaBytes: quotaBytes ?? null,
      maxObjectBytes: maxObjectBytes ?? null,
      concurrency: budgets.concurrency,
      budgets: { requests: budgets.requests, bytes: budgets.bytes },
    };
  }

  /**
   * The dashboard's table: the usage of the tenants named in the tenant policy (with security off,
   * the default tenant's), at most OPS_TENANTS of them, the largest first; at most OPS_TENANTS_MS old.
   */
  tenantsUsage(): Promise<TenantUsageRow[]> {
    // Read at most every OPS_TENANTS_MS, however often snapshots are built: each row counts the tenant's blobs.
    const now = Date.now();
    if (this.tenantsRead && now - this.tenantsRead.at < OPS_TENANTS_MS) return this.tenantsRead.rows;
    const names = this.deps.securityEnabled ? this.deps.policies.named().slice(0, OPS_TENANTS) : [DEFAULT_TENANT];
    const rows = Promise.all(names.map(async (tenant) => {
      const u = await this.usage(tenant);
      return { tenant, retainedBytes: u.retainedBytes, objects: u.objects, quotaBytes: u.quotaBytes };
    })).then((read) => read.sort((a, b) => b.retainedBytes - a.retainedBytes || (a.tenant < b.tenant ? -1 : 1)));
    this.tenantsRead = { at: now, rows };
    rows.catch(() => {
      if (this.tenantsRead?.rows === rows) this.tenantsRead = undefined;
    });
    return rows;
  }
}
