// Documents, their upload, immutable versions (a DAG through `parents`), labels, content
// references and canonical metadata. Owner of the `documents`, `doc_uploads`, `doc_versions`,
// `doc_labels`, `doc_content_keys` and `doc_patches` tables; derived metadata is ./derived.ts's,
// each tenant's retained content and metadata bytes ./content-ledger.ts's. No HTTP here: the capability a request
// needs whatever it names (doc.create, doc.read, meta.read, job.read) is the caller's to check;
// those that depend on what it names (meta.write:<ns>, meta.patch:<ns>) and the documents'
// permission rules are checked here. Above 400 lines: every write path checks its preconditions
// and adds a version in one unit of work over the same tables (engine/store/unit-store.ts: what a
// unit reads is its precondition, so two nodes writing one document never both add a version
// after the same one), and those units share their helpers.

import type { CursorSeal, Principal } from '../auth/index.js';
import { JobError, type JobQueue, type JobRecord } from '../jobs/index.js';
import { DOC_JOBS_MODULE, type MigrateInput } from './doc-jobs.js';
import { DerivedMetadata } from './derived.js';
import type { MigrationRegistry } from './migrations.js';
import type { BlockRoots } from '../cas/index.js';
import { type DirectIngest, type IngestOptions, pushAll } from '../cas/index.js';
import { Manifest, type ManifestRecord } from '../store/index.js';
import { SvcError, invalidCursor } from '../errors.js';
import { type Unit, type UnitStore, table } from '../store/index.js';
import { type DocumentFilter, DocumentIndex } from './document-index.js';
import { type CurrentEntry, MetadataIndex } from './metadata-index.js';
import { parseSearchRequest } from './search-request.js';
import { Blake3Stream } from './blake3-stream.js';
import { ContentLedger, type StoredEntry, type TenantStorage } from './content-ledger.js';
import { MetadataRejection, applyEntryPatch, checkPatchBody, metadataEntryTooLarge, readBundle, readProvenance, storedEntryBytes } from './metadata.js';
import type { Provenance } from './doc-jobs.js';
import { type MetadataReading, type NamespaceEntries, bundleAnswer, namespaceAnswer } from './envelope.js';
import {
  badRequest, documentNotFound, isUuid, newId, newMetadataId, onlyKeys, parseExternalRefs, parseLabels, parsePermissions, receiptOf,
  isPlainObject, parsePlacement, type Bundle, type ContentRef, type DocumentRecord, type ExternalRef, type PlacementHint, type Receipt, type RequestInfo, type UploadRecord, type VersionRecord,
} from './model.js';
import { requireCapability, requireRule, ruleAllows } from './permissions.js';
import type { InUnit } from '../idempotency/index.js';
import type { Created, Finalized, JobAnswer } from './outcomes.js';
import { MAINTENANCE_TENANT, type DeprecatedSchema, checkLifecycles, lifecycleRules } from './schema-lifecycle.js';
import { type SchemaRecord, type SchemaRegistry, requireSchemaOwner } from './schemas.js';

interface ContentRecord {
  blobId: string;
  record: ManifestRecord;
}

export const uploadNotFound = (id: string) => new SvcError('not_found', 'upload_not_found', `No upload ${id}`);
const CURRENT = 'CURRENT';

const DOCUMENTS = table<DocumentRecord, [string, string]>('documents');
const UPLOADS = table<UploadRecord, string>('doc_uploads');
const VERSIONS = table<VersionRecord, [string, string, string]>('doc_versions');
const LABELS = table<string, [string, string, string]>('doc_labels');
/** `b3:<hex>` → the content's manifest record, kept here: document bytes are not in the blob namespace. */
const CONTENT_KEYS = table<ContentRecord, string>('doc_content_keys');

/** A document as GET /v1/documents/{id} and the list show it. */
function summary(doc: DocumentRecord) {
  return {
    documentId: doc.documentId,
    currentVersionId: doc.currentVersionId,
    externalRefs: doc.externalRefs,
    placementHint: doc.placementHint,
    createdAt: new Date(doc.createdAt).toISOString(),
    updatedAt: new Date(doc.updatedAt).toISOString(),
  };
}


/** A job as GET /v1/jobs/{id} and the list show it. */
function jobJson(job: JobRecord) {
  const iso = (t?: number) => (t === undefined ? null : new Date(t).toISOString());
  return {
    jobId: job.jobId, kind: job.kind, state: job.state, attempts: job.attempts, maxAttempts: job.maxAttempts,
    createdAt: iso(job.createdAt), nextRunAt: job.state === 'pending' ? iso(job.nextRunAt) : null,
    startedAt: iso(job.startedAt), finishedAt: iso(job.finishedAt), error: job.error, outputs: job.outputs,
    ...(job.progress ? { progress: { done: job.progress.done, total: job.progress.total } } : {}),
  };
}

/** doc.read and meta.read: a document a reader finds by search (any other is hidden from it, its number included). */
const seesMetadata = (doc: DocumentRecord, principal: Principal) => ruleAllows(doc.permissions, principal, 'doc.read') && ruleAllows(doc.permissions, principal, 'meta.read');

const jobNotFound = (id: string) => new SvcError('not_found', 'job_not_found', `No job ${id}`);

interface PatchAudit {
  newMetadataId: string;
  baseMetadataId: string;
  namespaceUrn: string;
  versionId: string;
  patch: unknown[];
  actor: string;
  reason: string;
  at: number;
}

const PATCHES = table<PatchAudit, [string, string, string, string]>('doc_patches');
/** Once-only steps of this catalog (the re-check after envelope v1.1 came). */
const MILESTONES = table<{ jobId: string; at: number }, string>('doc_milestones');

/** An upload's bytes being received: push them into `ingest` and `hash`, then `finish`. */
interface BytesUpload {
  ingest: DirectIngest;
  hash: Blake3Stream;
  finish(): Promise<void>;
}

export class DocumentService {
  /** Derived metadata (./derived.ts). */
  readonly derived: DerivedMetadata;
  /** The list's order and filters (./document-index.ts). */
  private readonly index: DocumentIndex;
  /** Each tenant's retained content (./content-ledger.ts). */
  private readonly ledger: ContentLedger;
  /** Search by metadata (./metadata-index.ts; `documentsOnSchema` for bulk migrations). */
  readonly metaIndex: MetadataIndex;

  constructor(
    private readonly store: UnitStore,
    readonly schemas: SchemaRegistry,
    readonly migrations: MigrationRegistry,
    private readonly jobs: JobQueue,
    private readonly startIngest: (options: IngestOptions) => DirectIngest,
    private readonly storage: TenantStorage,
    private readonly cursors: CursorSeal,
  ) {
    this.derived = new DerivedMetadata(store, jobs, schemas, (unit, tenant, documentId) => unit.has(DOCUMENTS, [tenant, documentId]));
    jobs.define<{ data: Record<string, unknown> }>({
      kind: 'metadata.migrate',
      task: { filename: DOC_JOBS_MODULE, name: 'migrate' },
      apply: (unit, job, output) => this.applyMigration(unit, job, output.data),
    });
    this.index = new DocumentIndex(store);
    this.metaIndex = new MetadataIndex(store);
    this.ledger = new ContentLedger(store, storage);
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
      async (doc) => (await store.range(LABELS, { start: [doc.tenant, doc.documentId, ''], end: [doc.tenant, doc.documentId, '\uffff'] })).map((e) => e.key[2]),
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
          for await (const { value } of store.scan(VERSIONS, { start: [doc.tenant, doc.documentId, ''], end: [doc.tenant, doc.documentId, '\uffff'] })) note(value.metadata);
          yield { tenant: doc.tenant, entries: [...entries].map(([id, bytes]) => ({ id, bytes })) };
        }
      })(),
    );
  }

  /** The bytes of the distinct contents and metadata entries the tenant's documents and uploads stored (its quota counts them with its blobs). */
  retainedBytes(tenant: string): Promise<number> {
    return this.ledger.bytes(tenant);
  }

  /** Blocks of document content (unlisted manifests): garbage collection keeps them. */
  blockRoots(): BlockRoots {
    const store = this.store;
    return {
      name: 'document content',
      // In the data directory only where the store is this node's (fs, s3); pg-s3 shares it.
      persistent: !store.shared,
      async *digests() {
        for await (const { value } of store.scan(CONTENT_KEYS)) {
          for (let at = 0; at < value.record.refs.length; at += 40) yield value.record.refs.subarray(at, at + 32);
        }
      },
    };
  }

  /**
   * POST /v1/schemas: registers a schema; entries written before it existed (unverified) are
   * re-checked by a job enqueued in the registering unit.
   */
  registerSchema(owner: string | undefined, body: unknown) {
    return this.schemas.register(body, owner, async (unit, urn) => {
      if (await this.derived.waitingFor(unit, urn)) this.jobs.enqueueIn(unit, MAINTENANCE_TENANT, 'metadata.recheck', { schemaUrn: urn });
    });
  }

  /** POST /v1/documents: a new document and its upload, or (same documentId again) the same ones. */
  async create(principal: Principal, body: unknown, request: RequestInfo, keep?: InUnit<Created>): Promise<Created> {
    if (!isPlainObject(body)) throw badRequest('The body must be a JSON object');
    onlyKeys(body, ['documentId', 'placementHint', 'externalRefs', 'initialMetadata', 'initialPermissions'], 'document');
    if (body.documentId !== undefined && !isUuid(body.documentId)) throw badRequest('documentId must be a UUID');
    const placementHint = parsePlacement(body.placementHint);
    const externalRefs = parseExternalRefs(body.externalRefs);
    const permissions = parsePermissions(body.initialPermissions);
    const { bundle: initialMetadata, deprecated } = body.initialMetadata === undefined ? { bundle: {}, deprecated: [] } : await this.canonicalBundle(principal, body.initialMetadata, 'initialMetadata', request);
    const documentId = (body.documentId as string | undefined) ?? newId();
    const now = Date.now();
    return this.store.run(async (unit) => {
      // An id minted here is new: only one the caller chose can name a document already (a read, on pg-s3 a statement).
      const existing = body.documentId === undefined ? undefined : await unit.get(DOCUMENTS, [principal.tenant, documentId]);
      if (existing) {
        requireRule(existing.permissions, principal, 'doc.write');
        const again = { documentId, uploadId: existing.uploadId, created: false, deprecated };
        await keep?.(unit, again);
        return again;
      }
      await this.holdNewEntries(unit, principal.tenant, initialMetadata, []);
      const uploadId = newId();
      const fresh: DocumentRecord = {
        documentId, tenant: principal.tenant, currentVersionId: null, externalRefs, permissions, initialMetadata,
        placementHint: placementHint ?? 'transient', uploadId, createdBy: principal.subject, createdAt: now, updatedAt: now,
      };
      unit.put(DOCUMENTS, [principal.tenant, documentId], fresh);
      this.index.addDocument(unit, fresh);
      unit.put(UPLOADS, uploadId, { uploadId, tenant: principal.tenant, documentId, state: 'open' });
      const made = { documentId, uploadId, created: true, deprecated };
      // An Idempotency-Key's answer commits with the document (engine/idempotency).
      await keep?.(unit, made);
      return made;
    });
  }

  /**
   * PUT /v1/uploads/{id}/bytes: checks, then an ingest into the CAS with BLAKE3 beside it
   * (the body is read from its first byte once this settles), bounded by the tenant's object
   * limit (413 at once for a declared length past it) and quota (507 before the blocks are recorded),
   * and charged to the caller's byte budget: first of all, through the tenant gate.
   */
  async beginBytes(principal: Principal, uploadId: string, options: Pick<IngestOptions, 'contentType' | 'declaredLength'>): Promise<BytesUpload> {
    const meter = await this.storage.admitContent(principal, options.declaredLength);
    const upload = await this.upload(principal, uploadId);
    const doc = await this.document(principal, upload.documentId);
    requireRule(doc.permissions, principal, 'doc.write');
    if (upload.state === 'finalized') throw new SvcError('conflict', 'upload_finalized', 'The upload is finalized; its bytes cannot change');
    const { ingest, hash, recorded } = this.contentIngest(principal.tenant, { ...options, meter });
    const finish = async () => {
      await recorded(async (unit, content) => {
        const current = await unit.get(UPLOADS, uploadId);
        if (!current || current.state === 'finalized') throw new SvcError('conflict', 'upload_finalized', 'The upload was finalized meanwhile');
        unit.put(UPLOADS, uploadId, { ...current, state: 'received', content });
      });
    };
    return { ingest, hash, finish };
  }

  /**
   * An ingest of document content of `tenant` (unlisted, BLAKE3 beside it) within its limits, and
   * `recorded`, which once the body has ended records the content under its `b3:<hex>` key as the
   * tenant's (its quota checked again) in one unit with the caller's `step`.
   */
  private contentIngest(tenant: string, options: Pick<IngestOptions, 'contentType' | 'declaredLength' | 'meter'>) {
    const ingest = this.startIngest({
      ...options,
      maxObjectBytes: this.storage.limits(tenant).maxObjectBytes,
      unlisted: true,
      beforeRecord: async (size) => this.ledger.checkRoom(tenant, await contentKey(), size),
    });
    const hash = new Blake3Stream();
    let digest: Promise<string> | undefined;
    // Asked for by the check before recording and by the record itself: the digest is taken once.
    const contentKey = () => (digest ??= hash.hex().then((hex) => `b3:${hex}`));
    const recorded = async (step: (unit: Unit, content: { key: string; size: number; mediaType: string }) => Promise<void>) => {
      const [result, key] = await Promise.all([ingest.endUnlisted(), contentKey()]);
      const room = await this.ledger.room(tenant);
      const content = { key, size: result.record.size, mediaType: result.mediaType };
      await this.store.run(async (unit) => {
        await this.ledger.hold(unit, tenant, key, content.size, room);
        if (!(await unit.has(CONTENT_KEYS, key))) unit.put(CONTENT_KEYS, key, { blobId: result.id, record: result.record });
        await step(unit, content);
      });
      return content;
    };
    return { ingest, hash, recorded };
  }

  /** POST /v1/uploads/{id}/finalize: the document's first version (again: the same answer). */
  async finalize(principal: Principal, uploadId: string, body: unknown, keep?: InUnit<Finalized>): Promise<Finalized> {
    const upload = await this.upload(principal, uploadId);
    const doc = await this.document(principal, upload.documentId);
    requireRule(doc.permissions, principal, 'doc.write');
    const b = body === undefined ? {} : body;
    if (!isPlainObject(b)) throw badRequest('The body must be a JSON object { labels, reason }');
    onlyKeys(b, ['labels', 'reason'], 'finalize');
    const labels = parseLabels(b.labels);
    if (b.reason !== undefined && typeof b.reason !== 'string') throw badRequest('reason must be a string');
    return this.store.run(async (unit) => {
      const current = (await unit.get(UPLOADS, uploadId))!;
      if (current.state === 'finalized') {
        const version = await this.version(unit, doc, current.versionId!);
        const again = { documentId: current.documentId, versionId: current.versionId!, contentRef: version.contentRef, created: false };
        await keep?.(unit, again);
        return again;
      }
      if (current.state !== 'received' || !current.content) throw new SvcError('conflict', 'upload_incomplete', 'PUT the bytes of the upload before finalizing it');
      const contentRef: ContentRef = { kind: 'blob', key: current.content.key };
      const latest = (await unit.get(DOCUMENTS, [principal.tenant, doc.documentId]))!;
      const version = await this.addVersion(unit, latest, principal, {
        contentRef,
        contentType: current.content.mediaType,
        metadata: latest.currentVersionId ? (await this.version(unit, latest, latest.currentVersionId)).metadata : latest.initialMetadata,
        reason: (b.reason as string | undefined) ?? 'upload finalized',
        labels,
      });
      unit.put(UPLOADS, uploadId, { ...current, state: 'finalized', versionId: version.versionId });
      const made = { documentId: doc.documentId, versionId: version.versionId, contentRef, created: true };
      await keep?.(unit, made);
      return made;
    });
  }

  async get(principal: Principal, documentId: string) {
    return summary(await this.readable(principal, documentId, 'doc.read'));
  }

  /**
   * GET /v1/documents: the tenant's documents the principal may read, newest first, filtered.
   * A page reads at most a few times `limit` index entries; a page cut short by documents the
   * principal may not see still has a `nextCursor` while there may be more.
   */
  async list(principal: Principal, filter: DocumentFilter, limit: number, cursor?: string) {
    // Bound to the filter: a cursor of one filter does not go on with another.
    const cursors = this.cursors.of('documents', principal);
    const query = [filter.label ?? null, filter.externalRef ?? null, filter.createdAfter ?? null, filter.createdBefore ?? null];
    const { entries, more } = await this.index.scan(principal.tenant, filter, limit * 4 + 16, cursors.open(query, cursor));
    const documents: Array<ReturnType<typeof summary>> = [];
    let next = more && entries.length > 0 ? entries[entries.length - 1]!.position : undefined;
    for (let i = 0; i < entries.length; i++) {
      if (documents.length === limit) {
        next = entries[i - 1]!.position;
        break;
      }
      const doc = await this.store.get(DOCUMENTS, [principal.tenant, entries[i]!.documentId]);
      if (doc && (await this.listable(doc, principal, filter))) documents.push(summary(doc));
    }
    return next ? { documents, nextCursor: cursors.seal(query, next) } : { documents };
  }

  /** The filters the index did not apply, and the document's own read rule. */
  private async listable(doc: DocumentRecord, principal: Principal, filter: DocumentFilter): Promise<boolean> {
    if (filter.label !== undefined && !(await this.store.has(LABELS, [doc.tenant, doc.documentId, filter.label]))) return false;
    const ref = filter.externalRef;
    if (ref && !doc.externalRefs.some((r) => r.system === ref.system && r.value === ref.value)) return false;
    if (filter.createdAfter !== undefined && doc.createdAt <= filter.createdAfter) return false;
    if (filter.createdBefore !== undefined && doc.createdAt >= filter.createdBefore) return false;
    try {
      requireRule(doc.permissions, principal, 'doc.read');
      return true;
    } catch {
      return false;
    }
  }

  /**
   * POST /v1/documents/search: the tenant's documents whose current entry of a namespace
   * (canonical, or the valid derived one) has every pointer of `where` equal to its value, in
   * documentId order, those the principal may not read (doc.read and meta.read) left out.
   */
  async search(principal: Principal, body: unknown) {
    requireCapability(principal, 'meta.read');
    const query = parseSearchRequest(body);
    const page = await this.metaIndex.search(principal.tenant, query, async (documentId) => {
      const doc = await this.store.get(DOCUMENTS, [principal.tenant, documentId]);
      if (!doc) return undefined;
      try {
        requireRule(doc.permissions, principal, 'doc.read');
        requireRule(doc.permissions, principal, 'meta.read');
      } catch {
        return undefined;
      }
      return summary(doc);
    }, async (documentId) => {
      // An entry with too many leaves to index (metadata-index.ts, MAX_LEAVES): read and checked.
      if (query.mode === 'derived') return (await this.derived.heldIn(principal.tenant, documentId, query.namespaceUrn)).valid?.data;
      const doc = await this.store.get(DOCUMENTS, [principal.tenant, documentId]);
      return doc?.currentVersionId ? (await this.version(this.store, doc, doc.currentVersionId)).metadata[query.namespaceUrn]?.data : undefined;
    }, this.cursors.of('search', principal));
    return page.nextCursor ? { documents: page.items, nextCursor: page.nextCursor } : { documents: page.items };
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

  async listVersions(principal: Principal, documentId: string) {
    const doc = await this.readable(principal, documentId, 'doc.read');
    const labelsOf = new Map<string, string[]>();
    for (const { key, value } of await this.store.range(LABELS, { start: [doc.tenant, doc.documentId, ''], end: [doc.tenant, doc.documentId, '\uffff'] })) {
      labelsOf.set(value, [...(labelsOf.get(value) ?? []), key[2]]);
    }
    const versions = [];
    for await (const { value } of this.store.scan(VERSIONS, { start: [doc.tenant, doc.documentId, ''], end: [doc.tenant, doc.documentId, '\uffff'] })) {
      versions.push({
        versionId: value.versionId,
        parents: value.parents,
        labels: labelsOf.get(value.versionId) ?? [],
        contentRef: value.contentRef,
        actor: value.actor,
        reason: value.reason,
        createdAt: new Date(value.createdAt).toISOString(),
      });
    }
    return { versions };
  }

  /** The current version's content: its manifest (blocks in the CAS), media type and when the version was made. */
  async content(principal: Principal, documentId: string): Promise<{ documentId: string; manifest: Manifest; key: string; mediaType: string; createdAt: number }> {
    const doc = await this.readable(principal, documentId, 'doc.read');
    if (!doc.currentVersionId) throw new SvcError('not_found', 'content_not_found', 'The document has no finalized version yet');
    const version = await this.version(this.store, doc, doc.currentVersionId);
    const content = await this.store.get(CONTENT_KEYS, version.contentRef.key);
    if (!content) throw new SvcError('internal', 'storage_failure', 'The content of this version is missing from the catalog');
    return { documentId: doc.documentId, manifest: new Manifest(content.blobId, content.record), key: version.contentRef.key, mediaType: version.contentType, createdAt: version.createdAt };
  }

  /** Stored document content by key (`b3:<hex>`): its manifest, if the catalog has it. */
  async contentManifest(key: string): Promise<Manifest | undefined> {
    const content = await this.store.get(CONTENT_KEYS, key);
    return content ? new Manifest(content.blobId, content.record) : undefined;
  }

  /**
   * The content of `sourceVersion` (`current` or a versionId of the document) for a workflow:
   * the principal's document, the rule `action` on it.
   */
  async sourceContent(principal: Principal, documentId: string, sourceVersion: string, action: string) {
    const doc = await this.document(principal, documentId);
    requireRule(doc.permissions, principal, action);
    const versionId = sourceVersion === 'current' ? doc.currentVersionId : sourceVersion;
    if (versionId === null) throw new SvcError('not_found', 'content_not_found', 'The document has no finalized version yet');
    if (!isUuid(versionId)) throw badRequest('sourceVersion must be "current" or a versionId of the document');
    const version = await this.store.get(VERSIONS, [doc.tenant, doc.documentId, versionId]);
    if (!version) throw new SvcError('not_found', 'version_not_found', `The document has no version ${versionId}`);
    const manifest = await this.contentManifest(version.contentRef.key);
    if (!manifest) throw new SvcError('internal', 'storage_failure', 'The content of this version is missing from the catalog');
    return { documentId: doc.documentId, versionId, contentRef: version.contentRef, contentType: version.contentType, size: manifest.record.size };
  }

  /** Whether the document's rules let `principal` see it and its metadata (as search does): what a bulk migration counts. */
  async visibleTo(principal: Principal, documentId: string): Promise<boolean> {
    const doc = await this.store.get(DOCUMENTS, [principal.tenant, documentId]);
    return doc !== undefined && seesMetadata(doc, principal);
  }

  /**
   * In the caller's unit (a bulk migration's): document `documentId`'s current `namespaceUrn`
   * entry moved off `fromSchemaUrn` by `step` as one new version. `hidden` when its rules hide
   * it from `principal` (visibleTo: not counted at all); `skipped` when the document has no such
   * entry now, its rules refuse `principal` meta.write, or `step` declines (undefined); a failure
   * `step` returns leaves the document as it is.
   */
  async migrateEntryIn(
    unit: Unit,
    tenant: string,
    documentId: string,
    namespaceUrn: string,
    fromSchemaUrn: string,
    principal: Principal,
    m: { toSchemaUrn: string; reason: string; receipt: Receipt; step: (data: Record<string, unknown>) => Promise<{ data: Record<string, unknown> } | { code: string; message: string } | undefined> },
  ): Promise<'migrated' | 'skipped' | 'hidden' | { code: string; message: string }> {
    const doc = await unit.get(DOCUMENTS, [tenant, documentId]);
    if (doc && !seesMetadata(doc, principal)) return 'hidden';
    if (!doc?.currentVersionId || !ruleAllows(doc.permissions, principal, 'meta.write')) return 'skipped';
    const base = await this.version(unit, doc, doc.currentVersionId);
    const entry = base.metadata[namespaceUrn];
    if (entry?.schema !== fromSchemaUrn) return 'skipped';
    const outcome = await m.step(entry.data);
    if (outcome === undefined) return 'skipped';
    if (!('data' in outcome)) return outcome;
    try {
      await this.addVersion(unit, doc, { subject: m.receipt.sub }, {
        contentRef: base.contentRef,
        contentType: base.contentType,
        metadata: { ...base.metadata, [namespaceUrn]: { schema: m.toSchemaUrn, id: newMetadataId(), data: outcome.data, receipt: m.receipt } },
        reason: m.reason,
        labels: [],
      });
    } catch (err) {
      // Refused before addVersion wrote anything: this document fails, the batch goes on.
      const refusal = storageRefusal(err);
      if (!refusal) throw err;
      return refusal;
    }
    return 'migrated';
  }

  /**
   * GET .../metadata: per namespace the entry the reader's statuses show (envelope.ts): the
   * current version's canonical entry, else the namespace's derived entries by status.
   */
  async metadata(principal: Principal, documentId: string, reading: MetadataReading) {
    const doc = await this.readable(principal, documentId, 'meta.read');
    const [bundle, derived] = await Promise.all([
      doc.currentVersionId ? this.version(this.store, doc, doc.currentVersionId).then((v) => v.metadata) : Promise.resolve<Bundle>({}),
      this.derived.held(doc.tenant, documentId),
    ]);
    const held = new Map<string, NamespaceEntries>();
    for (const [ns, entry] of Object.entries(bundle)) held.set(ns, { canonical: entry, derived: derived.get(ns) ?? {} });
    for (const [ns, slots] of derived) if (!held.has(ns)) held.set(ns, { derived: slots });
    return bundleAnswer(held, reading);
  }

  /** Derived write: provenance required; validated by a job that stores each entry as valid or quarantined. */
  async writeDerived(principal: Principal, documentId: string, body: Record<string, unknown>, request: RequestInfo): Promise<{ jobId: string; deprecated: DeprecatedSchema[] }> {
    const doc = await this.document(principal, documentId);
    const entries = readBundle(body.bundle, 'bundle');
    for (const ns of Object.keys(entries)) requireCapability(principal, `meta.write:${ns}`);
    requireRule(doc.permissions, principal, 'meta.write');
    const provenance = readProvenance(body.provenance);
    const limit = this.storage.maxMetadataEntryBytes;
    for (const [ns, e] of Object.entries(entries)) {
      const bytes = Buffer.byteLength(JSON.stringify({ schema: e.schema, data: e.data, provenance }));
      if (bytes > limit) throw metadataEntryTooLarge(ns, bytes, limit);
    }
    // A schema not registered yet has no lifecycle: its entries are stored unverified.
    const deprecated = await checkLifecycles(this.schemas, principal, Object.values(entries).map((e) => e.schema), true);
    await this.checkProvenanceInput(doc, provenance);
    const jobId = await this.derived.enqueue(principal.tenant, { documentId, actor: principal.subject, entries, provenance, receipt: receiptOf(principal, request) });
    return { jobId, deprecated };
  }

  /**
   * A derived write's provenance names what the entry was derived from, so it must be content of
   * this document: `blob`, the content key (`b3:…`) of one of its versions; `view`, the key
   * (`v1:…`) of a view of the tenant made from one of them. Otherwise 422 provenance_input_unknown.
   */
  private async checkProvenanceInput(doc: DocumentRecord, provenance: Provenance): Promise<void> {
    const contents: string[] = [];
    for await (const { value } of this.store.scan(VERSIONS, { start: [doc.tenant, doc.documentId, ''], end: [doc.tenant, doc.documentId, '\uffff'] })) {
      if (!contents.includes(value.contentRef.key)) contents.push(value.contentRef.key);
    }
    const { kind, key } = provenance.input;
    const known = kind === 'blob' ? contents.includes(key) : (await this.storage.isViewOf?.(doc.tenant, key, contents)) ?? false;
    if (known) return;
    const what = kind === 'blob' ? 'the content key (b3:…) of a version of this document' : 'the key (v1:…) of a view made from a version of this document';
    throw new MetadataRejection('unprocessable', 'provenance_input_unknown', `provenance.input ${JSON.stringify({ kind, key })} is not content of document ${doc.documentId}: a ${kind} input must be ${what}`);
  }

  /** POST /v1/documents/{id}/migrate: a job moving one namespace's current entry to another schema version. */
  async migrate(principal: Principal, documentId: string, body: unknown, request: RequestInfo, keep?: InUnit<JobAnswer>): Promise<JobAnswer> {
    const doc = await this.document(principal, documentId);
    if (!isPlainObject(body)) throw badRequest('The body must be { namespaceUrn, toSchemaUrn, reason }');
    onlyKeys(body, ['namespaceUrn', 'toSchemaUrn', 'reason'], 'migrate');
    const { namespaceUrn, toSchemaUrn, reason } = body;
    if (typeof namespaceUrn !== 'string' || typeof toSchemaUrn !== 'string') throw badRequest('namespaceUrn and toSchemaUrn are required strings');
    if (typeof reason !== 'string' || reason.trim() === '') throw badRequest('reason is required');
    requireCapability(principal, `meta.write:${namespaceUrn}`);
    requireRule(doc.permissions, principal, 'meta.write');
    const entry = doc.currentVersionId ? (await this.version(this.store, doc, doc.currentVersionId)).metadata[namespaceUrn] : undefined;
    if (!entry) throw new SvcError('not_found', 'metadata_not_found', `The current version has no ${namespaceUrn} metadata`);
    const migration = await this.migrations.get(entry.schema, toSchemaUrn);
    if (!migration) throw new SvcError('not_found', 'migration_not_found', `No migration from ${entry.schema} to ${toSchemaUrn} is registered`);
    // A registered migration's schemas are registered.
    const [source, target] = (await Promise.all([this.schemas.get(entry.schema), this.schemas.get(toSchemaUrn)])) as [SchemaRecord, SchemaRecord];
    requireSchemaOwner(principal, source, 'migrating from it');
    requireSchemaOwner(principal, target, 'migrating to it');
    const deprecated = await checkLifecycles(this.schemas, principal, [toSchemaUrn]);
    const input: MigrateInput = {
      documentId, namespaceUrn, baseMetadataId: entry.id, data: entry.data, fromSchemaUrn: entry.schema, toSchemaUrn,
      ops: migration.forward.ops, targetSchema: target.jsonSchema, actor: principal.subject, reason, receipt: receiptOf(principal, request),
    };
    const job = await this.jobs.enqueue(principal.tenant, 'metadata.migrate', input, { within: keep && ((unit, j) => keep(unit, { jobId: j.jobId, deprecated })) });
    return { jobId: job.jobId, deprecated };
  }

  /**
   * A job of the principal's tenant, as the API shows it; with `waitMs`, once it is completed,
   * failed or dead, or when the wait is over (a long poll instead of many).
   */
  async job(principal: Principal, jobId: string, waitMs = 0) {
    if (!isUuid(jobId)) throw badRequest('The job id must be a UUID');
    const job = await this.jobs.get(principal.tenant, jobId);
    if (!job) throw jobNotFound(jobId);
    if (waitMs > 0) await this.jobs.settled(jobId, waitMs).catch(() => undefined);
    return jobJson(waitMs > 0 ? (await this.jobs.get(principal.tenant, jobId))! : job);
  }

  /** GET /v1/jobs: the tenant's jobs newest first, of one document and/or in one state (from the queue's indexes). */
  async listJobs(principal: Principal, filter: { documentId?: string; state?: string }, limit: number, cursor?: string) {
    const cursors = this.cursors.of('jobs', principal);
    const query = [filter.documentId ?? null, filter.state ?? null];
    const after = cursors.open(query, cursor);
    if (after !== undefined && !isUuid(after)) throw invalidCursor();
    const { jobs, next } = await this.jobs.list(principal.tenant, filter as { documentId?: string; state?: JobRecord['state'] }, limit, after);
    const page = jobs.map(jobJson);
    return next ? { jobs: page, nextCursor: cursors.seal(query, next) } : { jobs: page };
  }

  /** In the job's completion unit: a new version with the migrated entry, if the entry is still the one migrated. */
  private async applyMigration(unit: Unit, job: JobRecord, data: Record<string, unknown>) {
    const input = job.input as MigrateInput;
    const doc = await unit.get(DOCUMENTS, [job.tenant, input.documentId]);
    if (!doc?.currentVersionId) throw new JobError('document_not_found', 'The document no longer exists', false);
    const base = await this.version(unit, doc, doc.currentVersionId);
    const current = base.metadata[input.namespaceUrn];
    if (current?.id !== input.baseMetadataId) {
      throw new JobError('metadata_conflict', `The ${input.namespaceUrn} entry changed after the migration was requested (now ${current?.id ?? 'absent'}); request it again`, false);
    }
    try {
      await this.addVersion(unit, doc, { subject: input.actor }, {
        contentRef: base.contentRef,
        contentType: base.contentType,
        metadata: { ...base.metadata, [input.namespaceUrn]: { schema: input.toSchemaUrn, id: newMetadataId(), data, ...(input.receipt ? { receipt: input.receipt } : {}) } },
        baseMetadata: base.metadata,
        reason: input.reason,
        labels: [],
      });
    } catch (err) {
      const refusal = storageRefusal(err);
      throw refusal ? new JobError(refusal.code, refusal.message, false) : err;
    }
    return { derivedNamespaces: [], viewKeys: [] };
  }

  /** GET .../metadata/{ns}: the one namespace as the bundle (`metadata`) shows it; 404 when it shows nothing. */
  async namespace(principal: Principal, documentId: string, namespaceUrn: string, reading: MetadataReading) {
    const doc = await this.readable(principal, documentId, 'meta.read');
    const [canonical, derived] = await Promise.all([
      doc.currentVersionId ? this.version(this.store, doc, doc.currentVersionId).then((v) => v.metadata[namespaceUrn]) : Promise.resolve(undefined),
      this.derived.heldIn(doc.tenant, documentId, namespaceUrn),
    ]);
    const answer = namespaceAnswer(namespaceUrn, { canonical, derived }, reading);
    if (!answer) {
      const hint = reading.statuses.size === 3 ? '' : ` with status ${[...reading.statuses].join(',')} (status=valid,quarantined,unverified shows every entry)`;
      throw new SvcError('not_found', 'metadata_not_found', `The document has no ${namespaceUrn} metadata${hint}`);
    }
    return answer;
  }

  /** Canonical write (replace semantics per namespace): a new version. */
  async writeCanonical(principal: Principal, documentId: string, body: Record<string, unknown>, request: RequestInfo): Promise<{ versionId: string; metadataIds: Record<string, string>; deprecated: DeprecatedSchema[] }> {
    const doc = await this.document(principal, documentId);
    const { bundle, deprecated } = await this.canonicalBundle(principal, body.bundle, 'bundle', request);
    requireRule(doc.permissions, principal, 'meta.write');
    if (body.reason !== undefined && typeof body.reason !== 'string') throw new MetadataRejection('invalid', 'invalid_request', 'reason must be a string');
    return this.store.run(async (unit) => {
      const latest = (await unit.get(DOCUMENTS, [principal.tenant, documentId]))!;
      if (!latest.currentVersionId) throw new MetadataRejection('conflict', 'no_version', 'The document has no finalized version to add metadata to');
      const base = await this.version(unit, latest, latest.currentVersionId);
      const version = await this.addVersion(unit, latest, principal, {
        contentRef: base.contentRef,
        contentType: base.contentType,
        metadata: { ...base.metadata, ...bundle },
        baseMetadata: base.metadata,
        reason: (body.reason as string | undefined) ?? 'canonical metadata write',
        labels: [],
      });
      return { versionId: version.versionId, metadataIds: Object.fromEntries(Object.entries(bundle).map(([ns, e]) => [ns, e.id])), deprecated };
    });
  }

  /** RFC 6902 patch of one namespace entry's data, on top of `baseMetadataId`: a new version and an audit record. */
  async patch(principal: Principal, documentId: string, namespaceUrn: string, body: unknown, bodyBytes: number, request: RequestInfo): Promise<{ versionId: string; newMetadataId: string; deprecated: DeprecatedSchema[] }> {
    const doc = await this.document(principal, documentId);
    requireCapability(principal, `meta.patch:${namespaceUrn}`);
    requireRule(doc.permissions, principal, 'meta.patch');
    const patchRequest = checkPatchBody(body, bodyBytes);
    const current = doc.currentVersionId ? (await this.version(this.store, doc, doc.currentVersionId)).metadata[namespaceUrn] : undefined;
    const deprecated = current ? await checkLifecycles(this.schemas, principal, [current.schema]) : [];
    const receipt = receiptOf(principal, request);
    const outcome = await this.store.run(async (unit) => {
      const latest = (await unit.get(DOCUMENTS, [principal.tenant, documentId]))!;
      const base = latest.currentVersionId ? await this.version(unit, latest, latest.currentVersionId) : undefined;
      const entry = base?.metadata[namespaceUrn];
      if (!base || !entry) throw new MetadataRejection('not_found', 'metadata_not_found', `The current version has no ${namespaceUrn} metadata`);
      if (entry.id !== patchRequest.baseMetadataId) {
        throw new MetadataRejection('conflict', 'metadata_conflict', `baseMetadataId ${patchRequest.baseMetadataId} is not the current entry`, { currentMetadataId: entry.id });
      }
      const data = applyEntryPatch(entry, namespaceUrn, patchRequest.patch, this.storage.maxMetadataEntryBytes);
      const issues = await this.schemas.validate(entry.schema, data);
      if (issues.length) throw MetadataRejection.invalid(issues.map((i) => ({ ...i, path: `/data${i.path === '/' ? '' : i.path}` })));
      const metadataId = newMetadataId();
      const version = await this.addVersion(unit, latest, principal, {
        contentRef: base.contentRef,
        contentType: base.contentType,
        metadata: { ...base.metadata, [namespaceUrn]: { schema: entry.schema, id: metadataId, data, receipt } },
        baseMetadata: base.metadata,
        reason: patchRequest.reason,
        labels: [],
      });
      unit.put(PATCHES, [latest.tenant, documentId, namespaceUrn, metadataId], {
        newMetadataId: metadataId, baseMetadataId: entry.id, namespaceUrn, versionId: version.versionId, patch: patchRequest.patch, actor: principal.subject, reason: patchRequest.reason, at: Date.now(),
      });
      return { versionId: version.versionId, newMetadataId: metadataId };
    });
    return { ...outcome, deprecated };
  }

  /** The patches applied to a namespace, oldest first: the immutable audit record. */
  async patchHistory(principal: Principal, documentId: string, namespaceUrn: string) {
    const doc = await this.readable(principal, documentId, 'meta.read');
    const patches = [];
    for await (const { value } of this.store.scan(PATCHES, { start: [doc.tenant, documentId, namespaceUrn, ''], end: [doc.tenant, documentId, namespaceUrn, '\uffff'] })) {
      patches.push({ ...value, at: new Date(value.at).toISOString() });
    }
    return { namespaceUrn, patches };
  }

  /**
   * A request bundle checked (its schemas' lifecycles included) and validated as canonical
   * metadata; entries get new ids and the request's receipt. Returns the deprecated schemas it uses.
   */
  private async canonicalBundle(principal: Principal, raw: unknown, where: string, request: RequestInfo): Promise<{ bundle: Bundle; deprecated: DeprecatedSchema[] }> {
    const entries = readBundle(raw, where);
    for (const ns of Object.keys(entries)) requireCapability(principal, `meta.write:${ns}`);
    const issues = [];
    const records = [];
    for (const [ns, e] of Object.entries(entries)) {
      const schema = await this.schemas.get(e.schema);
      if (schema) records.push(schema);
      if (!schema) {
        issues.push({ path: `/namespaces/${ns}/schema`, code: 'schema_not_found', message: `No schema ${e.schema} is registered` });
        continue;
      }
      if (schema.namespaceUrn !== ns) {
        issues.push({ path: `/namespaces/${ns}/schema`, code: 'schema_namespace_mismatch', message: `${e.schema} is a schema of ${schema.namespaceUrn}` });
        continue;
      }
      for (const i of await this.schemas.validate(e.schema, e.data)) issues.push({ ...i, path: `/namespaces/${ns}/data${i.path === '/' ? '' : i.path}` });
    }
    if (issues.length) throw MetadataRejection.invalid(issues);
    // The records read above carry their lifecycle: not read again.
    const deprecated = lifecycleRules(principal, records);
    const receipt = receiptOf(principal, request);
    return { bundle: Object.fromEntries(Object.entries(entries).map(([ns, e]) => [ns, { schema: e.schema, id: newMetadataId(), data: e.data, receipt }])), deprecated };
  }

  /**
   * In a unit that read `doc` (so that a version added meanwhile makes it run again): stores a
   * new version after the document's current one and moves CURRENT (and `labels`) to it.
   */
  private async addVersion(unit: Unit, doc: DocumentRecord, principal: Pick<Principal, 'subject'>, v: { contentRef: ContentRef; contentType: string; metadata: Bundle; reason: string; labels: string[]; baseMetadata?: Bundle }): Promise<VersionRecord> {
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
  private async holdNewEntries(unit: Unit, tenant: string, metadata: Bundle, stored: readonly Bundle[]): Promise<void> {
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

  private async upload(principal: Principal, uploadId: string): Promise<UploadRecord> {
    if (!isUuid(uploadId)) throw badRequest('The upload id must be a UUID');
    const upload = await this.store.get(UPLOADS, uploadId);
    if (!upload || upload.tenant !== principal.tenant) throw uploadNotFound(uploadId);
    return upload;
  }

  /** The document of the principal's tenant (another tenant's is 404). */
  async document(principal: Principal, documentId: string): Promise<DocumentRecord> {
    if (!isUuid(documentId)) throw badRequest('The document id must be a UUID');
    const doc = await this.store.get(DOCUMENTS, [principal.tenant, documentId]);
    if (!doc) throw documentNotFound(documentId);
    return doc;
  }

  /** The document of the principal's tenant when its rules let the principal do `action`. */
  private async readable(principal: Principal, documentId: string, action: string): Promise<DocumentRecord> {
    const doc = await this.document(principal, documentId);
    requireRule(doc.permissions, principal, action);
    return doc;
  }

  /** A version of `doc`, read in `reads` (a unit, or the store for the latest committed one). */
  private async version(reads: Pick<Unit, 'get'>, doc: DocumentRecord, versionId: string): Promise<VersionRecord> {
    const v = await reads.get(VERSIONS, [doc.tenant, doc.documentId, versionId]);
    if (!v) throw new SvcError('internal', 'storage_failure', 'A version of this document is missing from the catalog');
    return v;
  }

  // ---- content from elsewhere (legacy import, engine/legacy/import.ts) ----

  /**
   * Streams `pieces` through the same ingest as an upload's bytes, within `tenant`'s limits, and
   * records the content under its `b3:<hex>` key as the tenant's, as `beginBytes` does. A piece is
   * only read during the push; when the ingest is full (`push` false) the next piece waits for `onResume`.
   */
  async ingestContent(tenant: string, pieces: AsyncIterable<Uint8Array>, options: Pick<IngestOptions, 'contentType' | 'declaredLength'>): Promise<{ key: string; size: number; mediaType: string }> {
    const { ingest, hash, recorded } = this.contentIngest(tenant, options);
    try {
      await pushAll(ingest, pieces, (piece) => hash.update(piece));
      return await recorded(async () => {});
    } catch (err) {
      ingest.abort();
      throw err;
    }
  }

  /**
   * In the caller's unit: document `documentId` of `tenant` with its first version on recorded
   * content `contentKey` (a finalized upload beside it, as if uploaded), or, when the document
   * exists, nothing (`created` false).
   */
  async createWithContent(
    unit: Unit,
    tenant: string,
    documentId: string,
    actor: string,
    d: { externalRefs: ExternalRef[]; placementHint: PlacementHint; contentKey: string; contentType: string; reason: string },
  ): Promise<{ created: boolean; externalRefs: ExternalRef[] }> {
    const existing = await unit.get(DOCUMENTS, [tenant, documentId]);
    if (existing) return { created: false, externalRefs: existing.externalRefs };
    const content = await unit.get(CONTENT_KEYS, d.contentKey);
    if (!content) throw new Error(`content ${d.contentKey} is not recorded`);
    const now = Date.now();
    const uploadId = newId();
    const doc: DocumentRecord = {
      documentId, tenant, currentVersionId: null, externalRefs: d.externalRefs, permissions: [], initialMetadata: {},
      placementHint: d.placementHint, uploadId, createdBy: actor, createdAt: now, updatedAt: now,
    };
    unit.put(DOCUMENTS, [tenant, documentId], doc);
    this.index.addDocument(unit, doc);
    const version = await this.addVersion(unit, doc, { subject: actor }, { contentRef: { kind: 'blob', key: d.contentKey }, contentType: d.contentType, metadata: {}, reason: d.reason, labels: [] });
    unit.put(UPLOADS, uploadId, {
      uploadId, tenant, documentId, state: 'finalized', versionId: version.versionId,
      content: { key: d.contentKey, size: content.record.size, mediaType: d.contentType },
    });
    return { created: true, externalRefs: doc.externalRefs };
  }
}

/** A refusal of stored bytes (an entry too large, the quota) that a migration reports as its failure. */
function storageRefusal(err: unknown): { code: string; message: string } | undefined {
  if (err instanceof SvcError && (err.code === 'metadata_entry_too_large' || err.code === 'tenant_storage_quota_exceeded')) return { code: err.code, message: err.message };
  return undefined;
}
