// `svc gc [mark|quarantine|purge|run] [--apply] [--min-age DURATION] [--quarantine-age DURATION]`: asks the server to run garbage collection
// (POST /api/ops/v1/gc) and prints its report as JSON. Dry run unless --apply.

import { type Command, type Parsed, SERVER_OPTION, flag, serverUrl, stringOption } from './args.js';
import { ApiError, UsageError, describe } from './errors.js';
import { type Reply, call, readJson } from './http.js';
import { Backoff, retryBudgetMs } from './retry.js';

const PHASES = ['mark', 'quarantine', 'purge', 'run'];
/** A run over millions of blocks answers only when it is done. */
const RUN_TIMEOUT_MS = 6 * 3600_000;

export const gc: Command = {
  usage: `  svc gc [mark|quarantine|purge|run] [--apply] [--min-age DURATION] [--quarantine-age DURATION]
                   run garbage collection on the server (default: run, every phase) and print
                   its report as JSON; a dry run unless --apply; the ages (e.g. 0s) replace
                   SVC_GC_MIN_AGE and SVC_GC_QUARANTINE_AGE for this run only, logged by the server;
                   exit 1 when root holders that are down held the run back (svc nodes)
`,
  options: { ...SERVER_OPTION, apply: { type: 'boolean' }, 'min-age': { type: 'string' }, 'quarantine-age': { type: 'string' } },
  run: collectGarbage,
};

async function collectGarbage(parsed: Parsed): Promise<number> {
  if (parsed.positionals.length > 1) throw new UsageError('gc takes at most one phase');
  const phase = parsed.positionals[0] ?? 'run';
  if (!PHASES.includes(phase)) throw new UsageError(`gc: the phase must be one of ${PHASES.join(', ')}`);
  const apply = flag(parsed, 'apply');
  const server = serverUrl(parsed);
  // Ages for this run only (the server checks and logs them): e.g. --min-age 0s to reclaim at once.
  let query = `phase=${phase}&apply=${apply}`;
  for (const [option, parameter] of [['min-age', 'minAge'], ['quarantine-age', 'quarantineAge']] as const) {
    const value = stringOption(parsed, option);
    if (value !== undefined) query += `&${parameter}=${encodeURIComponent(value)}`;
  }
  // Only failures to reach the server are retried: a run that answered 409 or 5xx is not repeated.
  const backoff = new Backoff((err, delay) => process.stderr.write(`svc gc: ${describe(err)}; retrying in ${(delay / 1000).toFixed(1)} s\n`), Math.min(retryBudgetMs(), 15_000));
  let reply: Reply;
  for (;;) {
    try {
      reply = await call(server, `/api/ops/v1/gc?${query}`, [200], { method: 'POST', timeoutMs: RUN_TIMEOUT_MS });
      break;
    } catch (err) {
      // An answer (409 gc_running, 5xx) is reported, not retried: only an unreachable server is.
      if (err instanceof ApiError) throw err;
      await backoff.wait(err);
    }
  }
  const report = await readJson<{ heldBack?: { reason: string } }>(reply);
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  // Root holders that are down kept the run from collecting anything: a failure to act on.
  if (report.heldBack) {
    process.stderr.write(`svc gc: held back: ${report.heldBack.reason}\n`);
    return 1;
  }
  return 0;
}
