// The order documents are listed in, newest first, and the indexes of the list's filters, in one
// table (`doc_index`) written in the same units of work as the documents and labels:
//   ['t', tenant, createdAt, documentId]                      every document
//   ['l', tenant, label, createdAt, documentId]               a label any of its versions got
//   ['x', tenant, SHA-256(system NUL value), createdAt, documentId]   an external reference
// (hashed: a reference may be far longer than a key should be; labels are at most 64 characters).
// A page is one reverse range scan of the most selective of them, so it costs O(page), not a scan
// of the tenant's documents.
import { createHash } from 'node:crypto';
import { invalidCursor } from '../base/errors.js';
import { type Table, type Unit, type UnitStore, table } from '../store/index.js';
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
  /** Where a page that ends with this entry goes on: its key after the index's prefix (the caller seals it in a cursor). */
  position: string;
}

const LATEST = 8.64e15;

const refKey = (ref: ExternalRef) => createHash('sha256').update(`${ref.system}\u0000${ref.value}`).digest('hex');

export class DocumentIndex {
  private readonly db: Table<true, IndexKey> = table<true, IndexKey>('doc_index');

  constructor(private readonly store: UnitStore) {}

  /**
   * Builds the index of a catalog from before it, once (the table is then never empty), in
   * units of a few hundred documents; the marker that ends it is written last.
   */
  async backfill(documents: AsyncIterable<DocumentRecord>, labelsOf: (doc: DocumentRecord) => Promise<string[]>): Promise<void> {
    if ((await this.store.range(this.db, { limit: 1 })).length > 0) return;
    let batch: Array<{ doc: DocumentRecord; labels: string[] }> = [];
    const flush = async () => {
      const docs = batch;
      batch = [];
      await this.store.run((unit) => {
        for (const { doc, labels } of docs) {
          this.addDocument(unit, doc);
          for (const label of labels) this.addLabel(unit, doc.tenant, doc.documentId, doc.createdAt, label);
        }
      });
    };
    for await (const doc of documents) {
      batch.push({ doc, labels: await labelsOf(doc) });
      if (batch.length === 256) await flush();
    }
    await flush();
    // Sorts after every index key: the table is not empty even where there were no documents.
    await this.store.run((unit) => unit.put(this.db, ['~built'], true));
  }

  /** In the document's creating unit. */
  addDocument(unit: Unit, doc: DocumentRecord): void {
    unit.put(this.db, ['t', doc.tenant, doc.createdAt, doc.documentId], true);
    for (const ref of doc.externalRefs) unit.put(this.db, ['x', doc.tenant, refKey(ref), doc.createdAt, doc.documentId], true);
  }

  /** In the unit that gives a version of the document `label`. */
  addLabel(unit: Unit, tenant: string, documentId: string, createdAt: number, label: string): void {
    unit.put(this.db, ['l', tenant, label, createdAt, documentId], true);
  }

  /**
   * Up to `budget` candidates, newest first, from the most selective index of `filter`, after
   * the position `after` (an entry's `position`, opened from the caller's cursor); `more` when the
   * budget ended the scan.
   */
  async scan(tenant: string, filter: DocumentFilter, budget: number, after?: string): Promise<{ entries: IndexEntry[]; more: boolean }> {
    const prefix: IndexKey = filter.externalRef ? ['x', tenant, refKey(filter.externalRef)] : filter.label !== undefined ? ['l', tenant, filter.label] : ['t', tenant];
    const from = after === undefined ? undefined : [...prefix, ...tailOf(after)];
    const start: IndexKey = from ?? [...prefix, filter.createdBefore ?? LATEST];
    const end: IndexKey = filter.createdAfter === undefined ? prefix : [...prefix, filter.createdAfter, '\uffff'];
    const entries: IndexEntry[] = [];
    // One more than the budget tells whether there is more; one more again for the cursor's own key.
    for (const { key } of await this.store.range(this.db, { start, end, reverse: true, limit: budget + 2 })) {
      if (from && key.length === from.length && key.every((k, i) => k === from[i])) continue;
      if (entries.length === budget) return { entries, more: true };
      const createdAt = key[key.length - 2] as number;
      const documentId = key[key.length - 1] as string;
      entries.push({ createdAt, documentId, position: JSON.stringify([createdAt, documentId]) });
    }
    return { entries, more: false };
  }
}

/** The key's tail a position names: [createdAt, documentId] (it was sealed by this server: anything else is a bug, or a forgery that opened). */
function tailOf(position: string): [number, string] {
  let tail: unknown;
  try {
    tail = JSON.parse(position);
  } catch {
    throw invalidCursor();
  }
  if (!Array.isArray(tail) || tail.length !== 2 || typeof tail[0] !== 'number' || typeof tail[1] !== 'string') throw invalidCursor();
  return tail as [number, string];
}
