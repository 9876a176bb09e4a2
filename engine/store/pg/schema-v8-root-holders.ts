// Version 8: root holders (engine/gc/shared-collector.ts). A node whose data directory holds
// references to blocks that only it can mark (document content, views, legacy imports) records
// since when; GC runs then quarantine and purge nothing while it has not marked its roots for
// them, live or down. `svc nodes forget` (only for a node that is down) sets `forgotten_at` and
// clears the holder: the node leaves the list until it beats again.
export const V8_ROOT_HOLDERS = `
ALTER TABLE nodes ADD COLUMN IF NOT EXISTS root_holder_since bigint;
ALTER TABLE nodes ADD COLUMN IF NOT EXISTS forgotten_at bigint;
`;
