// Tenancy with security on: the policy of each tenant and the budgets that enforce it.
export { type BudgetUsage, Budgets, type RateUsage } from './budgets.js';
export { type Policy, PolicyError, TenantPolicies } from './policy.js';
export { type ClusterShare, ClusterShareTracker, shareOf } from './cluster-share.js';
export { type BlobRoom, type BodyMeter, ByteGate, type ByteCaller, type HeldBytes } from './byte-gate.js';
