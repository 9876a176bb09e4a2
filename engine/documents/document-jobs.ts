// The document platform's jobs as the API shows them (GET /v1/jobs, /v1/jobs/{id}), and the
// migration of one document's entry (POST /v1/documents/{id}/migrate, owner of the
// `metadata.migrate` job kind) and of many (the steps ./bulk-migration.ts takes per document).
// Records and versions are ./records.ts's. No HTTP here: requests arrive as typed commands
// (./commands.ts); `meta.write:<ns>` and the documents' permission rules are checked here.

import type { CursorSeal, Principal } from '../auth/index.js';
import { JobError, type JobQueue, type JobRecord } from '../jobs/index.js';
import { SvcError, invalidCursor } from '../base/errors.js';
import type { Unit } from '../store/index.js';
import type { InUnit } from '../idempotency/index.js';
import type { MigrateDocument, Parse } from './commands.js';
import { DOC_JOBS_MODULE, type MigrateInput } from './doc-jobs.js';
import type { MigrationRegistry } from './migrations.js';
import { type Receipt, type RequestInfo, badRequest, isUuid, newMetadataId, receiptOf } from './model.js';
import type { JobAnswer } from './outcomes.js';
import { requireCapability, requireRule, ruleAllows } from './permissions.js';
import { DOCUMENTS, type DocumentRecords, seesMetadata, storageRefusal } from './records.js';
import { checkLifecycles } from './schema-lifecycle.js';
import { type SchemaRecord, type SchemaRegistry, requireSchemaOwner } from './schemas.js';

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

const jobNotFound = (id: string) => new SvcError('not_found', 'job_not_found', `No job ${id}`);

export class DocumentJobs {
  constructor(
    private readonly records: DocumentRecords,
    readonly schemas: SchemaRegistry,
    readonly migrations: MigrationRegistry,
    private readonly jobs: JobQueue,
    private readonly cursors: CursorSeal,
  ) {
    jobs.define<{ data: Record<string, unknown> }>({
      kind: 'metadata.migrate',
      task: { filename: DOC_JOBS_MODULE, name: 'migrate' },
      apply: (unit, job, output) => this.applyMigration(unit, job, output.data),
    });
  }

  /** POST /v1/documents/{id}/migrate: a job moving one namespace's current entry to another schema version. */
  async migrate(principal: Principal, documentId: string, parse: Parse<MigrateDocument>, request: RequestInfo, keep?: InUnit<JobAnswer>): Promise<JobAnswer> {
    const doc = await this.records.document(principal, documentId);
    const { namespaceUrn, toSchemaUrn, reason } = parse();
    requireCapability(principal, `meta.write:${namespaceUrn}`);
    requireRule(doc.permissions, principal, 'meta.write');
    const entry = doc.currentVersionId ? (await this.records.version(this.records.store, doc, doc.currentVersionId)).metadata[namespaceUrn] : undefined;
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
    const base = await this.records.version(unit, doc, doc.currentVersionId);
    const current = base.metadata[input.namespaceUrn];
    if (current?.id !== input.baseMetadataId) {
      throw new JobError('metadata_conflict', `The ${input.namespaceUrn} entry changed after the migration was requested (now ${current?.id ?? 'absent'}); request it again`, false);
    }
    try {
      await this.records.addVersion(unit, doc, { subject: input.actor }, {
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

  /** Whether the document's rules let `principal` see it and its metadata (as search does): what a bulk migration counts. */
  async visibleTo(principal: Principal, documentId: string): Promise<boolean> {
    const doc = await this.records.store.get(DOCUMENTS, [principal.tenant, documentId]);
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
    const base = await this.records.version(unit, doc, doc.currentVersionId);
    const entry = base.metadata[namespaceUrn];
    if (entry?.schema !== fromSchemaUrn) return 'skipped';
    const outcome = await m.step(entry.data);
    if (outcome === undefined) return 'skipped';
    if (!('data' in outcome)) return outcome;
    try {
      await this.records.addVersion(unit, doc, { subject: m.receipt.sub }, {
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
}
