// A search by metadata as POST /v1/documents/search asks it (docs/documents.md, "Search"): the
// body is parsed at the edge (server/commands/documents.ts) into this query.

export type SearchValue = string | number | boolean;

export interface SearchQuery {
  namespaceUrn: string;
  /** [pointer, value] in the body's order: the first pointer's range is the one scanned. */
  where: Array<[string, SearchValue]>;
  mode: 'canonical' | 'derived';
  limit: number;
  cursor?: string;
}
