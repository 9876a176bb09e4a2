// Legacy import (issue 21, second half): `POST /v1/legacy/import` → a `legacy.import` job that
// streams a legacy document's binary through the documents' ingest (unlisted, BLAKE3 beside it)
// and creates the Document with its first version. Owner of the `legacy_imports`,
// `legacy_import_docs` and `legacy_binaries` tables. No HTTP here (server/legacy-api.ts).
//
// One legacy document, one Document: the mapping (tenant, repo, legacyDocId) → documentId is
// written in the same synchronous LMDB transaction that checks for it and enqueues the job, so
// concurrent first requests are serialized by LMDB's single writer and see one row; the id itself
// is a UUIDv5 of (tenant, repo, legacyDocId), so even a lost row would give the same one. The job
// creates the document in its completion transaction (apply), so a job interrupted by kill -9 has
// created nothing and runs again from the start; completion happens once.

import { v5 as uuidv5 } from 'uuid';
import type { Principal } from '../auth/index.js';
import type { Documents } from '../documents/index.js';
import type { PlacementHint } from '../documents/index.js';
import { SvcError } from '../base/errors.js';
import { JobError, type JobQueue, type JobRecord } from '../jobs/index.js';
import type { Logger } from '../base/log.js';
import { type Unit, type UnitStore, table } from '../store/index.js';
import { parseLegacyDocId } from './doc-id.js';
import type { InUnit } from '../idempotency/index.js';
import { LegacyError, legacyRepoNotFound } from './errors.js';
import type { LegacyRepositories } from './repositories.js';
import type { LegacyDocument } from './repository.js';

export const LEGACY_IMPORT_KIND = 'legacy.import';

/** POST /v1/legacy/import's outcome. */
export interface ImportAnswer {
  jobId: string;
  documentId: string;
  alreadyImported: boolean;
  created: boolean;
}
/** The UUIDv5 namespace of imported documents' ids (fixed: the ids must never change). */
const ID_NAMESPACE = '6f1c7d3e-2b8a-5e41-9c0d-5a7e3b1f9d24';
const OCTET_STREAM = 'application/octet-stream';
export const IMPORT_MODES = ['import-on-read', 'bulk'] as const;

/** POST /v1/legacy/import, parsed at the edge (server/commands/legacy-import.ts). */
export interface ImportRequest {
  repo: string;
  /** Checked and normalized (parseLegacyDocId). */
  legacyDocId: string;
  placementHint: PlacementHint;
  mode?: (typeof IMPORT_MODES)[number];
}
/** The external reference's system on every imported document. */
export const LEGACY_SYSTEM = 'legacy';

export interface LegacyImportInput {
  repo: string;
  legacyDocId: string;
  documentId: string;
  placementHint: PlacementHint;
  actor: string;
}

/** What the import's prepare hands to apply. */
interface ImportOutput {
  contentKey: string;
  contentType: string;
  size: number;
  binaryHash: string;
}

interface ImportRow {
  documentId: string;
  /** The job of the latest request that enqueued one. */
  jobId: string;
  createdAt: number;
}

/** A document's id for (tenant, repo, legacyDocId): the same on every node, every run. */
export function legacyDocumentId(tenant: string, repo: string, legacyDocId: string): string {
  return uuidv5(JSON.stringify([tenant, repo, legacyDocId]), ID_NAMESPACE);
}

/** [tenant, repo, legacyDocId] → the document and its import job. */
const BY_LEGACY = table<ImportRow, [string, string, string]>('legacy_imports');
/** [tenant, documentId] → where it came from. */
const BY_DOCUMENT = table<{ repo: string; legacyDocId: string }, [string, string]>('legacy_import_docs');
/** [tenant, repo, legacy binary hash] → the content key it was ingested as (a shared binary is not read again). */
const BINARIES = table<{ key: string; size: number }, [string, string, string]>('legacy_binaries');

export class LegacyImports {
  constructor(
    private readonly units: UnitStore,
    private readonly legacy: LegacyRepositories,
    private readonly docs: Documents,
    private readonly jobs: JobQueue,
    private readonly log: Logger,
  ) {
    jobs.define<ImportOutput>({
      kind: LEGACY_IMPORT_KIND,
      prepare: async (job) => ({ done: await this.prepare(job) }),
      apply: (unit, job, output) => this.apply(unit, job, output),
    });
  }

  /**
   * POST /v1/legacy/import (the caller checks `legacy.import`): the document's id and its import
   * job. A first request records the mapping and enqueues the job; a repeat answers the same
   * document and the job of the first request (completed or still running), or a new job when
   * that one failed.
   */
  async request(principal: Principal, command: ImportRequest, keep?: InUnit<ImportAnswer>): Promise<ImportAnswer> {
    const { repo: repoName, legacyDocId, placementHint } = command;
    const repo = this.legacy.get(repoName);
    if (!repo) {
      this.legacy.metrics.importRequest(undefined, 'rejected');
      throw legacyRepoNotFound(repoName);
    }
    const tenant = principal.tenant;
    const key: [string, string, string] = [tenant, repo.name, legacyDocId];
    // Check-or-insert in one unit of work: of concurrent first requests (on any node) only one
    // commits its insert; the others run again and find its row.
    const answer = await this.units.run(async (unit) => {
      const row = await unit.get(BY_LEGACY, key);
      if (row) {
        const job = await this.jobs.get(tenant, row.jobId);
        if (job && job.state !== 'failed' && job.state !== 'dead') {
          const again = { jobId: row.jobId, documentId: row.documentId, alreadyImported: job.state === 'completed', created: false };
          await keep?.(unit, again);
          return again;
        }
      }
      const documentId = row?.documentId ?? legacyDocumentId(tenant, repo.name, legacyDocId);
      const input: LegacyImportInput = { repo: repo.name, legacyDocId, documentId, placementHint, actor: principal.subject };
      const job = this.jobs.enqueueIn(unit, tenant, LEGACY_IMPORT_KIND, input, { startNow: true });
      unit.put(BY_LEGACY, key, { documentId, jobId: job.jobId, createdAt: row?.createdAt ?? Date.now() });
      unit.put(BY_DOCUMENT, [tenant, documentId], { repo: repo.name, legacyDocId });
      const made = { jobId: job.jobId, documentId, alreadyImported: false, created: true };
      // An Idempotency-Key's answer commits with the mapping and the job (engine/idempotency).
      await keep?.(unit, made);
      return made;
    });
    // Answered once committed (durable as SVC_DURABILITY says): the same request after a crash finds the row.
    this.legacy.metrics.importRequest(repo.name, answer.created ? 'enqueued' : answer.alreadyImported ? 'already_imported' : 'in_progress');
    return answer;
  }

  /** Where an imported document came from (undefined: not imported). */
  origin(tenant: string, documentId: string): Promise<{ repo: string; legacyDocId: string } | undefined> {
    return this.units.get(BY_DOCUMENT, [tenant, documentId]);
  }

  /**
   * The job's main-thread step: the legacy document opened (404/422/409 fail the job), its binary
   * streamed through the documents' ingest unless this repository's binary of the same hash was
   * ingested before, then `done` (the task is skipped).
   */
  private async prepare(job: JobRecord): Promise<ImportOutput> {
    const input = job.input as LegacyImportInput;
    const metrics = this.legacy.metrics;
    const repo = this.legacy.get(input.repo);
    try {
      if (!repo) throw new JobError('legacy_repo_not_found', `The legacy repository ${JSON.stringify(input.repo)} is no longer configured`, false);
      let doc: LegacyDocument;
      try {
        doc = await repo.open(input.legacyDocId);
      } catch (err) {
        throw asJobError(err);
      }
      try {
        const hash = doc.descriptor.hash;
        const contentType = doc.descriptor.mediaType ?? OCTET_STREAM;
        const known = await this.units.get(BINARIES, [job.tenant, repo.name, hash]);
        if (known && known.size === doc.size && (await this.docs.contentManifest(known.key))?.record.size === doc.size) {
          return { contentKey: known.key, contentType, size: doc.size, binaryHash: hash };
        }
        let content;
        try {
          // The ingest is not told the XML's media type: it detects a PDF by its signature (for
          // its chunker) and would refuse a binary its legacy metadata mislabels; the version
          // carries the XML's type as written. The bytes are the tenant's: its object limit and
          // quota hold as for an upload (a final failure of the job).
          content = await this.docs.ingestContent(job.tenant, doc.pieces(), { declaredLength: doc.size });
        } catch (err) {
          throw asJobError(err);
        }
        metrics.importBytes(repo.name, content.size);
        return { contentKey: content.key, contentType, size: content.size, binaryHash: hash };
      } finally {
        await doc.close();
      }
    } catch (err) {
      const failure = err instanceof JobError ? err : undefined;
      // A retryable failure of the last attempt ends the job dead: a failed import, not a retry.
      const outcome = failure && !failure.retryable ? failure.code : job.attempts >= job.maxAttempts ? 'dead' : 'retried';
      metrics.importAttemptFailed(repo?.name, outcome);
      if (!failure) this.log.warn('legacy import: attempt failed', { job: job.jobId, repo: input.repo, legacyDocId: input.legacyDocId, err: String((err as Error)?.stack ?? err) });
      throw err;
    }
  }

  /** In the job's completion unit: the document and its first version, the binary's mapping. */
  private async apply(unit: Unit, job: JobRecord, output: ImportOutput) {
    const input = job.input as LegacyImportInput;
    const ref = { system: LEGACY_SYSTEM, value: input.legacyDocId, meta: { repo: input.repo } };
    const r = await this.docs.createWithContent(unit, job.tenant, input.documentId, input.actor, {
      externalRefs: [ref], placementHint: input.placementHint, contentKey: output.contentKey, contentType: output.contentType,
      reason: `imported from legacy repository ${input.repo} (${input.legacyDocId})`,
    });
    if (!r.created && !r.externalRefs.some((e) => e.system === LEGACY_SYSTEM && e.value === input.legacyDocId && e.meta?.repo === input.repo)) {
      throw new JobError('document_conflict', `A document ${input.documentId} that was not imported from this legacy document exists`, false);
    }
    unit.put(BINARIES, [job.tenant, input.repo, output.binaryHash], { key: output.contentKey, size: output.size });
    unit.afterCommit(() => this.legacy.metrics.imported(input.repo, r.created ? 'imported' : 'already_present'));
    return { derivedNamespaces: [], viewKeys: [] };
  }
}

/**
 * A legacy or ingest failure as the job's error: the request's fault (4xx) and the tenant's quota
 * are final (a new request once there is room starts a new job), the rest is retried.
 */
function asJobError(err: unknown): unknown {
  if (err instanceof JobError) return err;
  if (err instanceof LegacyError) return new JobError(err.code, err.message, err.kind === 'internal' || err.kind === 'unavailable');
  // A full disk may free up; a tenant's quota does not by waiting.
  if (err instanceof SvcError) return new JobError(err.code, err.message, err.transient || (err.kind === 'insufficient_storage' && err.code !== 'tenant_storage_quota_exceeded'));
  return err;
}
