// Version 2: what the pg-s3 collector keeps (engine/store/pg/gc-catalog.ts): the mark set of the
// run in progress (one run at a time across nodes, under an advisory lock), the runs' reports,
// and the nodes' heartbeats with the start of each node's oldest open upload (the purge fence).
export const V2_GC = `
CREATE UNLOGGED TABLE gc_marks (key bytea PRIMARY KEY);

CREATE TABLE gc_runs (
  run_id uuid PRIMARY KEY,
  finished_at bigint NOT NULL,
  report jsonb NOT NULL
);
CREATE INDEX gc_runs_by_time ON gc_runs (finished_at DESC);

CREATE TABLE nodes (
  node_id text PRIMARY KEY,
  address text NOT NULL,
  last_seen_at bigint NOT NULL,
  oldest_ingest_at bigint
);

-- Quarantined blocks waiting for their stamp (moved, not yet stamped) are found by GC.
CREATE INDEX blocks_quarantined ON blocks (quarantined_at) WHERE state = 'quarantined';
`;
