// A node without its HTTP listeners, for the tests that run several pg-s3 nodes as processes
// under clocks of their own (test/pg-clock.test.ts, libfaketime): the composition root
// (Engine.open) configured from the environment's SVC_* variables, the job queue tests' kinds on
// its queue (test/helpers/job-kinds.mjs). With argv[2] (JSON { kind, input }) it enqueues that
// job and prints {"jobId"}; then prints {"ready": <its queue's owner>, "clock": <readiness' clock
// check>}. Closes when its stdin ends.
import { loadConfig } from '../../dist/engine/base/config.js';
import { Engine } from '../../dist/engine/engine.js';
import { Logger } from '../../dist/engine/base/log.js';
import { defineKinds } from './job-kinds.mjs';

const print = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);
const engine = await Engine.open(loadConfig(process.env), new Logger('warn'));
defineKinds(engine.jobs);
if (process.argv[2]) {
  const { kind, input } = JSON.parse(process.argv[2]);
  const job = await engine.jobs.enqueue('tenant-a', kind, input);
  print({ jobId: job.jobId });
}
print({ ready: engine.jobs.owner, clock: engine.health.clockCheck() });
process.stdin.resume();
process.stdin.on('end', () => void engine.close().then(() => process.exit(0)));
