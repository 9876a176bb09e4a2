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

/** Answers of `holds` per principal (a cached token's principal is asked on every request). */
const answers = new WeakMap<Principal, Map<string, boolean>>();

/** Whether the principal's scopes grant `capability` (exact, or by a `*`-suffixed prefix). */
export function holds(principal: Principal, capability: string): boolean {
  let known = answers.get(principal);
  const answer = known?.get(capability);
  if (answer !== undefined) return answer;
  let granted = false;
  for (const scope of principal.scopes) {
    if (scope === capability || (scope.endsWith('*') && capability.startsWith(scope.slice(0, -1)))) {
      granted = true;
      break;
    }
  }
  if (!known) answers.set(principal, (known = new Map()));
  known.set(capability, granted);
  return granted;
}
