// Who is calling: the claims of a verified bearer token, and capability checks.

export interface Principal {
  /** `sub` */
  subject: string;
  /** `org_id`: the tenant. */
  tenant: string;
  /** `scope`, split on spaces. A trailing `*` matches any rest: `meta.write:*`. */
  scopes: readonly string[];
  /** `roles` */
  roles: readonly string[];
}

/** Whether the principal's scopes grant `capability` (exact, or by a `*`-suffixed prefix). */
export function holds(principal: Principal, capability: string): boolean {
  for (const scope of principal.scopes) {
    if (scope === capability) return true;
    if (scope.endsWith('*') && capability.startsWith(scope.slice(0, -1))) return true;
  }
  return false;
}
