// POST /dev/token's body parsed into the request TokenVerifier.mint takes (engine/auth/tokens.ts).

import type { DevTokenRequest } from '../../engine/auth/index.js';
import { DEV_TOKEN_MAX_TTL_S } from '../../engine/base/limits.js';
import { SvcError } from '../../engine/base/errors.js';

/** `{ org_id?, sub?, scope?, roles?, ttl_seconds? }`; no body: every default. */
export function parseDevTokenRequest(body: unknown): DevTokenRequest {
  const bad = (message: string) => new SvcError('invalid', 'invalid_request', message);
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bad('The body must be a JSON object');
  const b = body as Record<string, unknown>;
  for (const key of Object.keys(b)) if (!['org_id', 'sub', 'scope', 'roles', 'ttl_seconds'].includes(key)) throw bad(`Unknown field "${key}"`);
  for (const key of ['org_id', 'sub', 'scope'] as const) {
    if (b[key] !== undefined && (typeof b[key] !== 'string' || (b[key] as string).length === 0 || (b[key] as string).length > 1024)) throw bad(`"${key}" must be a non-empty string`);
  }
  if (b.roles !== undefined && (!Array.isArray(b.roles) || !b.roles.every((r) => typeof r === 'string' && r.length > 0))) throw bad('"roles" must be an array of strings');
  if (b.ttl_seconds !== undefined && (!Number.isInteger(b.ttl_seconds) || (b.ttl_seconds as number) < 1 || (b.ttl_seconds as number) > DEV_TOKEN_MAX_TTL_S)) {
    throw bad(`"ttl_seconds" must be an integer from 1 to ${DEV_TOKEN_MAX_TTL_S}`);
  }
  return b as DevTokenRequest;
}
