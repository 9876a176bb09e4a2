// What each listener serves: the routers of listener 1 (blob API, uploads, GC and nodes, the
// document platform and legacy repositories, the operator routes, the API description) and of the
// model listener, mounted on their apps in order. serve() (main.ts) calls it with the started
// engine; test/openapi.test.ts calls it with an app that only records, to compare the routers'
// tables with the OpenAPI documents.

import type { TemplatedApp } from 'uWebSockets.js';
import type { Config } from '../engine/config.js';
import type { Engine } from '../engine/engine.js';
import type { Logger } from '../engine/log.js';
import { VERSION } from '../engine/version.js';
import { MODEL_API, SERVICE_API, mountApiDescription } from './api-docs.js';
import { type ServerContext, apiSurface, corsPolicy } from './api-surface.js';
import { mountBlobApi } from './blob-api.js';
import { mountDocsApi, mountDocumentsElsewhere } from './docs-api.js';
import { mountGcApi } from './gc-api.js';
import { mountLegacyApi } from './legacy-api.js';
import { modelSurface, mountModelApi } from './model-api.js';
import { ModelMetrics } from './model-metrics.js';
import { mountNodesApi } from './nodes-api.js';
import { mountOpsApi } from './ops-api.js';
import { type Meter, Router } from './router.js';
import { mountUploadsApi } from './uploads-api.js';

export interface ListenerRouters {
  /** Listener 1 (SVC_HTTP_PORT), in mount order. */
  service: Router[];
  /** The model listener (HTTP_PORT). */
  model: Router[];
}

export function mountListeners(app: TemplatedApp, modelApp: TemplatedApp, engine: Engine, config: Config, log: Logger): ListenerRouters {
  const ctx: ServerContext = { engine, metrics: engine.metrics };
  const surface = apiSurface(ctx);
  // With security on, every route that names a capability needs a bearer token that holds it.
  const guard = config.securityEnabled ? engine.tokens : undefined;
  const cors = corsPolicy(config);
  // With security on, the tenant policy's budgets: requests and bytes per principal, operations per tenant.
  const meter: Meter | undefined = config.securityEnabled
    ? {
        request: (p) => engine.budgets.chargeRequest(p.tenant, p.subject),
        admit: (p) => engine.budgets.admit(p.tenant),
        bytes: (p, bytes) => engine.budgets.chargeBytes(p.tenant, p.subject, bytes),
      }
    : undefined;
  const blobRoutes = new Router(app, surface, { cors, answerOtherMethods: true, guard, meter });
  mountBlobApi(blobRoutes, ctx);
  mountUploadsApi(blobRoutes, ctx);
  blobRoutes.answerOtherMethods();
  const gcRoutes = new Router(app, surface, { cors, answerOtherMethods: true, guard, meter });
  mountGcApi(gcRoutes, ctx);
  mountNodesApi(gcRoutes, ctx);
  gcRoutes.answerOtherMethods();
  // The document platform and legacy repositories need a bearer token with security on or off
  // (docs/documents.md); their budgets are the blob API's.
  const documentRoutes = new Router(app, surface, { guard: engine.tokens, meter });
  // s3: the document platform is one node's (engine/store/s3-only/documents-node.ts); the others refuse it whole.
  const documentsNode = engine.backend.documentsNode;
  if (documentsNode !== undefined && documentsNode !== engine.nodeId) mountDocumentsElsewhere(documentRoutes, documentsNode);
  else mountDocsApi(documentRoutes, ctx, { docs: engine.documents, bulkMigrations: engine.bulkMigrations, views: engine.views, workflows: engine.workflows, viewWaitMs: config.views.waitMs, tokens: engine.tokens, maxJsonBytes: config.docMaxJsonBytes });
  mountLegacyApi(documentRoutes, engine.legacy, { service: documentsNode === undefined || documentsNode === engine.nodeId ? engine.legacyImports : undefined, maxJsonBytes: config.docMaxJsonBytes });
  const routes = new Router(app, surface, { guard });
  mountOpsApi(routes, ctx);
  // GET /openapi.json and /docs: public, as the model listener's.
  mountApiDescription(routes, SERVICE_API, VERSION, (ex, req) => ex.json(404, { error: 'not_found', message: `No route for ${ex.method} ${req.getUrl()}` }));
  routes.fallback('/*', ({ ex, req }) => ex.json(404, { error: 'not_found', message: `No route for ${ex.method} ${req.getUrl()}` }));
  const modelMetrics = new ModelMetrics(engine.models, engine.metrics.registry);
  // The same guard: the same tokens, capabilities model.read, model.write and observability.read.
  const modelRoutes = new Router(modelApp, modelSurface(modelMetrics, log, config.httpLingerBytes), { guard });
  mountModelApi(modelRoutes, engine.models, modelMetrics, VERSION, MODEL_API);
  return { service: [blobRoutes, gcRoutes, documentRoutes, routes], model: [modelRoutes] };
}
