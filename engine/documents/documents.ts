// Documents: their creation, their bytes (an upload into the CAS, BLAKE3 beside it), the first and
// later versions' content, labels and the reads of documents, versions and content; and content
// from elsewhere (legacy imports). Records and versions are ./records.ts's; metadata is
// ./metadata-service.ts's, migrations and jobs ./document-jobs.ts's. No HTTP here: the capability
// a request needs whatever it names (doc.create, doc.read) is the caller's to check; the
// documents' permission rules and `meta.write:<ns>` of initial metadata are checked here.

import type { CursorSeal, Principal } from '../auth/index.js';
import type { BlockRoots } from '../cas/index.js';
import { type DirectIngest, type IngestOptions, pushAll } from '../cas/index.js';
import { Manifest } from '../store/index.js';
import { SvcError } from '../base/errors.js';
import type { Unit } from '../store/index.js';
import type { InUnit } from '../idempotency/index.js';
import type { DocumentFilter } from './document-index.js';
import { Blake3Stream } from './blake3-stream.js';
import { canonicalBundle } from './canonical-bundle.js';
import type { CreateDocument, FinalizeUpload, Parse } from './commands.js';
import { type ContentRef, type DocumentRecord, type ExternalRef, type PlacementHint, type RequestInfo, badRequest, documentNotFound, isUuid, newId } from './model.js';
import type { Created, Finalized } from './outcomes.js';
import { requireRule } from './permissions.js';
import { CONTENT_KEYS, DOCUMENTS, type DocumentRecords, LABELS, UPLOADS, VERSIONS, rowsOf, summary } from './records.js';
import type { SchemaRegistry } from './schemas.js';

/** An upload's bytes being received: push them into `ingest` and `hash`, then `finish`. */
export interface BytesUpload {
  ingest: DirectIngest;
  hash: Blake3Stream;
  finish(): Promise<void>;
}

export class Documents {
  constructor(
    private readonly records: DocumentRecords,
    private readonly schemas: SchemaRegistry,
    private readonly startIngest: (options: IngestOptions) => DirectIngest,
    private readonly cursors: CursorSeal,
  ) {}

  /** What a catalog from before the platform's indexes and ledger lacks (./records.ts). */
  open(): Promise<void> {
    return this.records.open();
  }

  /** The bytes of the distinct contents and metadata entries the tenant's documents and uploads stored (its quota counts them with its blobs). */
  retainedBytes(tenant: string): Promise<number> {
    return this.records.ledger.bytes(tenant);
  }

  /** Blocks of document content (unlisted manifests): garbage collection keeps them. */
  blockRoots(): BlockRoots {
    const store = this.records.store;
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

  /** POST /v1/documents: a new document and its upload, or (same documentId again) the same ones. */
  async create(principal: Principal, cmd: CreateDocument, request: RequestInfo, keep?: InUnit<Created>): Promise<Created> {
    const { bundle: initialMetadata, deprecated } = cmd.initialMetadata === undefined ? { bundle: {}, deprecated: [] } : await canonicalBundle(this.schemas, principal, cmd.initialMetadata, request);
    const documentId = cmd.documentId ?? newId();
    const { externalRefs, permissions, placementHint } = cmd;
    const now = Date.now();
    return this.records.store.run(async (unit) => {
      // An id minted here is new: only one the caller chose can name a document already (a read, on pg-s3 a statement).
      const existing = cmd.documentId === undefined ? undefined : await unit.get(DOCUMENTS, [principal.tenant, documentId]);
      if (existing) {
        requireRule(existing.permissions, principal, 'doc.write');
        const again = { documentId, uploadId: existing.uploadId, created: false, deprecated };
        await keep?.(unit, again);
        return again;
      }
      await this.records.holdNewEntries(unit, principal.tenant, initialMetadata, []);
      const uploadId = newId();
      const fresh: DocumentRecord = {
        documentId, tenant: principal.tenant, currentVersionId: null, externalRefs, permissions, initialMetadata,
        placementHint: placementHint ?? 'transient', uploadId, createdBy: principal.subject, createdAt: now, updatedAt: now,
      };
      unit.put(DOCUMENTS, [principal.tenant, documentId], fresh);
      this.records.index.addDocument(unit, fresh);
      unit.put(UPLOADS, uploadId, { uploadId, tenant: principal.tenant, documentId, state: 'open' });
      this.records.uploadCreated(unit, uploadId, documentId);
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
    const meter = await this.records.storage.admitContent(principal, options.declaredLength);
    const { upload, doc, copy } = await this.records.uploadAndDocument(principal, uploadId);
    requireRule(doc.permissions, principal, 'doc.write');
    if (upload.state === 'finalized') throw new SvcError('conflict', 'upload_finalized', 'The upload is finalized; its bytes cannot change');
    const { ingest, hash, recorded } = this.contentIngest(principal.tenant, { ...options, meter });
    const finish = async () => {
      await recorded(async (unit, content) => {
        // The record read above, taken as known (on pg-s3 no second read): if it changed since, the commit fails and this reads it.
        const current = await unit.getKnown(UPLOADS, uploadId, upload, copy);
        if (!current || current.state === 'finalized') throw new SvcError('conflict', 'upload_finalized', 'The upload was finalized meanwhile');
        if (copy) await this.checkedAgain(unit, principal, doc);
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
      maxObjectBytes: this.records.storage.limits(tenant).maxObjectBytes,
      unlisted: true,
      beforeRecord: async (size) => this.records.ledger.checkRoom(tenant, await contentKey(), size),
      // pg-s3: the blocks are recorded by the unit below, in its commit (no statement of their own).
      recordedByUnit: this.records.store.recordsBlocks,
    });
    const hash = new Blake3Stream();
    let digest: Promise<string> | undefined;
    // Asked for by the check before recording and by the record itself: the digest is taken once.
    const contentKey = () => (digest ??= hash.hex().then((hex) => `b3:${hex}`));
    const recorded = async (step: (unit: Unit, content: { key: string; size: number; mediaType: string }) => Promise<void>) => {
      const ended = ingest.endUnlisted();
      try {
        const [result, key] = await Promise.all([ended, contentKey()]);
        const room = await this.records.ledger.room(tenant);
        const content = { key, size: result.record.size, mediaType: result.mediaType };
        await this.records.store.run(async (unit) => {
          // Under a quota the ledger's reads decide (with the content key's, in one round trip);
          // without, the commit writes both records where they are absent (no read).
          if (room) await unit.prefetch([...this.records.ledger.holdReads(tenant, key), { table: CONTENT_KEYS, key }]);
          await this.records.ledger.hold(unit, tenant, key, content.size, room);
          unit.putIfAbsent(CONTENT_KEYS, key, { blobId: result.id, record: result.record });
          // The blocks the content key names are recorded with it, or (the unit fails) not at all:
          // GC then finds them in the block store with no record, as a failed upload's.
          if (result.toRecord) unit.recordBlocks(result.toRecord.blocks);
          await step(unit, content);
        });
        return content;
      } finally {
        // Committed or given up: the ingest's end is reported to GC only now.
        ended.then((result) => result.toRecord?.settle(), () => {});
      }
    };
    return { ingest, hash, recorded };
  }

  /**
   * In a unit of the bytes' PUT or the finalize whose checks ran on this node's copies (maybe
   * stale: records.uploadAndDocument): the document is a precondition and its rule is checked
   * again on it, so a commit verifies what the checks saw, and a step run again checks fresh reads.
   */
  private async checkedAgain(unit: Unit, principal: Principal, doc: DocumentRecord): Promise<DocumentRecord> {
    const latest = await unit.getKnown(DOCUMENTS, [principal.tenant, doc.documentId], doc, true);
    if (!latest) throw documentNotFound(doc.documentId);
    requireRule(latest.permissions, principal, 'doc.write');
    return latest;
  }

  /** POST /v1/uploads/{id}/finalize: the document's first version (again: the same answer). */
  async finalize(principal: Principal, uploadId: string, parse: Parse<FinalizeUpload>, keep?: InUnit<Finalized>): Promise<Finalized> {
    const { records } = this;
    const { upload, doc, copy } = await records.uploadAndDocument(principal, uploadId);
    requireRule(doc.permissions, principal, 'doc.write');
    const cmd = parse();
    return records.store.run(async (unit) => {
      // The upload and the document read above, taken as known (on pg-s3 no second read): if
      // either changed since, the commit fails and the step runs again on fresh reads.
      const current = (await unit.getKnown(UPLOADS, uploadId, upload, copy))!;
      const checked = copy ? await this.checkedAgain(unit, principal, doc) : undefined;
      if (current.state === 'finalized') {
        const version = await records.version(unit, doc, current.versionId!);
        const again = { documentId: current.documentId, versionId: current.versionId!, contentRef: version.contentRef, created: false };
        await keep?.(unit, again);
        return again;
      }
      if (current.state !== 'received' || !current.content) throw new SvcError('conflict', 'upload_incomplete', 'PUT the bytes of the upload before finalizing it');
      const contentRef: ContentRef = { kind: 'blob', key: current.content.key };
      const latest = checked ?? (await unit.getKnown(DOCUMENTS, [principal.tenant, doc.documentId], doc))!;
      const version = await records.addVersion(unit, latest, principal, {
        contentRef,
        contentType: current.content.mediaType,
        metadata: latest.currentVersionId ? await records.currentMetadata(unit, latest) : latest.initialMetadata,
        reason: cmd.reason ?? 'upload finalized',
        labels: cmd.labels,
      });
      unit.put(UPLOADS, uploadId, { ...current, state: 'finalized', versionId: version.versionId });
      const made = { documentId: doc.documentId, versionId: version.versionId, contentRef, created: true };
      await keep?.(unit, made);
      return made;
    });
  }

  async get(principal: Principal, documentId: string) {
    return summary(await this.records.readable(principal, documentId, 'doc.read'));
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
    const { entries, more } = await this.records.index.scan(principal.tenant, filter, limit * 4 + 16, cursors.open(query, cursor));
    const documents: Array<ReturnType<typeof summary>> = [];
    let next = more && entries.length > 0 ? entries[entries.length - 1]!.position : undefined;
    for (let i = 0; i < entries.length; i++) {
      if (documents.length === limit) {
        next = entries[i - 1]!.position;
        break;
      }
      const doc = await this.records.store.get(DOCUMENTS, [principal.tenant, entries[i]!.documentId]);
      if (doc && (await this.listable(doc, principal, filter))) documents.push(summary(doc));
    }
    return next ? { documents, nextCursor: cursors.seal(query, next) } : { documents };
  }

  /** The filters the index did not apply, and the document's own read rule. */
  private async listable(doc: DocumentRecord, principal: Principal, filter: DocumentFilter): Promise<boolean> {
    if (filter.label !== undefined && !(await this.records.store.has(LABELS, [doc.tenant, doc.documentId, filter.label]))) return false;
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

  async listVersions(principal: Principal, documentId: string) {
    const doc = await this.records.readable(principal, documentId, 'doc.read');
    const labelsOf = new Map<string, string[]>();
    for (const { key, value } of await this.records.store.range(LABELS, rowsOf(doc))) {
      labelsOf.set(value, [...(labelsOf.get(value) ?? []), key[2]]);
    }
    const versions = [];
    for await (const { value } of this.records.store.scan(VERSIONS, rowsOf(doc))) {
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
    const doc = await this.records.readable(principal, documentId, 'doc.read');
    if (!doc.currentVersionId) throw new SvcError('not_found', 'content_not_found', 'The document has no finalized version yet');
    const version = await this.records.version(this.records.store, doc, doc.currentVersionId);
    const content = await this.records.store.get(CONTENT_KEYS, version.contentRef.key);
    if (!content) throw new SvcError('internal', 'storage_failure', 'The content of this version is missing from the catalog');
    return { documentId: doc.documentId, manifest: new Manifest(content.blobId, content.record), key: version.contentRef.key, mediaType: version.contentType, createdAt: version.createdAt };
  }

  /** Stored document content by key (`b3:<hex>`): its manifest, if the catalog has it. */
  async contentManifest(key: string): Promise<Manifest | undefined> {
    const content = await this.records.store.get(CONTENT_KEYS, key);
    return content ? new Manifest(content.blobId, content.record) : undefined;
  }

  /**
   * The content of `sourceVersion` (`current` or a versionId of the document) for a workflow:
   * the principal's document, the rule `action` on it.
   */
  async sourceContent(principal: Principal, documentId: string, sourceVersion: string, action: string) {
    const doc = await this.records.document(principal, documentId);
    requireRule(doc.permissions, principal, action);
    const versionId = sourceVersion === 'current' ? doc.currentVersionId : sourceVersion;
    if (versionId === null) throw new SvcError('not_found', 'content_not_found', 'The document has no finalized version yet');
    if (!isUuid(versionId)) throw badRequest('sourceVersion must be "current" or a versionId of the document');
    const version = await this.records.store.get(VERSIONS, [doc.tenant, doc.documentId, versionId]);
    if (!version) throw new SvcError('not_found', 'version_not_found', `The document has no version ${versionId}`);
    const manifest = await this.contentManifest(version.contentRef.key);
    if (!manifest) throw new SvcError('internal', 'storage_failure', 'The content of this version is missing from the catalog');
    return { documentId: doc.documentId, versionId, contentRef: version.contentRef, contentType: version.contentType, size: manifest.record.size };
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
    this.records.index.addDocument(unit, doc);
    const version = await this.records.addVersion(unit, doc, { subject: actor }, { contentRef: { kind: 'blob', key: d.contentKey }, contentType: d.contentType, metadata: {}, reason: d.reason, labels: [] });
    unit.put(UPLOADS, uploadId, {
      uploadId, tenant, documentId, state: 'finalized', versionId: version.versionId,
      content: { key: d.contentKey, size: content.record.size, mediaType: d.contentType },
    });
    return { created: true, externalRefs: doc.externalRefs };
  }
}

