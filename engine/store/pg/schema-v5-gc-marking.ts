// Version 5: a GC run's marking across nodes (engine/gc/shared-collector.ts). Roots that live in
// one node's data directory (document content) or memory (the blocks of staged tails it holds)
// can only be read by that node: a run opens an epoch, every live node adds its roots to
// gc_marks and records the epoch it marked for, and the run chooses candidates only once every
// node seen within SVC_NODE_TTL has marked (or stopped beating).
export const V5_GC_MARKING = `
CREATE TABLE gc_marking (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  epoch bigint NOT NULL,
  open boolean NOT NULL
);
INSERT INTO gc_marking (epoch, open) VALUES (0, false);

ALTER TABLE nodes ADD COLUMN marked_epoch bigint NOT NULL DEFAULT 0;
`;
