// Who is calling: the claims of a verified bearer token, and capability checks.

import { LRUCache } from 'lru-cache';

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

/**
 * Answers of `holds` per principal (a cached token's principal is asked on every request). A
 * capability may carry what the request names (`meta.write:<namespace URN>`), so each principal
 * keeps only its most recently asked ones: a caller naming a new namespace every request costs a
 * scan of its scopes, never memory that outlives the request.
 */
const answers = new WeakMap<Principal, LRUCache<string, boolean>>();
/** Capabilities remembered per principal: a route's own plus the few namespaces a client works in. */
const ANSWERS_PER_PRINCIPAL = 32;
/** Longer capabilities are answered and not remembered (a URN is at most 256 characters: engine/base/urn.ts). */
const REMEMBERED_MAX_CHARS = 512;

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
  if (capability.length > REMEMBERED_MAX_CHARS) return granted;
  if (!known) answers.set(principal, (known = new LRUCache({ max: ANSWERS_PER_PRINCIPAL })));
  known.set(capability, granted);
  return granted;
}
