// Derived metadata (a workflow's or a client's output, never truth): owner of the `doc_derived`
// table and of the `metadata.derived` job kind. Per (tenant, document, namespace) the last valid
// entry, and beside it the last quarantined one, so an invalid write never displaces a valid one.

import { JobError, type JobQueue, type JobRecord } from '../jobs/index.js';
import { type Unit, type UnitStore, table } from '../store/index.js';
import { DOC_JOBS_MODULE, type DerivedInput, type Provenance } from './doc-jobs.js';
import { MetadataIndex } from './metadata-index.js';
import { newMetadataId } from './model.js';
import type { SchemaRegistry } from './schemas.js';
import type { ValidationIssue } from './validator.js';

interface DerivedEntry {
  schema: string;
  id: string;
  data: Record<string, unknown>;
  status: 'valid' | 'quarantined';
  issues: ValidationIssue[];
  provenance: Provenance;
  jobId: string;
  actor: string;
  at: number;
}

type DerivedKey = [tenant: string, documentId: string, namespace: string] | [tenant: string, documentId: string, namespace: string, 'quarantined'];

const ENTRIES = table<DerivedEntry, DerivedKey>('doc_derived');

/** One entry to record: its schema, data, provenance and who asked for it. */
export interface DerivedWrite {
  schema: string;
  data: Record<string, unknown>;
  provenance: Provenance;
  actor: string;
}

export class DerivedMetadata {
  /** Valid entries are searchable (./metadata-index.ts, mode 'd'). */
  private readonly searchIndex: MetadataIndex;

  constructor(
    private readonly store: UnitStore,
    private readonly jobs: JobQueue,
    private readonly schemas: SchemaRegistry,
    /** Whether the tenant's document exists (read in each completing unit: a precondition). */
    private readonly documentExists: (unit: Unit, tenant: string, documentId: string) => Promise<boolean>,
  ) {
    this.searchIndex = new MetadataIndex(store);
    jobs.define<Record<string, ValidationIssue[]>>({
      kind: 'metadata.derived',
      task: { filename: DOC_JOBS_MODULE, name: 'validateDerived' },
      apply: (unit, job, issues) => this.applyWrite(unit, job, issues),
    });
  }

  /** A client's derived write, validated by a job (the schemas as they are now go with it). */
  async enqueue(tenant: string, input: Omit<DerivedInput, 'schemas'>): Promise<string> {
    const schemas: Record<string, Record<string, unknown>> = {};
    for (const e of Object.values(input.entries)) {
      const record = await this.schemas.get(e.schema);
      if (record) schemas[e.schema] = record.jsonSchema;
    }
    return (await this.jobs.enqueue(tenant, 'metadata.derived', { ...input, schemas })).jobId;
  }

  /**
   * In a job's completion unit: an entry of `namespace` validated against its schema; an invalid
   * one is kept as the namespace's quarantined entry. True when it was valid.
   */
  async record(unit: Unit, job: JobRecord, documentId: string, namespace: string, entry: DerivedWrite): Promise<boolean> {
    await this.requireDocument(unit, job, documentId);
    const issues = await this.schemas.validate(entry.schema, entry.data);
    await this.put(unit, job, documentId, namespace, entry, issues);
    return issues.length === 0;
  }

  /**
   * The document's entries as GET .../metadata shows them: per namespace the last valid entry
   * (with `includeQuarantined`, the quarantined one where there is no valid one), and the last
   * quarantined entry of every namespace.
   */
  async shown(tenant: string, documentId: string, includeQuarantined: boolean): Promise<{ namespaces: Record<string, unknown>; quarantined: Record<string, unknown> }> {
    const namespaces: Record<string, unknown> = {};
    const quarantined: Record<string, unknown> = {};
    // Valid entries sort before the quarantined entry of their namespace.
    for (const { key, value } of await this.store.range(ENTRIES, { start: [tenant, documentId, ''], end: [tenant, documentId, '\uffff'] })) {
      const ns = key[2];
      if (value.status === 'quarantined') {
        if (!includeQuarantined) continue;
        quarantined[ns] = shown(value);
      }
      namespaces[ns] ??= shown(value);
    }
    return { namespaces, quarantined };
  }

  /** The one entry `shown` gives `namespace`: its valid entry, else (with `includeQuarantined`) its quarantined one. */
  async shownOne(tenant: string, documentId: string, namespace: string, includeQuarantined: boolean): Promise<Record<string, unknown> | undefined> {
    const valid = await this.store.get(ENTRIES, [tenant, documentId, namespace]);
    if (valid) return shown(valid);
    const quarantined = includeQuarantined ? await this.store.get(ENTRIES, [tenant, documentId, namespace, 'quarantined']) : undefined;
    return quarantined && shown(quarantined);
  }

  /** In the job's completion unit: each entry stored as valid or quarantined; canonical data untouched. */
  private async applyWrite(unit: Unit, job: JobRecord, issues: Record<string, ValidationIssue[]>) {
    const input = job.input as DerivedInput;
    await this.requireDocument(unit, job, input.documentId);
    for (const [ns, entry] of Object.entries(input.entries)) {
      await this.put(unit, job, input.documentId, ns, { schema: entry.schema, data: entry.data, provenance: input.provenance, actor: input.actor }, issues[ns] ?? []);
    }
    return { derivedNamespaces: Object.keys(input.entries), quarantinedNamespaces: Object.keys(input.entries).filter((ns) => issues[ns]?.length), viewKeys: [] };
  }

  private async requireDocument(unit: Unit, job: JobRecord, documentId: string): Promise<void> {
    if (!(await this.documentExists(unit, job.tenant, documentId))) throw new JobError('document_not_found', 'The document no longer exists', false);
  }

  /** In `unit`: the document's valid entries, per namespace (the search index's backfill). */
  async validEntries(unit: Unit, tenant: string, documentId: string): Promise<Array<{ namespaceUrn: string; entry: { schema: string; data: Record<string, unknown> } }>> {
    const entries = await unit.range(ENTRIES, { start: [tenant, documentId, ''], end: [tenant, documentId, '\uffff'] });
    return entries.filter(({ key, value }) => key.length === 3 && value.status === 'valid').map(({ key, value }) => ({ namespaceUrn: key[2], entry: value }));
  }

  private async put(unit: Unit, job: JobRecord, documentId: string, namespace: string, entry: DerivedWrite, issues: ValidationIssue[]): Promise<void> {
    const quarantined = issues.length > 0;
    // A valid entry replaces the namespace's valid one (read here: the unit's precondition) in the search index too.
    if (!quarantined) this.searchIndex.changed(unit, job.tenant, documentId, namespace, 'd', await unit.get(ENTRIES, [job.tenant, documentId, namespace]), entry);
    unit.put(ENTRIES, quarantined ? [job.tenant, documentId, namespace, 'quarantined'] : [job.tenant, documentId, namespace], {
      schema: entry.schema, id: newMetadataId(), data: entry.data, status: quarantined ? 'quarantined' : 'valid', issues,
      provenance: entry.provenance, jobId: job.jobId, actor: entry.actor, at: Date.now(),
    });
  }
}

/** A derived entry as the metadata reads show it. */
function shown(value: DerivedEntry): Record<string, unknown> {
  return {
    schema: value.schema, id: value.id, data: value.data, mode: 'derived', status: value.status, provenance: value.provenance,
    ...(value.issues.length ? { issues: value.issues } : {}),
  };
}
