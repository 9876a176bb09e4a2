// Schema v10 (issue 26): what each node says of itself at its heartbeat (traffic, capacity,
// health), so that any node's ops snapshot and dashboard show the cluster.
export const V10_NODE_SUMMARY = `
ALTER TABLE nodes ADD COLUMN summary jsonb;
`;
