// Bulk migration (decisions, "Bulk migration"): POST /v1/migrations/apply moves the current
// canonical entry of every document of the caller's tenant that is on `fromSchemaUrn` (and
// matches `where`, as in search) to `toSchemaUrn`, one new version each, in a job. Owner of the
// `metadata.migrate-all` job kind and of `doc_bulk_tallies`.
//
// The job walks the search index's documents on the source schema in documentId order, a batch
// per unit of work; each unit commits the batch's new versions, the job's progress (with the last
// documentId, where a later attempt goes on) and the tally together. A document migrated leaves
// the source schema in that same unit, so no attempt, resumed or repeated, migrates it twice.
// Total, progress and tally count only the documents the caller may see (doc.read and
// meta.read, as search): one its rules hide is neither migrated nor counted, so the job tells
// the caller nothing of it, not even that it exists (decisions §5).

import type { Principal } from '../auth/index.js';
import type { JobQueue, JobRecord } from '../jobs/index.js';
import type { InUnit } from '../idempotency/index.js';
import { type UnitStore, table } from '../store/index.js';
import type { BulkMigrationRequest } from './commands.js';
import type { DocumentJobs } from './document-jobs.js';
import { type MetadataIndex, matchesWhere } from './metadata-index.js';
import { transform } from './migrations.js';
import { type Receipt, type RequestInfo, isPlainObject, receiptOf } from './model.js';
import type { JobAnswer } from './outcomes.js';
import { requireCapability } from './permissions.js';
import { checkLifecycles } from './schema-lifecycle.js';
import { requireSchemaOwner, schemaNotFound } from './schemas.js';
import type { SearchValue } from './search-request.js';
import { SvcError } from '../base/errors.js';
import { BULK_FAILURES_LISTED } from '../base/limits.js';

interface BulkInput {
  namespaceUrn: string;
  fromSchemaUrn: string;
  toSchemaUrn: string;
  where: Array<[string, SearchValue]>;
  reason: string;
  /** Whose rules on each document apply (a document whose rules refuse meta.write is skipped). */
  principal: { subject: string; roles: string[] };
  receipt: Receipt;
}

interface Tally {
  migrated: number;
  skipped: number;
  failed: number;
  /** The first BULK_FAILURES_LISTED. */
  failures: Array<{ documentId: string; code: string; message: string }>;
}

const TALLIES = table<Tally, string>('doc_bulk_tallies');
/** Documents per unit of work. */
const BATCH = 64;

export class BulkMigrations {
  constructor(
    private readonly store: UnitStore,
    private readonly jobs: JobQueue,
    private readonly docs: DocumentJobs,
    private readonly index: MetadataIndex,
  ) {
    jobs.define<Tally>({
      kind: 'metadata.migrate-all',
      prepare: async (job) => ({ done: await this.run(job) }),
      apply: async (_unit, _job, tally) => ({ derivedNamespaces: [], viewKeys: [], migration: tally }),
    });
  }

  /** POST /v1/migrations/apply: checks, then the job (202). */
  async request(principal: Principal, cmd: BulkMigrationRequest, request: RequestInfo, keep?: InUnit<JobAnswer>): Promise<JobAnswer> {
    const { fromSchemaUrn, toSchemaUrn, where, reason } = cmd;
    const [from, to] = await Promise.all([this.docs.schemas.get(fromSchemaUrn), this.docs.schemas.get(toSchemaUrn)]);
    if (!from) throw schemaNotFound(fromSchemaUrn);
    if (!to) throw schemaNotFound(toSchemaUrn);
    requireSchemaOwner(principal, from, 'migrating from it');
    requireSchemaOwner(principal, to, 'migrating to it');
    const namespaceUrn = from.namespaceUrn;
    requireCapability(principal, `meta.write:${namespaceUrn}`);
    if (!(await this.docs.migrations.get(fromSchemaUrn, toSchemaUrn))) {
      throw new SvcError('not_found', 'migration_not_found', `No migration from ${fromSchemaUrn} to ${toSchemaUrn} is registered`);
    }
    const deprecated = await checkLifecycles(this.docs.schemas, principal, [toSchemaUrn]);
    const input: BulkInput = {
      namespaceUrn, fromSchemaUrn, toSchemaUrn, where, reason,
      principal: { subject: principal.subject, roles: [...principal.roles] }, receipt: receiptOf(principal, request),
    };
    const job = await this.jobs.enqueue(principal.tenant, 'metadata.migrate-all', input, { within: keep && ((unit, j) => keep(unit, { jobId: j.jobId, deprecated })) });
    return { jobId: job.jobId, deprecated };
  }

  /** The job's work from where its last attempt stopped; the tally once no document is left. */
  private async run(job: JobRecord): Promise<Tally> {
    const input = job.input as BulkInput;
    const { tenant } = job;
    const migration = await this.docs.migrations.get(input.fromSchemaUrn, input.toSchemaUrn);
    if (!migration) throw new SvcError('not_found', 'migration_not_found', 'The migration is no longer registered');
    const principal = { subject: input.principal.subject, roles: input.principal.roles, tenant, scopes: [] };
    let progress = job.progress ?? { done: 0, total: await this.count(principal, input) };
    if (!job.progress) await this.store.run((unit) => this.jobs.recordProgress(unit, job, progress));
    for (;;) {
      const ids = await this.index.documentsOnSchema(tenant, input.namespaceUrn, 'c', input.fromSchemaUrn, BATCH, progress.resumeAfter);
      if (ids.length === 0) break;
      progress = await this.store.run(async (unit) => {
        const tally = (await unit.get(TALLIES, job.jobId)) ?? { migrated: 0, skipped: 0, failed: 0, failures: [] };
        let seen = 0;
        for (const documentId of ids) {
          const outcome = await this.docs.migrateEntryIn(unit, tenant, documentId, input.namespaceUrn, input.fromSchemaUrn, principal, {
            toSchemaUrn: input.toSchemaUrn, reason: input.reason, receipt: input.receipt,
            step: async (data) => {
              if (!matchesWhere(data, input.where)) return undefined;
              let next: unknown;
              try {
                next = transform(data, migration.forward.ops);
              } catch (err) {
                return { code: 'migration_failed', message: `The forward transform does not apply: ${(err as Error).name}` };
              }
              const issues = await this.docs.schemas.validate(input.toSchemaUrn, next);
              if (issues.length || !isPlainObject(next)) return { code: 'VALIDATION_FAILED', message: `The migrated data does not validate against ${input.toSchemaUrn}: ${issues[0]?.path ?? '/'} ${issues[0]?.message ?? 'not an object'}` };
              return { data: next };
            },
          });
          if (outcome === 'hidden') continue;
          seen++;
          if (outcome === 'migrated') tally.migrated++;
          else if (outcome === 'skipped') tally.skipped++;
          else {
            tally.failed++;
            if (tally.failures.length < BULK_FAILURES_LISTED) tally.failures.push({ documentId, ...outcome });
          }
        }
        const done = progress.done + seen;
        const next = { done, total: Math.max(progress.total, done), resumeAfter: ids[ids.length - 1]! };
        await this.jobs.recordProgress(unit, job, next);
        unit.put(TALLIES, job.jobId, tally);
        return next;
      });
    }
    return (await this.store.get(TALLIES, job.jobId)) ?? { migrated: 0, skipped: 0, failed: 0, failures: [] };
  }

  /**
   * The documents of the tenant on the source schema now that the caller may see (the job's
   * `total`; where is checked as each is reached).
   */
  private async count(principal: Principal, input: BulkInput): Promise<number> {
    let total = 0;
    let after: string | undefined;
    for (;;) {
      const ids = await this.index.documentsOnSchema(principal.tenant, input.namespaceUrn, 'c', input.fromSchemaUrn, 1000, after);
      for (let i = 0; i < ids.length; i += BATCH) {
        const visible = await Promise.all(ids.slice(i, i + BATCH).map((id) => this.docs.visibleTo(principal, id)));
        total += visible.filter(Boolean).length;
      }
      if (ids.length < 1000) return total;
      after = ids[ids.length - 1];
    }
  }
}
