// Tenant policy (SVC_TENANT_POLICY_FILE): `{ "default": Policy, "tenants": { "<org_id>": Policy } }`,
// read at start (an invalid file stops it) and again on SIGHUP (an invalid file then keeps the
// policy in force and says why in the log). A tenant's policy is the default's, field by field
// overridden by its own entry.

import fs from 'node:fs';
import type { Logger } from '../base/log.js';

export interface Policy {
  /** Largest object a tenant may store (413 tenant_object_limit_exceeded while streaming). */
  maxObjectBytes?: number;
  /** Retained bytes: the sum of the sizes of the tenant's distinct blobs (507 tenant_storage_quota_exceeded at publication). */
  quotaBytes?: number;
  /** Operations in flight per tenant (uploads, downloads, commits); more wait in a queue of `maxQueued` (429 beyond). */
  maxConcurrent?: number;
  maxQueued?: number;
  /** Per principal (`sub`): body bytes and requests per minute (429 rate_limited). */
  bytesPerMinute?: number;
  requestsPerMinute?: number;
}

const FIELDS: ReadonlyArray<keyof Policy> = ['maxObjectBytes', 'quotaBytes', 'maxConcurrent', 'maxQueued', 'bytesPerMinute', 'requestsPerMinute'];

export class PolicyError extends Error {}

interface PolicyFile {
  default: Policy;
  tenants: Record<string, Policy>;
}

export class TenantPolicies {
  private current: PolicyFile;

  private constructor(
    private readonly file: string,
    private readonly log: Logger,
  ) {
    this.current = file ? read(file) : { default: {}, tenants: {} };
  }

  /** The policies of `file` (empty: no limits). Throws PolicyError for a file that is not valid. */
  static open(file: string, log: Logger): TenantPolicies {
    return new TenantPolicies(file, log);
  }

  /** Reads the file again (SIGHUP); an invalid file leaves the policies as they were. */
  reload(): boolean {
    if (!this.file) return false;
    try {
      this.current = read(this.file);
      this.merged = new Map();
      this.log.info('tenant policy reloaded', { file: this.file, tenants: Object.keys(this.current.tenants).length });
      return true;
    } catch (err) {
      this.log.error('tenant policy not reloaded: the file is not valid; the previous policy stays', { file: this.file, err: (err as Error).message });
      return false;
    }
  }

  /** The tenants the policy names (its `tenants` entries). */
  named(): string[] {
    return Object.keys(this.current.tenants);
  }

  /**
   * Merged policies of the tenants the file names, made once per file version (asked several
   * times per request). Any other tenant gets the default itself: nothing is kept per tenant a
   * token names, so the map never holds more than the file does.
   */
  private merged = new Map<string, Policy>();

  for(tenant: string): Policy {
    const own = Object.hasOwn(this.current.tenants, tenant) ? this.current.tenants[tenant] : undefined;
    if (!own) return this.current.default;
    let policy = this.merged.get(tenant);
    if (!policy) this.merged.set(tenant, (policy = { ...this.current.default, ...own }));
    return policy;
  }
}

function read(file: string): PolicyFile {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new PolicyError(`SVC_TENANT_POLICY_FILE ${file}: ${(err as Error).message}`);
  }
  if (!isObject(raw)) throw new PolicyError(`SVC_TENANT_POLICY_FILE ${file}: not a JSON object`);
  for (const key of Object.keys(raw)) if (key !== 'default' && key !== 'tenants') throw new PolicyError(`SVC_TENANT_POLICY_FILE ${file}: unknown field "${key}"`);
  const tenants: Record<string, Policy> = {};
  if (raw.tenants !== undefined) {
    if (!isObject(raw.tenants)) throw new PolicyError(`SVC_TENANT_POLICY_FILE ${file}: "tenants" must be an object`);
    for (const [tenant, policy] of Object.entries(raw.tenants)) tenants[tenant] = policyOf(policy, `tenants.${tenant}`, file);
  }
  return { default: raw.default === undefined ? {} : policyOf(raw.default, 'default', file), tenants };
}

function policyOf(raw: unknown, where: string, file: string): Policy {
  if (!isObject(raw)) throw new PolicyError(`SVC_TENANT_POLICY_FILE ${file}: ${where} must be an object`);
  const policy: Policy = {};
  for (const [key, value] of Object.entries(raw)) {
    if (!FIELDS.includes(key as keyof Policy)) throw new PolicyError(`SVC_TENANT_POLICY_FILE ${file}: ${where}: unknown field "${key}"`);
    if (!Number.isSafeInteger(value) || (value as number) < 0) throw new PolicyError(`SVC_TENANT_POLICY_FILE ${file}: ${where}.${key} must be a whole number, 0 or more`);
    policy[key as keyof Policy] = value as number;
  }
  return policy;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
