// What each listener serves: the routers of listener 1 (blob API, uploads, GC and nodes, the
// document platform and legacy repositories, the operator routes, the API description) and of the
// model listener, mounted on their apps in order. serve() (main.ts) calls it with the started
// engine; test/openapi.test.ts calls it with an app that only records, to compare the routers'
// tables with the OpenAPI documents.

import type { TemplatedApp } from 'uWebSockets.js';
import type { Config } from '../engine/base/config.js';
import type { Engine } from '../engine/engine.js';
import type { Logger } from '../engine/base/log.js';
import { mountServiceDescription } from './api-docs.js';
import { apiSurface, corsPolicy } from './api-surface.js';
import type { MountRoutes, ServerContext } from './server-context.js';
import { mountBlobApi } from './blob-api.js';
import { mountDocsApi } from './docs-api.js';
import { documentsGate } from './documents-gate.js';
import { mountGcApi } from './gc-api.js';
import { mountLegacyApi } from './legacy-api.js';
import { modelSurface, mountModelApi } from './model-api.js';
import { ModelMetrics } from './model-metrics.js';
import { mountNodesApi } from './nodes-api.js';
import { mountOpsApi } from './ops-api.js';
import { type Meter, Router, type RouterOptions } from './router.js';
import { mountUploadsApi } from './uploads-api.js';
import { mountUsageApi } from './usage-api.js';
import { TUS_HEADERS, mountTusApi, tusDiscovery } from './tus-api.js';
import { routeHint } from './route-hint.js';

export interface ListenerRouters {
  /** Listener 1 (SVC_HTTP_PORT), in mount order. */
  service: Router[];
  /** The model listener (HTTP_PORT). */
  model: Router[];
}

/** A router's options and the route files mounted on it, in order. */
interface RouterPlan {
  options: RouterOptions;
  mounts: MountRoutes[];
}

export function mountListeners(app: TemplatedApp, modelApp: TemplatedApp, engine: Engine, config: Config, log: Logger): ListenerRouters {
  const ctx: ServerContext = {
    engine, config, log, metrics: engine.metrics, modelMetrics: new ModelMetrics(engine.models, engine.metrics.registry),
    health: engine.health, tenantUsage: engine.tenantUsage,
  };
  // The one guard of every router: the engine's token verifier. With security on, every route
  // that names a capability needs a bearer token that holds it; the document platform and legacy
  // repositories need one with security on or off (docs/documents.md).
  const guard = config.securityEnabled ? engine.tokens : undefined;
  const cors = corsPolicy(config);
  // With security on, the engine's tenant gate (engine/tenancy/tenant-gate.ts) meters every request:
  // requests and bytes per principal, operations per tenant.
  const meter: Meter | undefined = config.securityEnabled ? engine.gate : undefined;
  const service: RouterPlan[] = [
    { options: { cors, answerOtherMethods: true, guard, meter }, mounts: [mountBlobApi, mountUploadsApi, mountUsageApi] },
    { options: { cors, answerOtherMethods: true, guard, meter }, mounts: [mountGcApi, mountNodesApi] },
    { options: { cors, answerOtherMethods: true, guard, meter, headers: TUS_HEADERS, discovery: tusDiscovery(config.maxUploadBytes) }, mounts: [mountTusApi] },
    { options: { guard: engine.tokens, meter, before: documentsGate(engine) }, mounts: [mountDocsApi, mountLegacyApi] },
    // CORS as everywhere (the event stream included): any origin with security off, the listed ones with it on.
    { options: { cors, guard }, mounts: [mountOpsApi, mountServiceDescription, (router) => mountNotFound(router, routers)] },
  ];
  /** Listener 1's routers, filled below: its 404 names the closest of all their routes. */
  const routers: Router[] = [];
  const surface = apiSurface(ctx);
  const modelSurfaceOf = modelSurface(ctx.modelMetrics, log, config.httpLingerBytes);
  return {
    service: service.map((plan) => {
      const router = mountPlan(new Router(app, surface, plan.options), plan, ctx);
      routers.push(router);
      return router;
    }),
    model: [mountPlan(new Router(modelApp, modelSurfaceOf, { guard }), { options: {}, mounts: [mountModelApi] }, ctx)],
  };
}

function mountPlan(router: Router, plan: RouterPlan, ctx: ServerContext): Router {
  for (const mount of plan.mounts) mount(router, ctx);
  router.answerOtherMethods();
  return router;
}

/** Listener 1's answer to a request no route took: it names the closest route of `routers`, if one is close. */
function mountNotFound(router: Router, routers: readonly Router[]): void {
  // Gathered at the first 404: every router is mounted by then.
  let table: Router['routes'] | undefined;
  router.fallback('/*', ({ ex, req }) => {
    const path = req.getUrl();
    const hint = routeHint((table ??= routers.flatMap((r) => r.routes)), ex.method, path);
    ex.json(404, { error: 'not_found', message: `No route for ${ex.method} ${path}${hint}` });
  });
}
