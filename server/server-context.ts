// What every route file is given, and the one signature by which it is mounted: a route file
// exports `mount…: MountRoutes`, takes what it needs from the context, and registers its routes
// on the router it is handed (server/listeners.ts decides which router: its guard, meter, CORS).

import type { Config } from '../engine/base/config.js';
import type { Engine } from '../engine/engine.js';
import type { Logger } from '../engine/base/log.js';
import type { Health, Metrics } from '../engine/ops/index.js';
import type { TenantUsage } from '../engine/tenancy/index.js';
import type { ModelMetrics } from './model-metrics.js';
import type { Router } from './router.js';

export interface ServerContext {
  engine: Engine;
  config: Config;
  log: Logger;
  /** The service's metrics (the process's one registry). */
  metrics: Metrics;
  /** The model runtime's metrics, under the reference runtime's names, in the same registry. */
  modelMetrics: ModelMetrics;
  /** The engine's services a route file may be handed alone (engine.health, engine.tenantUsage). */
  health: Health;
  tenantUsage: TenantUsage;
}

export type MountRoutes = (router: Router, ctx: ServerContext) => void;
