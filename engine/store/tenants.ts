// Tenants of the blob catalog: with security on, the token's org_id; with it off, everything is
// the default tenant's (and sessions may name another with X-Svc-Tenant-Id, as before).

/** The tenant of every blob while security is off, and of catalogs from before tenants. */
export const DEFAULT_TENANT = '00000000-0000-4000-8000-000000000000';
