// GET /api/v1/usage: what the caller's tenant stores and may still do (its retained bytes and
// blobs, its limits, its budgets left). Any valid token (ANY_TOKEN): a tenant's own usage is no
// secret from any of its principals, and every one of them meets these limits; another tenant's
// is never named, the tenant is the token's. With security off, the default tenant's.

import { DEFAULT_TENANT } from '../engine/store/index.js';
import { ANY_TOKEN, type Router } from './router.js';
import type { ServerContext } from './server-context.js';

export function mountUsageApi(router: Router, { tenantUsage }: ServerContext): void {
  router.on('GET', '/api/v1/usage', async ({ ex, principal }) => {
    ex.json(200, await tenantUsage.usage(principal?.tenant ?? DEFAULT_TENANT, principal?.subject), { 'Cache-Control': 'no-store' });
  }, { fallbackCode: 'usage_failure', capability: ANY_TOKEN });
}
