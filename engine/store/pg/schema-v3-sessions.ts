// Version 3: resumable upload sessions (engine/store/pg/upload-catalog.ts), shared by every node so
// that a part, a commit or a cancel may reach any of them. The record is the session's state as
// JSON; `state` and `tenant` are columns too, for the collector's mark step and for cleanup.
export const V3_SESSIONS = `
CREATE TABLE upload_sessions (
  id uuid PRIMARY KEY,
  tenant text NOT NULL,
  state text NOT NULL,
  record jsonb NOT NULL
);
CREATE INDEX upload_sessions_live ON upload_sessions (id) WHERE state IN ('Open', 'Committing');

-- A part's blocks packed as in the embedded catalog: per block its SHA-256 (32 bytes), xxh64
-- (8), size (4) and whether it was fresh (1).
CREATE TABLE upload_parts (
  session_id uuid NOT NULL REFERENCES upload_sessions (id) ON DELETE CASCADE,
  idx integer NOT NULL,
  part_id text NOT NULL,
  part_offset bigint NOT NULL,
  length bigint NOT NULL,
  blocks bytea NOT NULL,
  PRIMARY KEY (session_id, idx),
  UNIQUE (session_id, part_id)
);
`;
