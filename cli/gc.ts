// `svc gc [mark|quarantine|purge|run] [--apply] [--min-age DURATION] [--quarantine-age DURATION]`: asks the server to run garbage collection
// (POST /api/ops/v1/gc) and prints its report as JSON. Dry run unless --apply.

import { SERVER_OPTION, parseArgs, serverUrl, stringOption } from './args.js';
import { ApiError, UsageError, describe } from './errors.js';
import { type Reply, call, readJson } from './http.js';
import { Backoff, retryBudgetMs } from './retry.js';

const PHASES = ['mark', 'quarantine', 'purge', 'run'];
/** A run over millions of blocks answers only when it is done. */
const RUN_TIMEOUT_MS = 6 * 3600_000;

export async function gc(argv: string[]): Promise<number> {
  const parsed = parseArgs(argv, [SERVER_OPTION, { name: 'apply', value: false }, { name: 'min-age', value: true }, { name: 'quarantine-age', value: true }]);
  if (parsed.positionals.length > 1) throw new UsageError('gc takes at most one phase');
  const phase = parsed.positionals[0] ?? 'run';
  if (!PHASES.includes(phase)) throw new UsageError(`gc: the phase must be one of ${PHASES.join(', ')}`);
  const apply = parsed.options.get('apply') === true;
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
  const report = await readJson(reply);
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  return 0;
}
