// Derived metadata (a workflow's or a client's output, never truth): owner of the `doc_derived`
// and `doc_unverified` tables and of the `metadata.derived` and `metadata.recheck` job kinds. Per
// (tenant, document, namespace) the last valid entry, and beside it the last quarantined one and
// the last unverified one (written before its schema was registered), so an invalid or
// unchecked write never displaces a valid one (decisions, "Metadata envelope v1.1").

import { JobError, type JobQueue, type JobRecord } from '../jobs/index.js';
import { type Unit, type UnitStore, table } from '../store/index.js';
import { DOC_JOBS_MODULE, type DerivedInput, type Provenance } from './doc-jobs.js';
import type { EntryStatus, NamespaceEntries, StoredDerived } from './envelope.js';
import { MetadataIndex } from './metadata-index.js';
import { type Receipt, newMetadataId } from './model.js';
import type { SchemaRegistry } from './schemas.js';
import type { ValidationIssue } from './validator.js';

type DerivedKey = [tenant: string, documentId: string, namespace: string] | [tenant: string, documentId: string, namespace: string, 'quarantined' | 'unverified'];

const ENTRIES = table<StoredDerived, DerivedKey>('doc_derived');
/** Unverified entries by the schema they wait for: [schemaUrn, tenant, documentId, namespace]. */
const UNVERIFIED = table<true, [string, string, string, string]>('doc_unverified');
/** Entries one re-check unit moves. */
const RECHECK_BATCH = 128;

const slotKey = (tenant: string, documentId: string, namespace: string, status: EntryStatus): DerivedKey =>
  status === 'valid' ? [tenant, documentId, namespace] : [tenant, documentId, namespace, status];

/** One entry to record: its schema, data, provenance, who asked for it and in which request. */
export interface DerivedWrite {
  schema: string;
  data: Record<string, unknown>;
  provenance: Provenance;
  actor: string;
  receipt?: Receipt;
}

/** Input of `metadata.recheck`: the entries waiting for one schema, or (none) every stored entry once. */
interface RecheckInput {
  schemaUrn?: string;
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
    jobs.define<{ moved: number }>({
      kind: 'metadata.recheck',
      // Units of its own, each idempotent: an attempt run again goes on where the last one stopped.
      prepare: async (job) => ({ done: { moved: await this.recheck(job.input as RecheckInput) } }),
      apply: async () => ({ derivedNamespaces: [], viewKeys: [] }),
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
   * In a job's completion unit: an entry of `namespace`, valid, quarantined (it does not validate)
   * or unverified (its schema is not registered). True when it was valid.
   */
  async record(unit: Unit, job: JobRecord, documentId: string, namespace: string, entry: DerivedWrite): Promise<boolean> {
    await this.requireDocument(unit, job, documentId);
    const { status, issues } = await this.check(unit, entry.schema, entry.data);
    await this.put(unit, job, documentId, namespace, entry, status, issues);
    return status === 'valid';
  }

  /** Every namespace's derived entries, by status. */
  async held(tenant: string, documentId: string): Promise<Map<string, NamespaceEntries['derived']>> {
    const out = new Map<string, NamespaceEntries['derived']>();
    for (const { key, value } of await this.store.range(ENTRIES, { start: [tenant, documentId, ''], end: [tenant, documentId, '\uffff'] })) {
      let slots = out.get(key[2]);
      if (!slots) out.set(key[2], (slots = {}));
      slots[key.length === 3 ? 'valid' : key[3]] = value;
    }
    return out;
  }

  /** One namespace's derived entries, by status. */
  async heldIn(tenant: string, documentId: string, namespace: string): Promise<NamespaceEntries['derived']> {
    const slots: NamespaceEntries['derived'] = {};
    for (const { key, value } of await this.store.range(ENTRIES, { start: [tenant, documentId, namespace], end: [tenant, documentId, namespace, '\uffff'] })) {
      if (key[2] === namespace) slots[key.length === 3 ? 'valid' : key[3]] = value;
    }
    return slots;
  }

  /** Whether entries wait for `schemaUrn` (read in the registration's unit, so none is missed). */
  async waitingFor(unit: Unit, schemaUrn: string): Promise<boolean> {
    return (await unit.range(UNVERIFIED, { start: [schemaUrn], end: [schemaUrn, '\uffff'], limit: 1 })).length > 0;
  }

  /** In the job's completion unit: each entry stored by its status; canonical data untouched. */
  private async applyWrite(unit: Unit, job: JobRecord, issues: Record<string, ValidationIssue[]>) {
    const input = job.input as DerivedInput;
    await this.requireDocument(unit, job, input.documentId);
    const quarantined: string[] = [];
    for (const [ns, entry] of Object.entries(input.entries)) {
      const found = issues[ns] ?? [];
      // The task knew the schemas registered when the write was accepted; one registered since is looked up now.
      const checked = found.some((i) => i.code === 'schema_not_found')
        ? await this.check(unit, entry.schema, entry.data)
        : { status: found.length ? ('quarantined' as const) : ('valid' as const), issues: found };
      if (checked.status === 'quarantined') quarantined.push(ns);
      await this.put(unit, job, input.documentId, ns, { schema: entry.schema, data: entry.data, provenance: input.provenance, actor: input.actor, receipt: input.receipt }, checked.status, checked.issues);
    }
    return { derivedNamespaces: Object.keys(input.entries), quarantinedNamespaces: quarantined, viewKeys: [] };
  }

  /** The status `data` gets: unverified while its schema is not registered (a precondition of the unit). */
  private async check(unit: Unit, schemaUrn: string, data: Record<string, unknown>): Promise<{ status: EntryStatus; issues: ValidationIssue[] }> {
    if (!(await this.schemas.registeredIn(unit, schemaUrn))) return { status: 'unverified', issues: [] };
    const issues = await this.schemas.validate(schemaUrn, data);
    return { status: issues.length ? 'quarantined' : 'valid', issues };
  }

  private async requireDocument(unit: Unit, job: JobRecord, documentId: string): Promise<void> {
    if (!(await this.documentExists(unit, job.tenant, documentId))) throw new JobError('document_not_found', 'The document no longer exists', false);
  }

  /** In `unit`: the document's valid entries, per namespace (the search index's backfill). */
  async validEntries(unit: Unit, tenant: string, documentId: string): Promise<Array<{ namespaceUrn: string; entry: { schema: string; data: Record<string, unknown> } }>> {
    const entries = await unit.range(ENTRIES, { start: [tenant, documentId, ''], end: [tenant, documentId, '\uffff'] });
    return entries.filter(({ key, value }) => key.length === 3 && value.status === 'valid').map(({ key, value }) => ({ namespaceUrn: key[2], entry: value }));
  }

  private async put(unit: Unit, job: JobRecord, documentId: string, namespace: string, entry: DerivedWrite, status: EntryStatus, issues: ValidationIssue[]): Promise<void> {
    const at = Date.now();
    await this.place(unit, job.tenant, documentId, namespace, {
      schema: entry.schema, id: newMetadataId(), data: entry.data, status, issues, provenance: entry.provenance, jobId: job.jobId, actor: entry.actor, at,
      ...(entry.receipt ? { receipt: { ...entry.receipt, recordedAt: at } } : {}),
    });
  }

  /** Stores `entry` in its status's slot, keeping the search index (valid entries) and the index of unverified ones. */
  private async place(unit: Unit, tenant: string, documentId: string, namespace: string, entry: StoredDerived): Promise<void> {
    const key = slotKey(tenant, documentId, namespace, entry.status);
    // A valid entry replaces the namespace's valid one (read here: the unit's precondition) in the search index too.
    if (entry.status === 'valid') this.searchIndex.changed(unit, tenant, documentId, namespace, 'd', await unit.get(ENTRIES, key), entry);
    if (entry.status === 'unverified') {
      const previous = await unit.get(ENTRIES, key);
      if (previous && previous.schema !== entry.schema) unit.remove(UNVERIFIED, [previous.schema, tenant, documentId, namespace]);
      unit.put(UNVERIFIED, [entry.schema, tenant, documentId, namespace], true);
    }
    unit.put(ENTRIES, key, entry);
  }

  /**
   * Gives entries their status against the schemas registered now, in units of RECHECK_BATCH:
   * those waiting for `schemaUrn`; or (none) every stored entry, once after envelope v1.1 came:
   * a valid one that does not validate is quarantined, one quarantined for want of its schema
   * is checked or becomes unverified. An entry moved to a slot holding a newer one is dropped.
   * Returns how many entries changed slot.
   */
  private async recheck(input: RecheckInput): Promise<number> {
    let moved = 0;
    if (input.schemaUrn !== undefined) {
      const urn = input.schemaUrn;
      for (;;) {
        const waiting = await this.store.range(UNVERIFIED, { start: [urn], end: [urn, '\uffff'], limit: RECHECK_BATCH });
        if (waiting.length === 0) return moved;
        moved += await this.store.run(async (unit) => {
          let n = 0;
          for (const { key: [, tenant, documentId, ns] } of waiting) {
            unit.remove(UNVERIFIED, [urn, tenant, documentId, ns]);
            const entry = await unit.get(ENTRIES, [tenant, documentId, ns, 'unverified']);
            if (entry?.schema !== urn) continue;
            unit.remove(ENTRIES, [tenant, documentId, ns, 'unverified']);
            n += await this.moveChecked(unit, tenant, documentId, ns, entry);
          }
          return n;
        });
      }
    }
    let after: DerivedKey | undefined;
    for (;;) {
      const page = await this.store.range(ENTRIES, after ? { start: after, limit: RECHECK_BATCH + 1 } : { limit: RECHECK_BATCH });
      const batch = after ? page.filter((e) => !sameKey(e.key, after!)) : page;
      if (batch.length === 0) return moved;
      after = batch[batch.length - 1]!.key;
      moved += await this.store.run(async (unit) => {
        let n = 0;
        for (const { key } of batch) {
          const entry = await unit.get(ENTRIES, key);
          const [tenant, documentId, ns] = key;
          const missingSchema = entry?.status === 'quarantined' && entry.issues.length > 0 && entry.issues.every((i) => i.code === 'schema_not_found');
          if (!entry || (entry.status !== 'valid' && !missingSchema)) continue;
          const checked = await this.check(unit, entry.schema, entry.data);
          if (checked.status === entry.status && !missingSchema) continue;
          unit.remove(ENTRIES, key);
          if (entry.status === 'valid') this.searchIndex.changed(unit, tenant, documentId, ns, 'd', entry, undefined);
          n += await this.moveChecked(unit, tenant, documentId, ns, entry, checked);
        }
        return n;
      });
    }
  }

  /** `entry` (removed from its slot) stored in the slot of its checked status unless that holds a newer entry. */
  private async moveChecked(unit: Unit, tenant: string, documentId: string, ns: string, entry: StoredDerived, known?: { status: EntryStatus; issues: ValidationIssue[] }): Promise<number> {
    const checked = known ?? (await this.check(unit, entry.schema, entry.data));
    const target = slotKey(tenant, documentId, ns, checked.status);
    const there = await unit.get(ENTRIES, target);
    if (there && there.at > entry.at) return 0;
    await this.place(unit, tenant, documentId, ns, { ...entry, status: checked.status, issues: checked.issues });
    return 1;
  }
}

function sameKey(a: DerivedKey, b: DerivedKey): boolean {
  return a.length === b.length && a.every((k, i) => k === b[i]);
}
