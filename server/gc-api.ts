// The operator endpoint of garbage collection (engine/gc): GET the state, POST a run.
//   GET  /api/ops/v1/gc                                          { running, current?, lastRun?, ... }
//   POST /api/ops/v1/gc?phase=mark|quarantine|purge|run&apply=true|false   the run's report
//        [&minAge=DURATION&quarantineAge=DURATION]   this run's ages instead of the configured ones
// One run at a time: 409 gc_running otherwise. Dry run unless apply=true.

import { GC_PHASES, type GcPhase } from '../engine/gc/index.js';
import { parseDuration } from '../engine/base/config.js';
import { SvcError } from '../engine/base/errors.js';
import type { ServerContext } from './server-context.js';
import type { Router } from './router.js';

const ROUTE = '/api/ops/v1/gc';
const invalid = (message: string) => new SvcError('invalid', 'invalid_request', message);
const PARAMETERS = ['phase', 'apply', 'minAge', 'quarantineAge'];

/** `minAge` / `quarantineAge`: a duration with a unit (`0s`, `15m`, `24h`) for this run only. */
function age(q: URLSearchParams, name: string): number | undefined {
  const raw = q.get(name);
  if (raw === null) return undefined;
  try {
    return parseDuration(name, raw);
  } catch (err) {
    throw invalid((err as Error).message);
  }
}

export function mountGcApi(router: Router, { engine }: ServerContext): void {
  router.on('GET', ROUTE, ({ ex }) => ex.json(200, engine.gc.state(), { 'Cache-Control': 'no-store' }), { capability: 'observability.read' });

  router.on('POST', ROUTE, async ({ ex, query }) => {
    // A body, if any, is not used.
    ex.body.read(() => {});
    for (const name of query.keys()) if (!PARAMETERS.includes(name)) throw invalid(`Unknown parameter ${name}`);
    const phase = (query.get('phase') ?? 'run') as GcPhase;
    if (!GC_PHASES.includes(phase)) throw invalid(`phase must be one of ${GC_PHASES.join(', ')}`);
    const rawApply = query.get('apply') ?? 'false';
    if (rawApply !== 'true' && rawApply !== 'false') throw invalid('apply must be true or false');
    const ages = { minAgeMs: age(query, 'minAge'), quarantineAgeMs: age(query, 'quarantineAge') };
    ex.json(200, await engine.gc.run(phase, rawApply === 'true', 'api', ages), { 'Cache-Control': 'no-store' });
  }, { capability: 'gc.run' });
}
