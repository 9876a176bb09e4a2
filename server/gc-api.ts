// The operator endpoint of garbage collection (engine/gc): GET the state, POST a run.
//   GET  /api/ops/v1/gc                                          { running, current?, lastRun?, ... }
//   POST /api/ops/v1/gc?phase=mark|quarantine|purge|run&apply=true|false   the run's report
//        [&minAge=DURATION&quarantineAge=DURATION]   this run's ages instead of the configured ones
// One run at a time: 409 gc_running otherwise. Dry run unless apply=true.

import type { TemplatedApp } from 'uWebSockets.js';
import { GC_PHASES, type GcPhase } from '../engine/gc/gc.js';
import { parseDuration } from '../engine/config.js';
import { SvcError } from '../engine/errors.js';
import { Exchange, type ServerContext, query } from './http.js';

const ROUTE = '/api/ops/v1/gc';
const invalid = (message: string) => new SvcError(400, 'invalid_request', message);
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

export function mountGcApi(app: TemplatedApp, ctx: ServerContext): void {
  const { engine } = ctx;

  app.get(ROUTE, (res, req) => {
    const ex = new Exchange(res, req, ROUTE, ctx);
    try {
      ex.json(200, engine.gc.state(), { 'Cache-Control': 'no-store' });
    } catch (err) {
      ex.error(err);
    }
  });

  app.post(ROUTE, (res, req) => {
    const ex = new Exchange(res, req, ROUTE, ctx);
    // A body, if any, is not used.
    ex.body.read(() => {});
    try {
      const q = query(req);
      for (const name of q.keys()) if (!PARAMETERS.includes(name)) throw invalid(`Unknown parameter ${name}`);
      const phase = (q.get('phase') ?? 'run') as GcPhase;
      if (!GC_PHASES.includes(phase)) throw invalid(`phase must be one of ${GC_PHASES.join(', ')}`);
      const rawApply = q.get('apply') ?? 'false';
      if (rawApply !== 'true' && rawApply !== 'false') throw invalid('apply must be true or false');
      const ages = { minAgeMs: age(q, 'minAge'), quarantineAgeMs: age(q, 'quarantineAge') };
      engine.gc.run(phase, rawApply === 'true', 'api', ages).then(
        (report) => ex.json(200, report, { 'Cache-Control': 'no-store' }),
        (err) => ex.error(err),
      );
    } catch (err) {
      ex.error(err);
    }
  });

  app.any(ROUTE, (res, req) => {
    const ex = new Exchange(res, req, ROUTE, ctx);
    ex.error(new SvcError(405, 'method_not_allowed', `${req.getCaseSensitiveMethod()} is not allowed here`, { Allow: 'GET, POST' }));
  });
}
