// Search by metadata (POST /v1/documents/search): owner of the `doc_meta_index` table, written
// only inside the units of work that write the entries it indexes (a canonical version, a valid
// derived entry), so it is exact on every backend. Per (tenant, namespace, mode) of an entry:
//   ['v', tenant, ns, mode, pointer, value, documentId]   each scalar leaf of the entry's data
//   ['s', tenant, ns, mode, schemaUrn, documentId]         the schema the entry is on
//   ['e', tenant, ns, mode, documentId]                    the document has an entry (empty `where`)
// mode is 'c' (canonical: the current version's entry) or 'd' (the valid derived entry). A leaf's
// pointer is its RFC 6901 JSON pointer (array elements by index: /tags/0); its value a typed token
// (`s:<string>`, `n:<JSON number>`, `b:true`), so 1 and "1" differ. A pointer or token longer
// than 128 characters, or with a control character, is kept as `h:<sha-256>` of itself (equality
// still holds: a query's side is hashed alike). Within one value, keys sort by documentId
// (UUIDv7: about creation order), so every key range of a query is in the same order and a page
// goes on after the last documentId it scanned, whichever pointer is scanned.
import { createHash } from 'node:crypto';
import type { ListCursors } from '../auth/index.js';
import { invalidCursor } from '../base/errors.js';
import { type Table, type Unit, type UnitStore, table } from '../store/index.js';
import type { SearchQuery } from './search-request.js';
import { INDEX_MAX_LEAVES } from '../base/limits.js';

type IndexKey = Array<string | number>;

export type IndexMode = 'c' | 'd';

/** What the index knows of an entry: its schema and its data. */
export interface IndexedEntry {
  schema: string;
  data: Record<string, unknown>;
}

/** One (namespace, mode) entry of a document, as the backfill finds it. */
export interface CurrentEntry {
  namespaceUrn: string;
  mode: IndexMode;
  entry: IndexedEntry;
}

/** Scalar leaves indexed per entry (engine/base/limits.ts). */
export const MAX_LEAVES = INDEX_MAX_LEAVES;
const MAX_TOKEN = 128;
const BUILT: IndexKey = ['~built'];
/** The high end of a range of documentIds (UUIDs sort below it). */
const HIGH = '\uffff';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** A pointer or value token as it is stored: hashed when long or with a control character. */
function stored(token: string): string {
  // eslint-disable-next-line no-control-regex
  return token.length > MAX_TOKEN || /[\u0000-\u001f]/.test(token) ? `h:${sha256(token)}` : token;
}

/** The typed token of a scalar (undefined: not indexed, e.g. null). */
export function valueToken(value: unknown): string | undefined {
  if (typeof value === 'string') return stored(`s:${value}`);
  if (typeof value === 'number') return Number.isFinite(value) ? stored(`n:${JSON.stringify(value)}`) : undefined;
  if (typeof value === 'boolean') return value ? 'b:true' : 'b:false';
  return undefined;
}

export const pointerToken = (pointer: string): string => stored(pointer);

const escapeSegment = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * Every scalar leaf of `data`: stored pointer token → stored value token (an explicit stack: depth
 * is unbounded); undefined when there are more than MAX_LEAVES (the entry is then searched by
 * reading it, see `search`).
 */
export function leaves(data: unknown): Map<string, string> | undefined {
  const out = new Map<string, string>();
  const stack: Array<[string, unknown]> = [['', data]];
  while (stack.length > 0) {
    const [pointer, value] = stack.pop()!;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) stack.push([`${pointer}/${i}`, value[i]]);
    } else if (typeof value === 'object' && value !== null) {
      for (const [k, v] of Object.entries(value)) stack.push([`${pointer}/${escapeSegment(k)}`, v]);
    } else {
      const token = valueToken(value);
      if (token === undefined) continue;
      if (out.size === MAX_LEAVES) return undefined;
      out.set(pointerToken(pointer), token);
    }
  }
  return out;
}

/** The value `pointer` (RFC 6901) names in `data`, or undefined. */
function valueAt(data: unknown, pointer: string): unknown {
  let at: unknown = data;
  for (const raw of pointer.split('/').slice(1)) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(at)) at = /^(0|[1-9]\d*)$/.test(segment) ? at[Number(segment)] : undefined;
    else if (typeof at === 'object' && at !== null && Object.hasOwn(at, segment)) at = (at as Record<string, unknown>)[segment];
    else return undefined;
  }
  return at;
}

/** Whether `data` has every pointer of `where` equal to its value (strict typed JSON equality, as the index). */
export function matchesWhere(data: unknown, where: ReadonlyArray<readonly [string, unknown]>): boolean {
  return where.every(([pointer, value]) => {
    const token = valueToken(valueAt(data, pointer));
    return token !== undefined && token === valueToken(value);
  });
}

/** One page of a search: the accepted items and where the next page starts. */
export interface SearchPage<T> {
  items: T[];
  nextCursor?: string;
}

export class MetadataIndex {
  private readonly db: Table<true, IndexKey> = table<true, IndexKey>('doc_meta_index');

  constructor(private readonly store: UnitStore) {}

  /**
   * In the unit that replaces a document's entry of (`namespaceUrn`, `mode`): the keys of
   * `before` that `after` no longer has go, those it adds come (a patch of one field writes two
   * keys). Absent `before`: a new entry; absent `after`: the entry went.
   */
  changed(unit: Unit, tenant: string, documentId: string, namespaceUrn: string, mode: IndexMode, before?: IndexedEntry, after?: IndexedEntry): void {
    const old = before ? leaves(before.data) : new Map<string, string>();
    const now = after ? leaves(after.data) : new Map<string, string>();
    for (const [pointer, value] of old ?? []) if (now?.get(pointer) !== value) unit.remove(this.db, ['v', tenant, namespaceUrn, mode, pointer, value, documentId]);
    for (const [pointer, value] of now ?? []) if (old?.get(pointer) !== value) unit.put(this.db, ['v', tenant, namespaceUrn, mode, pointer, value, documentId], true);
    if (!old !== !now) {
      if (!now) unit.put(this.db, ['o', tenant, namespaceUrn, mode, documentId], true);
      else unit.remove(this.db, ['o', tenant, namespaceUrn, mode, documentId]);
    }
    if (before?.schema !== after?.schema) {
      if (before) unit.remove(this.db, ['s', tenant, namespaceUrn, mode, before.schema, documentId]);
      if (after) unit.put(this.db, ['s', tenant, namespaceUrn, mode, after.schema, documentId], true);
    }
    if (!before !== !after) {
      if (after) unit.put(this.db, ['e', tenant, namespaceUrn, mode, documentId], true);
      else unit.remove(this.db, ['e', tenant, namespaceUrn, mode, documentId]);
    }
  }

  /**
   * Indexes a catalog from before this index, until its `~built` marker is written (last; a
   * start after a crash midway begins again, the writes being the same). Each unit of a few
   * hundred documents reads their current entries in the unit (`current`), so a write that
   * commits meanwhile makes it run again on what that write left.
   */
  async backfill(documents: AsyncIterable<{ tenant: string; documentId: string }>, current: (unit: Unit, tenant: string, documentId: string) => Promise<CurrentEntry[]>): Promise<void> {
    if (await this.store.has(this.db, BUILT)) return;
    let batch: Array<{ tenant: string; documentId: string }> = [];
    const flush = async () => {
      const docs = batch;
      batch = [];
      if (docs.length === 0) return;
      await this.store.run(async (unit) => {
        for (const { tenant, documentId } of docs) {
          for (const e of await current(unit, tenant, documentId)) this.changed(unit, tenant, documentId, e.namespaceUrn, e.mode, undefined, e.entry);
        }
      });
    };
    for await (const doc of documents) {
      batch.push(doc);
      if (batch.length === 256) await flush();
    }
    await flush();
    await this.store.run((unit) => unit.put(this.db, BUILT, true));
  }

  /** Whether the index is built (the backfill's marker). */
  built(): Promise<boolean> {
    return this.store.has(this.db, BUILT);
  }

  /**
   * Up to `limit` documentIds of the tenant whose entry of (`namespaceUrn`, `mode`) is on
   * `schemaUrn`, in documentId order, after `afterDocumentId` (a bulk migration's pages).
   */
  async documentsOnSchema(tenant: string, namespaceUrn: string, mode: IndexMode | 'canonical' | 'derived', schemaUrn: string, limit: number, afterDocumentId?: string): Promise<string[]> {
    const prefix: IndexKey = ['s', tenant, namespaceUrn, mode === 'derived' || mode === 'd' ? 'd' : 'c', schemaUrn];
    const ids: string[] = [];
    const start = afterDocumentId === undefined ? prefix : [...prefix, afterDocumentId];
    for (const { key } of await this.store.range(this.db, { start, end: [...prefix, HIGH], limit: limit + 1 })) {
      const id = key[prefix.length] as string;
      if (key.length !== prefix.length + 1 || id === afterDocumentId) continue;
      if (ids.length === limit) break;
      ids.push(id);
    }
    return ids;
  }

  /**
   * A page of `query` for `tenant`: one range scan of the first pointer's value (of every entry
   * where `where` is empty) after the cursor, at most `limit * 4 + 16` keys; each candidate is
   * checked on the other pointers by point reads, then offered to `accept` (the document's
   * record and the reader's rights), which answers the item or undefined (left out). There is a
   * `nextCursor` when the page filled or the budget ended the scan: the last documentId scanned
   * (perhaps one the reader may not see), sealed by `cursors` for the reader and this query, so
   * it names no document.
   */
  async search<T>(
    tenant: string,
    query: SearchQuery,
    accept: (documentId: string) => Promise<T | undefined>,
    entryOf: (documentId: string) => Promise<Record<string, unknown> | undefined>,
    cursors: ListCursors,
  ): Promise<SearchPage<T>> {
    const mode: IndexMode = query.mode === 'derived' ? 'd' : 'c';
    const tokens = query.where.map(([pointer, value]) => [pointerToken(pointer), valueToken(value)!] as const);
    // The query a cursor is bound to: namespace, mode and the pointers in any order.
    const queryId = sha256(JSON.stringify([query.namespaceUrn, mode, tokens.map((t) => `${t[0]}\u0000${t[1]}`).sort()]));
    const after = cursors.open(queryId, query.cursor);
    if (after !== undefined && !/^[0-9a-f-]{36}$/.test(after)) throw invalidCursor();
    // The whole data is an object: no leaf is at pointer "".
    if (query.where.some(([pointer]) => pointer === '')) return { items: [] };
    const [first, ...rest] = tokens;
    const budget = query.limit * 4 + 16;
    // One more than the budget tells whether there is more; one more again for the cursor's own key.
    const ids = async (prefix: IndexKey) => {
      const out: string[] = [];
      for (const { key } of await this.store.range(this.db, { start: after === undefined ? prefix : [...prefix, after], end: [...prefix, HIGH], limit: budget + 2 })) {
        const documentId = key[prefix.length] as string;
        if (key.length === prefix.length + 1 && documentId !== after) out.push(documentId);
      }
      return out;
    };
    const indexed = await ids(first ? ['v', tenant, query.namespaceUrn, mode, first[0], first[1]] : ['e', tenant, query.namespaceUrn, mode]);
    // Entries with too many leaves to index are read and checked (every entry has an `e` key, so none for an empty where).
    const unindexed = first ? new Set(await ids(['o', tenant, query.namespaceUrn, mode])) : new Set<string>();
    const candidates = unindexed.size ? [...indexed, ...unindexed].sort() : indexed;
    const items: T[] = [];
    let scanned = 0;
    let last: string | undefined;
    for (const documentId of candidates) {
      if (scanned === budget || items.length === query.limit) return { items, nextCursor: cursors.seal(queryId, last!) };
      scanned++;
      last = documentId;
      let matches = true;
      if (unindexed.has(documentId)) {
        const data = await entryOf(documentId);
        matches = data !== undefined && matchesWhere(data, query.where);
      } else {
        for (const [pointer, value] of rest) {
          if (!(await this.store.has(this.db, ['v', tenant, query.namespaceUrn, mode, pointer, value, documentId]))) {
            matches = false;
            break;
          }
        }
      }
      if (!matches) continue;
      const item = await accept(documentId);
      if (item !== undefined) items.push(item);
    }
    return { items };
  }
}
