// Metadata of documents: canonical writes (a new version), derived writes (validated by a job),
// RFC 6902 patches of one entry with their immutable audit (owner of `doc_patches`), the reads of
// a document's metadata in either envelope, search by metadata, and schema registration. Schemas
// and migrations are registered through `schemas` and `migrations`. Records and versions are
// ./records.ts's. No HTTP here: requests arrive as typed commands (./commands.ts); the capability
// a request needs whatever it names (meta.read) is the caller's to check; those that depend on what
// it names (meta.write:<ns>, meta.patch:<ns>) and the documents' permission rules are checked here.

import type { CursorSeal, Principal } from '../auth/index.js';
import type { JobQueue } from '../jobs/index.js';
import { SvcError } from '../base/errors.js';
import { table } from '../store/index.js';
import type { DerivedMetadata } from './derived.js';
import type { Provenance } from './doc-jobs.js';
import { canonicalBundle } from './canonical-bundle.js';
import type { CanonicalWrite, DerivedWriteRequest, Parse, PatchEntry, SchemaRegistration } from './commands.js';
import { type MetadataReading, type NamespaceEntries, bundleAnswer, namespaceAnswer } from './envelope.js';
import { MetadataRejection, applyEntryPatch, metadataEntryTooLarge } from './metadata.js';
import type { MigrationRegistry } from './migrations.js';
import { type Bundle, type DocumentRecord, type RequestInfo, newMetadataId, receiptOf } from './model.js';
import { requireCapability, requireRule } from './permissions.js';
import { DOCUMENTS, type DocumentRecords, VERSIONS, rowsOf, summary } from './records.js';
import { type DeprecatedSchema, MAINTENANCE_TENANT, checkLifecycles } from './schema-lifecycle.js';
import type { SchemaRegistry } from './schemas.js';
import type { SearchQuery } from './search-request.js';

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

export class Metadata {
  /** Derived metadata (./derived.ts): workflows record their entries through it. */
  readonly derived: DerivedMetadata;

  constructor(
    private readonly records: DocumentRecords,
    readonly schemas: SchemaRegistry,
    readonly migrations: MigrationRegistry,
    private readonly jobs: JobQueue,
    private readonly cursors: CursorSeal,
  ) {
    this.derived = records.derived;
  }

  /**
   * POST /v1/schemas: registers a schema; entries written before it existed (unverified) are
   * re-checked by a job enqueued in the registering unit.
   */
  registerSchema(owner: string | undefined, registration: SchemaRegistration) {
    return this.schemas.register(registration, owner, async (unit, urn) => {
      if (await this.derived.waitingFor(unit, urn)) this.jobs.enqueueIn(unit, MAINTENANCE_TENANT, 'metadata.recheck', { schemaUrn: urn });
    });
  }

  /**
   * POST /v1/documents/search: the tenant's documents whose current entry of a namespace
   * (canonical, or the valid derived one) has every pointer of `where` equal to its value, in
   * documentId order, those the principal may not read (doc.read and meta.read) left out.
   */
  async search(principal: Principal, parse: Parse<SearchQuery>) {
    requireCapability(principal, 'meta.read');
    const query = parse();
    const page = await this.records.metaIndex.search(principal.tenant, query, async (documentId) => {
      const doc = await this.records.store.get(DOCUMENTS, [principal.tenant, documentId]);
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
      if (query.mode === 'derived') return (await this.records.derived.heldIn(principal.tenant, documentId, query.namespaceUrn)).valid?.data;
      const doc = await this.records.store.get(DOCUMENTS, [principal.tenant, documentId]);
      return doc?.currentVersionId ? (await this.records.version(this.records.store, doc, doc.currentVersionId)).metadata[query.namespaceUrn]?.data : undefined;
    }, this.cursors.of('search', principal));
    return page.nextCursor ? { documents: page.items, nextCursor: page.nextCursor } : { documents: page.items };
  }

  /**
   * GET .../metadata: per namespace the entry the reader's statuses show (envelope.ts): the
   * current version's canonical entry, else the namespace's derived entries by status.
   */
  async metadata(principal: Principal, documentId: string, reading: MetadataReading) {
    const doc = await this.records.readable(principal, documentId, 'meta.read');
    const [bundle, derived] = await Promise.all([
      doc.currentVersionId ? this.records.version(this.records.store, doc, doc.currentVersionId).then((v) => v.metadata) : Promise.resolve<Bundle>({}),
      this.records.derived.held(doc.tenant, documentId),
    ]);
    const held = new Map<string, NamespaceEntries>();
    for (const [ns, entry] of Object.entries(bundle)) held.set(ns, { canonical: entry, derived: derived.get(ns) ?? {} });
    for (const [ns, slots] of derived) if (!held.has(ns)) held.set(ns, { derived: slots });
    return bundleAnswer(held, reading);
  }

  /** Derived write: provenance required; validated by a job that stores each entry as valid or quarantined. */
  async writeDerived(principal: Principal, documentId: string, parse: Parse<DerivedWriteRequest>, request: RequestInfo): Promise<{ jobId: string; deprecated: DeprecatedSchema[] }> {
    const doc = await this.records.document(principal, documentId);
    const { bundle: entries, provenance } = parse();
    for (const ns of Object.keys(entries)) requireCapability(principal, `meta.write:${ns}`);
    requireRule(doc.permissions, principal, 'meta.write');
    const limit = this.records.storage.maxMetadataEntryBytes;
    for (const [ns, e] of Object.entries(entries)) {
      const bytes = Buffer.byteLength(JSON.stringify({ schema: e.schema, data: e.data, provenance }));
      if (bytes > limit) throw metadataEntryTooLarge(ns, bytes, limit);
    }
    // A schema not registered yet has no lifecycle: its entries are stored unverified.
    const deprecated = await checkLifecycles(this.schemas, principal, Object.values(entries).map((e) => e.schema), true);
    await this.checkProvenanceInput(doc, provenance);
    const jobId = await this.records.derived.enqueue(principal.tenant, { documentId, actor: principal.subject, entries, provenance, receipt: receiptOf(principal, request) });
    return { jobId, deprecated };
  }

  /**
   * A derived write's provenance names what the entry was derived from, so it must be content of
   * this document: `blob`, the content key (`b3:…`) of one of its versions; `view`, the key
   * (`v1:…`) of a view of the tenant made from one of them. Otherwise 422 provenance_input_unknown.
   */
  private async checkProvenanceInput(doc: DocumentRecord, provenance: Provenance): Promise<void> {
    const contents: string[] = [];
    for await (const { value } of this.records.store.scan(VERSIONS, rowsOf(doc))) {
      if (!contents.includes(value.contentRef.key)) contents.push(value.contentRef.key);
    }
    const { kind, key } = provenance.input;
    const known = kind === 'blob' ? contents.includes(key) : (await this.records.storage.isViewOf?.(doc.tenant, key, contents)) ?? false;
    if (known) return;
    const what = kind === 'blob' ? 'the content key (b3:…) of a version of this document' : 'the key (v1:…) of a view made from a version of this document';
    throw new MetadataRejection('unprocessable', 'provenance_input_unknown', `provenance.input ${JSON.stringify({ kind, key })} is not content of document ${doc.documentId}: a ${kind} input must be ${what}`);
  }

  /** GET .../metadata/{ns}: the one namespace as the bundle (`metadata`) shows it; 404 when it shows nothing. */
  async namespace(principal: Principal, documentId: string, namespaceUrn: string, reading: MetadataReading) {
    const doc = await this.records.readable(principal, documentId, 'meta.read');
    const [canonical, derived] = await Promise.all([
      doc.currentVersionId ? this.records.version(this.records.store, doc, doc.currentVersionId).then((v) => v.metadata[namespaceUrn]) : Promise.resolve(undefined),
      this.records.derived.heldIn(doc.tenant, documentId, namespaceUrn),
    ]);
    const answer = namespaceAnswer(namespaceUrn, { canonical, derived }, reading);
    if (!answer) {
      const hint = reading.statuses.size === 3 ? '' : ` with status ${[...reading.statuses].join(',')} (status=valid,quarantined,unverified shows every entry)`;
      throw new SvcError('not_found', 'metadata_not_found', `The document has no ${namespaceUrn} metadata${hint}`);
    }
    return answer;
  }

  /** Canonical write (replace semantics per namespace): a new version. */
  async writeCanonical(principal: Principal, documentId: string, parse: Parse<CanonicalWrite>, request: RequestInfo): Promise<{ versionId: string; metadataIds: Record<string, string>; deprecated: DeprecatedSchema[] }> {
    return this.records.store.run(async (unit) => {
      // The checks in their order (an unknown document is 404 whatever the body), on the unit's
      // read of the document, which is also the write's precondition: one read, not two (pg-s3:
      // a round trip). A unit run again checks and validates again.
      const latest = await this.records.document(principal, documentId, unit);
      const cmd = parse();
      const { bundle, deprecated } = await canonicalBundle(this.schemas, principal, cmd.bundle, request);
      requireRule(latest.permissions, principal, 'meta.write');
      if (!latest.currentVersionId) throw new MetadataRejection('conflict', 'no_version', 'The document has no finalized version to add metadata to');
      const base = await this.records.version(unit, latest, latest.currentVersionId);
      const version = await this.records.addVersion(unit, latest, principal, {
        contentRef: base.contentRef,
        contentType: base.contentType,
        metadata: { ...base.metadata, ...bundle },
        baseMetadata: base.metadata,
        reason: cmd.reason ?? 'canonical metadata write',
        labels: [],
      });
      return { versionId: version.versionId, metadataIds: Object.fromEntries(Object.entries(bundle).map(([ns, e]) => [ns, e.id])), deprecated };
    });
  }

  /** RFC 6902 patch of one namespace entry's data, on top of `baseMetadataId`: a new version and an audit record. */
  async patch(principal: Principal, documentId: string, namespaceUrn: string, parse: Parse<PatchEntry>, request: RequestInfo): Promise<{ versionId: string; newMetadataId: string; deprecated: DeprecatedSchema[] }> {
    const doc = await this.records.document(principal, documentId);
    requireCapability(principal, `meta.patch:${namespaceUrn}`);
    requireRule(doc.permissions, principal, 'meta.patch');
    const patchRequest = parse();
    const current = doc.currentVersionId ? (await this.records.version(this.records.store, doc, doc.currentVersionId)).metadata[namespaceUrn] : undefined;
    const deprecated = current ? await checkLifecycles(this.schemas, principal, [current.schema]) : [];
    const receipt = receiptOf(principal, request);
    const outcome = await this.records.store.run(async (unit) => {
      const latest = (await unit.get(DOCUMENTS, [principal.tenant, documentId]))!;
      const base = latest.currentVersionId ? await this.records.version(unit, latest, latest.currentVersionId) : undefined;
      const entry = base?.metadata[namespaceUrn];
      if (!base || !entry) throw new MetadataRejection('not_found', 'metadata_not_found', `The current version has no ${namespaceUrn} metadata`);
      if (entry.id !== patchRequest.baseMetadataId) {
        throw new MetadataRejection('conflict', 'metadata_conflict', `baseMetadataId ${patchRequest.baseMetadataId} is not the current entry`, { currentMetadataId: entry.id });
      }
      const data = applyEntryPatch(entry, namespaceUrn, patchRequest.patch, this.records.storage.maxMetadataEntryBytes);
      const issues = await this.schemas.validate(entry.schema, data);
      if (issues.length) throw MetadataRejection.invalid(issues.map((i) => ({ ...i, path: `/data${i.path === '/' ? '' : i.path}` })));
      const metadataId = newMetadataId();
      const version = await this.records.addVersion(unit, latest, principal, {
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
    const doc = await this.records.readable(principal, documentId, 'meta.read');
    const patches = [];
    for await (const { value } of this.records.store.scan(PATCHES, { start: [doc.tenant, documentId, namespaceUrn, ''], end: [doc.tenant, documentId, namespaceUrn, '\uffff'] })) {
      patches.push({ ...value, at: new Date(value.at).toISOString() });
    }
    return { namespaceUrn, patches };
  }
}
