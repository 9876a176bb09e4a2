// The job task of legacy imports (engine/legacy/import.ts). The import's work is on the main
// thread (its `prepare` streams the binary through the ingest and ends the attempt with `done`),
// so this task only hands back what `prepare` prepared, should a prepare ever hand over.

import type { JobTaskPayload } from '../engine/jobs/task-runner.js';

export function passPrepared(payload: JobTaskPayload): unknown {
  return payload.prepared;
}
