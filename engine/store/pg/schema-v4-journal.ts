// Version 4: the numbers of the journal's segments in the bucket (engine/store/s3/journal.ts), one
// sequence every node draws from, so that segment order is write order across nodes.
export const V4_JOURNAL = `
CREATE SEQUENCE journal_segment_seq;
`;
