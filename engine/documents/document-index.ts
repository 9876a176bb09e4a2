// The order documents are listed in, newest first, and the indexes of the list's filters, in one
// LMDB database (`doc_index`) written in the same transactions as the documents and labels:
//   ['t', tenant, createdAt, documentId]                      every document
//   ['l', tenant, label, createdAt, documentId]               a label any of its versions got
//   ['x', tenant, SHA-256(system NUL value), createdAt, documentId]   an external reference
// (hashed: a reference may be far longer than an LMDB key; labels are at most 64 characters).
// A page is one reverse range scan of the most selective of them, so it costs O(page), not a scan
// of the tenant's documents.
import { createHash } from 'node:crypto';
import { decodeCursor, encodeCursor } from '../cas/index.js';
import { invalidPagination } from '../errors.js';
import type { OrderedTable, TableCatalog } from '../store/index.js';
import type { DocumentRecord, ExternalRef } from './model.js';

type IndexKey = Array<string | number>;

export interface DocumentFilter {
  label?: string;
  externalRef?: ExternalRef;
  /** Exclusive bounds on createdAt, ms since the epoch. */
  createdAfter?: number;
  createdBefore?: number;
}

/** One candidate of a page: the caller still checks the other filters and the reader's rights. */
interface IndexEntry {
  documentId: string;
  createdAt: number;
  /** Where a page that ends with this entry goes on (`encode`). */
  key: IndexKey;
}

const LATEST = 8.64e15;
const CURSOR_KIND = 'doc1';

const refKey = (ref: ExternalRef) => createHash('sha256').update(`${ref.system}\u0000${ref.value}`).digest('hex');

export class DocumentIndex {
  private readonly db: OrderedTable<true, IndexKey>;

  constructor(env: TableCatalog) {
    this.db = env.table<true, IndexKey>('doc_index');
  }

  /** Builds the index of a catalog from before it, once (the database is then never empty). */
  backfill(documents: Iterable<DocumentRecord>, labels: Iterable<[tenant: string, documentId: string, label: string]>): void {
    if (this.db.getKeysCount({ limit: 1 }) > 0) return;
    this.db.transactionSync(() => {
      const created = new Map<string, number>();
      for (const doc of documents) {
        this.addDocument(doc);
        created.set(`${doc.tenant}\u0000${doc.documentId}`, doc.createdAt);
      }
      for (const [tenant, documentId, label] of labels) {
        const at = created.get(`${tenant}\u0000${documentId}`);
        if (at !== undefined) this.addLabel(tenant, documentId, at, label);
      }
    });
  }

  /** Inside the document's creating transaction. */
  addDocument(doc: DocumentRecord): void {
    this.db.put(['t', doc.tenant, doc.createdAt, doc.documentId], true);
    for (const ref of doc.externalRefs) this.db.put(['x', doc.tenant, refKey(ref), doc.createdAt, doc.documentId], true);
  }

  /** Inside the transaction that gives a version of the document `label`. */
  addLabel(tenant: string, documentId: string, createdAt: number, label: string): void {
    this.db.put(['l', tenant, label, createdAt, documentId], true);
  }

  /**
   * Up to `budget` candidates, newest first, from the most selective index of `filter`, after
   * `cursor`; `more` when the budget ended the scan.
   */
  scan(tenant: string, filter: DocumentFilter, budget: number, cursor?: string): { entries: IndexEntry[]; more: boolean } {
    const prefix: IndexKey = filter.externalRef ? ['x', tenant, refKey(filter.externalRef)] : filter.label !== undefined ? ['l', tenant, filter.label] : ['t', tenant];
    const after = cursor === undefined ? undefined : this.decode(cursor, prefix);
    const start: IndexKey = after ?? [...prefix, filter.createdBefore ?? LATEST];
    const end: IndexKey = filter.createdAfter === undefined ? prefix : [...prefix, filter.createdAfter, '\uffff'];
    const entries: IndexEntry[] = [];
    for (const key of this.db.getKeys({ start, end, reverse: true })) {
      if (after && key.length === after.length && key.every((k, i) => k === after[i])) continue;
      if (entries.length === budget) return { entries, more: true };
      entries.push({ createdAt: key[key.length - 2] as number, documentId: key[key.length - 1] as string, key });
    }
    return { entries, more: false };
  }

  /** The opaque cursor of a `next` key; it only continues the same list (same index and filter value). */
  encode(next: IndexKey): string {
    return encodeCursor(CURSOR_KIND, JSON.stringify(next));
  }

  private decode(cursor: string, prefix: IndexKey): IndexKey {
    let key: unknown;
    try {
      key = JSON.parse(decodeCursor(CURSOR_KIND, cursor));
    } catch (err) {
      if (err instanceof SyntaxError) throw invalidPagination('cursor is not a token issued by this endpoint');
      throw err;
    }
    const ok = Array.isArray(key) && key.length === prefix.length + 2 && prefix.every((p, i) => key[i] === p) && typeof key[prefix.length] === 'number' && typeof key[prefix.length + 1] === 'string';
    if (!ok) throw invalidPagination('cursor does not belong to this list and filter');
    return key as IndexKey;
  }
}
