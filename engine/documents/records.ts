// The records core of the document platform, shared by its services (documents.ts, metadata-
// service.ts, document-jobs.ts): owner of the `documents`, `doc_uploads`, `doc_versions`,
// `doc_labels` and `doc_content_keys` tables, the reads every service makes of them (a document
// of the caller's tenant, a version, an upload), and `addVersion`, the one way a version is
// added. Every write path checks its preconditions and adds a version in one unit of work over
// these tables (engine/store/unit-store.ts: what a unit reads is its precondition, so two nodes
// writing one document never both add a version after the same one).

import { LRUCache } from 'lru-cache';
import type { Principal } from '../auth/index.js';
import { DOC_UPLOADS_CACHED, DOC_VERSIONS_CACHED, DOC_VERSIONS_CACHED_BYTES } from '../base/limits.js';
import type { JobQueue } from '../jobs/index.js';
import { SvcError } from '../base/errors.js';
import type { ManifestRecord } from '../store/index.js';
import { type Unit, type UnitStore, table } from '../store/index.js';
import { DerivedMetadata } from './derived.js';
import { DocumentIndex } from './document-index.js';
import { type CurrentEntry, MetadataIndex } from './metadata-index.js';
import { ContentLedger, type StoredEntry, type TenantStorage } from './content-ledger.js';
import { metadataEntryTooLarge, storedEntryBytes } from './metadata.js';
import { badRequest, documentNotFound, isUuid, newId, type Bundle, type ContentRef, type DocumentRecord, type UploadRecord, type VersionRecord } from './model.js';
import { requireRule, ruleAllows } from './permissions.js';
import { MAINTENANCE_TENANT } from './schema-lifecycle.js';
import type { SchemaRegistry } from './schemas.js';

export interface ContentRecord {
  blobId: string;
  record: ManifestRecord;
}

export const uploadNotFound = (id: string) => new SvcError('not_found', 'upload_not_found', `No upload ${id}`);
const CURRENT = 'CURRENT';

// Remembered: a pg-s3 node's canonical write (and every unit that reads a document) takes the
// node's copy as its read, verified by the commit (engine/store/unit-store.ts, REMEMBERED).
export const DOCUMENTS = table<DocumentRecord, [string, string]>('documents', { remembered: true });
export const UPLOADS = table<UploadRecord, string>('doc_uploads', { remembered: true });
export const VERSIONS = table<VersionRecord, [string, string, string]>('doc_versions');
export const LABELS = table<string, [string, string, string]>('doc_labels');
/** `b3:<hex>` → the content's manifest record, kept here: document bytes are not in the blob namespace. */
export const CONTENT_KEYS = table<ContentRecord, string>('doc_content_keys');
/** Once-only steps of this catalog (the re-check after envelope v1.1 came). */
const MILESTONES = table<{ jobId: string; at: number }, string>('doc_milestones');

/** The range of one document's rows in a table keyed [tenant, documentId, …]. */
export const rowsOf = (doc: Pick<DocumentRecord, 'tenant' | 'documentId'>) => ({ start: [doc.tenant, doc.documentId, ''] as [string, string, string], end: [doc.tenant, doc.documentId, '\uffff'] as [string, string, string] });

/** A document as GET /v1/documents/{id}, the list and search show it. */
export function summary(doc: DocumentRecord) {
  return {
    documentId: doc.documentId,
    currentVersionId: doc.currentVersionId,
    externalRefs: doc.externalRefs,
    placementHint: doc.placementHint,
    createdAt: new Date(doc.createdAt).toISOString(),
    updatedAt: new Date(doc.updatedAt).toISOString(),
  };
}

/** doc.read and meta.read: a document a reader finds by search (any other is hidden from it, its number included). */
export const seesMetadata = (doc: DocumentRecord, principal: Principal) => ruleAllows(doc.permissions, principal, 'doc.read') && ruleAllows(doc.permissions, principal, 'meta.read');

/** A refusal of stored bytes (an entry too large, the quota) that a migration reports as its failure. */
export function storageRefusal(err: unknown): { code: string; message: string } | undefined {
  if (err instanceof SvcError && (err.code === 'metadata_entry_too_large' || err.code === 'tenant_storage_quota_exceeded')) return { code: err.code, message: err.message };
  return undefined;
}

/** A new version as `addVersion` takes it. */
export interface NewVersion {
  contentRef: ContentRef;
  contentType: string;
  metadata: Bundle;
  reason: string;
  labels: string[];
  /** The metadata of the version it follows, when the caller has read it. */
  baseMetadata?: Bundle;
}

const versionSlot = (doc: Pick<DocumentRecord, 'tenant' | 'documentId'>, versionId: string) => `${doc.tenant}\u0000${doc.documentId}\u0000${versionId}`;

export class DocumentRecords {
  /** Derived metadata (./derived.ts). */
  readonly derived: DerivedMetadata;
  /** The list's order and filters (./document-index.ts). */
  readonly index: DocumentIndex;
  /** Each tenant's retained content (./content-ledger.ts). */
  readonly ledger: ContentLedger;
  /** Search by metadata (./metadata-index.ts; `documentsOnSchema` for bulk migrations). */
  readonly metaIndex: MetadataIndex;
  /**
   * Versions this node read or added, on a shared store only (pg-s3, where a read is a round
   * trip): a version is written once, with a fresh id, and never changed or removed, so a copy is
   * never stale, and a unit that reads a document and then its current version needs no
   * precondition on the version (the document's is the one that matters).
   */
  private readonly versions: LRUCache<string, VersionRecord> | undefined;
  /**
   * The document of each upload this node created or read, on a shared store only: an upload
   * belongs to one document for ever, so the bytes' PUT and the finalize read the upload and the
   * document in one statement (`uploadAndDocument`) instead of one after the other.
   */
  private readonly uploadDocuments: LRUCache<string, string> | undefined;

  constructor(
    readonly store: UnitStore,
    private readonly jobs: JobQueue,
    schemas: SchemaRegistry,
    readonly storage: TenantStorage,
  ) {
    this.derived = new DerivedMetadata(store, jobs, schemas, (unit, tenant, documentId) => unit.has(DOCUMENTS, [tenant, documentId]));
    this.index = new DocumentIndex(store);
    this.metaIndex = new MetadataIndex(store);
    this.ledger = new ContentLedger(store, storage);
    this.versions = store.shared
      ? new LRUCache({ max: DOC_VERSIONS_CACHED, maxSize: DOC_VERSIONS_CACHED_BYTES, maxEntrySize: DOC_VERSIONS_CACHED_BYTES / 64, sizeCalculation: (v) => JSON.stringify(v.metadata).length + 256 })
      : undefined;
    this.uploadDocuments = store.shared ? new LRUCache({ max: DOC_UPLOADS_CACHED }) : undefined;
  }

  /**
   * Builds what a catalog from before the list index and the content ledger lacks, and enqueues
   * the re-check that gives stored derived entries their v1.1 status (once; then nothing to do).
   */
  async open(): Promise<void> {
    const { store } = this;
    await store.run(async (unit) => {
      if (await unit.has(MILESTONES, 'envelope-1.1-recheck')) return;
      const job = this.jobs.enqueueIn(unit, MAINTENANCE_TENANT, 'metadata.recheck', {});
      unit.put(MILESTONES, 'envelope-1.1-recheck', { jobId: job.jobId, at: Date.now() });
    });
    await this.index.backfill(
      (async function* () {
        for await (const { value } of store.scan(DOCUMENTS)) yield value;
      })(),
      async (doc) => (await store.range(LABELS, rowsOf(doc))).map((e) => e.key[2]),
    );
    await this.metaIndex.backfill(
      (async function* () {
        for await (const { key } of store.scan(DOCUMENTS)) yield { tenant: key[0], documentId: key[1] };
      })(),
      (unit, tenant, documentId) => this.currentEntries(unit, tenant, documentId),
    );
    await this.ledger.build(
      (async function* () {
        for await (const { value } of store.scan(UPLOADS)) if (value.content) yield { tenant: value.tenant, key: value.content.key, size: value.content.size };
      })(),
    );
    await this.ledger.buildEntries(
      (async function* () {
        for await (const { value: doc } of store.scan(DOCUMENTS)) {
          // Each distinct entry once: its first stored form (the initial metadata's, else the first version's that has it).
          const entries = new Map<string, number>();
          const note = (bundle: Bundle) => {
            for (const e of Object.values(bundle)) if (!entries.has(e.id)) entries.set(e.id, storedEntryBytes(e));
          };
          note(doc.initialMetadata);
          for await (const { value } of store.scan(VERSIONS, rowsOf(doc))) note(value.metadata);
          yield { tenant: doc.tenant, entries: [...entries].map(([id, bytes]) => ({ id, bytes })) };
        }
      })(),
    );
  }

  /** In `unit`: the document's current canonical entries and valid derived entries (the search index's backfill). */
  private async currentEntries(unit: Unit, tenant: string, documentId: string): Promise<CurrentEntry[]> {
    const doc = await unit.get(DOCUMENTS, [tenant, documentId]);
    if (!doc) return [];
    const canonical = doc.currentVersionId ? (await this.version(unit, doc, doc.currentVersionId)).metadata : {};
    const entries: CurrentEntry[] = Object.entries(canonical).map(([namespaceUrn, entry]) => ({ namespaceUrn, mode: 'c', entry }));
    for (const { namespaceUrn, entry } of await this.derived.validEntries(unit, tenant, documentId)) entries.push({ namespaceUrn, mode: 'd', entry });
    return entries;
  }

  /**
   * In a unit that read `doc` (so that a version added meanwhile makes it run again): stores a
   * new version after the document's current one and moves CURRENT (and `labels`) to it.
   */
  async addVersion(unit: Unit, doc: DocumentRecord, principal: Pick<Principal, 'subject'>, v: NewVersion): Promise<VersionRecord> {
    const now = Date.now();
    // Entries new in this version are recorded now; those carried over keep their receipt.
    const metadata: Bundle = {};
    for (const [ns, entry] of Object.entries(v.metadata)) {
      metadata[ns] = entry.receipt && entry.receipt.recordedAt === undefined ? { ...entry, receipt: { ...entry.receipt, recordedAt: now } } : entry;
    }
    // The search index follows each namespace whose entry changed (the caller's base version, else read here).
    const before = v.baseMetadata ?? (doc.currentVersionId ? (await this.version(unit, doc, doc.currentVersionId)).metadata : {});
    // Before any write: entries new to the document (a first version's initial ones were counted at its creation).
    await this.holdNewEntries(unit, doc.tenant, metadata, doc.currentVersionId ? [before] : [before, doc.initialMetadata]);
    for (const ns of new Set([...Object.keys(before), ...Object.keys(v.metadata)])) {
      if (before[ns]?.id !== v.metadata[ns]?.id) this.metaIndex.changed(unit, doc.tenant, doc.documentId, ns, 'c', before[ns], v.metadata[ns]);
    }
    const version: VersionRecord = {
      versionId: newId(),
      parents: doc.currentVersionId ? [doc.currentVersionId] : [],
      contentRef: v.contentRef,
      contentType: v.contentType,
      metadata,
      permissionsSnapshot: doc.permissions,
      actor: principal.subject,
      reason: v.reason,
      createdAt: now,
    };
    unit.put(VERSIONS, [doc.tenant, doc.documentId, version.versionId], version);
    const versions = this.versions;
    if (versions) unit.afterCommit(() => versions.set(versionSlot(doc, version.versionId), version));
    for (const label of new Set([CURRENT, ...v.labels])) {
      unit.put(LABELS, [doc.tenant, doc.documentId, label], version.versionId);
      this.index.addLabel(unit, doc.tenant, doc.documentId, doc.createdAt, label);
    }
    unit.put(DOCUMENTS, [doc.tenant, doc.documentId], { ...doc, currentVersionId: version.versionId, updatedAt: now });
    return version;
  }

  /**
   * In `unit`, before its writes: the entries of `metadata` that none of `stored` holds are new:
   * each at most SVC_MAX_METADATA_ENTRY_BYTES as stored (413), together within the tenant's
   * quota (507), and counted (./content-ledger.ts). Without a quota no read is added to the unit.
   */
  async holdNewEntries(unit: Unit, tenant: string, metadata: Bundle, stored: readonly Bundle[]): Promise<void> {
    const known = new Set<string>();
    for (const bundle of stored) for (const e of Object.values(bundle)) known.add(e.id);
    const fresh: StoredEntry[] = [];
    for (const [ns, entry] of Object.entries(metadata)) {
      if (known.has(entry.id)) continue;
      const bytes = storedEntryBytes(entry);
      if (bytes > this.storage.maxMetadataEntryBytes) throw metadataEntryTooLarge(ns, bytes, this.storage.maxMetadataEntryBytes);
      fresh.push({ id: entry.id, bytes });
    }
    if (fresh.length > 0) await this.ledger.holdEntries(unit, tenant, fresh, await this.ledger.room(tenant));
  }

  /** The upload of the principal's tenant (another tenant's is 404). */
  async upload(principal: Principal, uploadId: string): Promise<UploadRecord> {
    if (!isUuid(uploadId)) throw badRequest('The upload id must be a UUID');
    const upload = await this.store.get(UPLOADS, uploadId);
    if (!upload || upload.tenant !== principal.tenant) throw uploadNotFound(uploadId);
    this.uploadDocuments?.set(uploadId, upload.documentId);
    return upload;
  }

  /** In the unit that creates upload `uploadId` of `documentId`: known to this node once committed. */
  uploadCreated(unit: Unit, uploadId: string, documentId: string): void {
    const known = this.uploadDocuments;
    if (known) unit.afterCommit(() => known.set(uploadId, documentId));
  }

  /**
   * The upload of the principal's tenant and its document (either missing or another tenant's:
   * 404, the upload's first), as `upload` then `document`; in one read when this node knows the
   * upload's document, and in none when it has copies of both (`copy`: then the caller's unit
   * takes both with `getKnown(…, true)` and checks again what it checked on them).
   */
  async uploadAndDocument(principal: Principal, uploadId: string): Promise<{ upload: UploadRecord; doc: DocumentRecord; copy: boolean }> {
    if (!isUuid(uploadId)) throw badRequest('The upload id must be a UUID');
    const documentId = this.uploadDocuments?.get(uploadId);
    if (documentId === undefined) {
      const upload = await this.upload(principal, uploadId);
      return { upload, doc: await this.document(principal, upload.documentId), copy: false };
    }
    const reads = [{ table: UPLOADS, key: uploadId }, { table: DOCUMENTS, key: [principal.tenant, documentId] }];
    const copies = this.store.copiesOf?.(reads) as [UploadRecord, DocumentRecord] | undefined;
    if (copies && copies[0].tenant === principal.tenant && copies[0].documentId === documentId) return { upload: copies[0], doc: copies[1], copy: true };
    const [upload, doc] = (await this.store.getMany(reads)) as [UploadRecord | undefined, DocumentRecord | undefined];
    if (!upload || upload.tenant !== principal.tenant) throw uploadNotFound(uploadId);
    // Never expected (an upload's document does not change): read as without the copy.
    if (upload.documentId !== documentId) return { upload, doc: await this.document(principal, upload.documentId), copy: false };
    if (!doc) throw documentNotFound(documentId);
    return { upload, doc, copy: false };
  }

  /** The document of the principal's tenant (another tenant's is 404). */
  async document(principal: Principal, documentId: string, reads: Pick<Unit, 'get'> = this.store): Promise<DocumentRecord> {
    if (!isUuid(documentId)) throw badRequest('The document id must be a UUID');
    const doc = await reads.get(DOCUMENTS, [principal.tenant, documentId]);
    if (!doc) throw documentNotFound(documentId);
    return doc;
  }

  /** The document of the principal's tenant when its rules let the principal do `action`. */
  async readable(principal: Principal, documentId: string, action: string): Promise<DocumentRecord> {
    const doc = await this.document(principal, documentId);
    requireRule(doc.permissions, principal, action);
    return doc;
  }

  /** A version of `doc`, read in `reads` (a unit, or the store for the latest committed one). */
  async version(reads: Pick<Unit, 'get'>, doc: DocumentRecord, versionId: string): Promise<VersionRecord> {
    const known = this.versions?.get(versionSlot(doc, versionId));
    if (known) return known;
    const v = await reads.get(VERSIONS, [doc.tenant, doc.documentId, versionId]);
    if (!v) throw new SvcError('internal', 'storage_failure', 'A version of this document is missing from the catalog');
    this.versions?.set(versionSlot(doc, versionId), v);
    return v;
  }

  /** The current version's metadata, read in `reads` (none before the first version). */
  async currentMetadata(reads: Pick<Unit, 'get'>, doc: DocumentRecord): Promise<Bundle> {
    return doc.currentVersionId ? (await this.version(reads, doc, doc.currentVersionId)).metadata : {};
  }
}
