// Tenancy with security on: the policy of each tenant and the budgets that enforce it.
export { type AdmitOptions, type BudgetUsage, Budgets, type RateUsage, type Release } from './budgets.js';
export { type Policy, PolicyError, TenantPolicies } from './policy.js';
export { type ClusterShare, ClusterShareTracker, SINGLE_NODE, type ShareScope, shareOf, slotsOf } from './cluster-share.js';
export { type BlobRoom, type BodyMeter, type ByteCaller, type HeldBytes, type RequestMeter, TenantGate, publicationQuota } from './tenant-gate.js';
export { TenantUsage, type TenantUsageDeps, type TenantUsageReport } from './tenant-usage.js';
