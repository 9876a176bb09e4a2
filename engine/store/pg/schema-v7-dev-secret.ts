// Version 7: the generated development secret (SVC_DEV_SHARED_SECRET unset), shared by every node
// so that a development token minted on one verifies on all (engine/store/pg/dev-secret.ts). The
// first node to start inserts it; the others read that one.
export const V7_DEV_SECRET = `
CREATE TABLE dev_secret (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  secret text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
`;
