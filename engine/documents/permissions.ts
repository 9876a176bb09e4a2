// Document permission rules together with token capabilities: an action needs the capability;
// on a document with rules it also needs a matching allow and no matching deny (deny wins).

import type { Principal } from '../auth/index.js';
import { holds } from '../auth/index.js';
import { forbidden, type PermissionRule } from './model.js';

export function ruleAllows(rules: readonly PermissionRule[], principal: Principal, action: string): boolean {
  if (rules.length === 0) return true;
  const matches = (rule: PermissionRule) =>
    rule.actions.some((a) => a === action || a === '*' || (a.endsWith('*') && action.startsWith(a.slice(0, -1)))) &&
    rule.principals.some((p) => p === 'org:*' || (p.startsWith('role:') && principal.roles.includes(p.slice(5))) || p === `user:${principal.subject}`);
  if (rules.some((r) => r.effect === 'deny' && matches(r))) return false;
  return rules.some((r) => r.effect === 'allow' && matches(r));
}

/** 403 unless the token grants `capability` (one that depends on the request: `meta.write:urn:svc:case`), worded as the router's guard words it. */
export function requireCapability(principal: Principal, capability: string): void {
  if (!holds(principal, capability)) throw forbidden(`The token does not grant ${capability}`);
}

/** 403 unless the document's rules let the principal do `action` (`doc.read`, `meta.write`, ...). */
export function requireRule(rules: readonly PermissionRule[], principal: Principal, action: string): void {
  if (!ruleAllows(rules, principal, action)) throw forbidden(`The document's permission rules do not allow ${action}`);
}
