// Derived metadata (a workflow's or a client's output, never truth): owner of the `doc_derived`
// table and of the `metadata.derived` job kind. Per (tenant, document, namespace) the last valid
// entry, and beside it the last quarantined one, so an invalid write never displaces a valid one.

import { JobError, type JobQueue, type JobRecord } from '../jobs/index.js';
import type { OrderedTable, TableCatalog } from '../store/index.js';
import { DOC_JOBS_MODULE, type DerivedInput, type Provenance } from './doc-jobs.js';
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

/** One entry to record: its schema, data, provenance and who asked for it. */
export interface DerivedWrite {
  schema: string;
  data: Record<string, unknown>;
  provenance: Provenance;
  actor: string;
}

export class DerivedMetadata {
  private readonly entries: OrderedTable<DerivedEntry, DerivedKey>;

  constructor(
    env: TableCatalog,
    private readonly jobs: JobQueue,
    private readonly schemas: SchemaRegistry,
    /** Whether the tenant's document exists (checked in each completing transaction). */
    private readonly documentExists: (tenant: string, documentId: string) => boolean,
  ) {
    this.entries = env.table('doc_derived');
    jobs.define<Record<string, ValidationIssue[]>>({
      kind: 'metadata.derived',
      task: { filename: DOC_JOBS_MODULE, name: 'validateDerived' },
      apply: (job, issues) => this.applyWrite(job, issues),
    });
  }

  /** A client's derived write, validated by a job (the schemas as they are now go with it). */
  async enqueue(tenant: string, input: Omit<DerivedInput, 'schemas'>): Promise<string> {
    const schemas: Record<string, Record<string, unknown>> = {};
    for (const e of Object.values(input.entries)) {
      const record = this.schemas.get(e.schema);
      if (record) schemas[e.schema] = record.jsonSchema;
    }
    return (await this.jobs.enqueue(tenant, 'metadata.derived', { ...input, schemas })).jobId;
  }

  /**
   * Inside a job's completion transaction: an entry of `namespace` validated against its schema;
   * an invalid one is kept as the namespace's quarantined entry. True when it was valid.
   */
  record(job: JobRecord, documentId: string, namespace: string, entry: DerivedWrite): boolean {
    this.requireDocument(job, documentId);
    const issues = this.schemas.validate(entry.schema, entry.data);
    this.put(job, documentId, namespace, entry, issues);
    return issues.length === 0;
  }

  /**
   * The document's entries as GET .../metadata shows them: per namespace the last valid entry
   * (with `includeQuarantined`, the quarantined one where there is no valid one), and the last
   * quarantined entry of every namespace.
   */
  shown(tenant: string, documentId: string, includeQuarantined: boolean): { namespaces: Record<string, unknown>; quarantined: Record<string, unknown> } {
    const namespaces: Record<string, unknown> = {};
    const quarantined: Record<string, unknown> = {};
    // Valid entries sort before the quarantined entry of their namespace.
    for (const { key, value } of this.entries.getRange({ start: [tenant, documentId, ''], end: [tenant, documentId, '\uffff'] })) {
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
  shownOne(tenant: string, documentId: string, namespace: string, includeQuarantined: boolean): Record<string, unknown> | undefined {
    const valid = this.entries.get([tenant, documentId, namespace]);
    if (valid) return shown(valid);
    const quarantined = includeQuarantined ? this.entries.get([tenant, documentId, namespace, 'quarantined']) : undefined;
    return quarantined && shown(quarantined);
  }

  /** In the job's completion transaction: each entry stored as valid or quarantined; canonical data untouched. */
  private applyWrite(job: JobRecord, issues: Record<string, ValidationIssue[]>) {
    const input = job.input as DerivedInput;
    this.requireDocument(job, input.documentId);
    for (const [ns, entry] of Object.entries(input.entries)) {
      this.put(job, input.documentId, ns, { schema: entry.schema, data: entry.data, provenance: input.provenance, actor: input.actor }, issues[ns] ?? []);
    }
    return { derivedNamespaces: Object.keys(input.entries), quarantinedNamespaces: Object.keys(input.entries).filter((ns) => issues[ns]?.length), viewKeys: [] };
  }

  private requireDocument(job: JobRecord, documentId: string): void {
    if (!this.documentExists(job.tenant, documentId)) throw new JobError('document_not_found', 'The document no longer exists', false);
  }

  private put(job: JobRecord, documentId: string, namespace: string, entry: DerivedWrite, issues: ValidationIssue[]): void {
    const quarantined = issues.length > 0;
    this.entries.put(quarantined ? [job.tenant, documentId, namespace, 'quarantined'] : [job.tenant, documentId, namespace], {
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
