// Workflows on the durable job queue (decisions.md, "Workflows"): OCR, entities and redaction of a
// document version's content. Owner of `doc_workflow_runs`: a run's result per (document, content,
// workflow, normalized options), so a repeat completes without computing again. Derived entries go
// through Metadata's derived entries (valid or quarantined, never hiding the last valid one); views through
// ViewService. The engines run on the worker pool (workers/views.ts).

import { createHash } from 'node:crypto';
import type { Principal } from '../auth/index.js';
import { type Documents, type Metadata, type Parse, requireCapability } from '../documents/index.js';
import { type Receipt, type RequestInfo, canonicalJson, receiptOf } from '../documents/model.js';
import { SvcError } from '../base/errors.js';
import { JobError, type JobQueue, type JobRecord } from '../jobs/index.js';
import type { InUnit } from '../idempotency/index.js';
import { type Unit, type UnitStore, table } from '../store/index.js';
import { VIEW_TASKS_MODULE, type MaterializeInput, type ViewBase, type ViewService } from '../views/views.js';
import { type ViewOp, checkApplicable, checkOcrLanguage, viewKey } from '../views/view-spec.js';
import type { StoredBytes } from '../views/content-io.js';
import { BUILT_IN_SCHEMAS, ENTITIES_SCHEMA, OCR_SCHEMA } from './schemas.js';

export const OCR_WORKFLOW = 'urn:svc:workflow:ocr@1';
export const ENTITIES_WORKFLOW = 'urn:svc:workflow:entities@1';
export const REDACT_WORKFLOW = 'urn:svc:workflow:redact@1';
const WORKFLOWS = [OCR_WORKFLOW, ENTITIES_WORKFLOW, REDACT_WORKFLOW];
/** Whether this service runs workflow `urn`. */
export const isWorkflow = (urn: string) => WORKFLOWS.includes(urn);
const TIMEOUT_MS = 30 * 60_000;

/**
 * A run as POST /v1/documents/{id}/workflows/{urn}/run asks it, parsed at the edge
 * (server/commands/workflows.ts): the source version ("current" or a versionId), where a text
 * workflow's entry goes, the OCR language (ISO 639-2, lower case) and the redaction profile.
 */
export interface WorkflowRun {
  sourceVersion: string;
  targetNamespace?: string;
  language: string;
  /** The redact workflow's (a known profile). */
  profile?: string;
}

interface EngineInfo {
  name: string;
  version: string;
}

/** A text workflow's job: the version's content, the text view it reads or makes, where its entry goes. */
interface TextWorkflowInput {
  documentId: string;
  versionId: string;
  base: ViewBase;
  language: string;
  targetNamespace: string;
  /** The ocrText view of the content in this language. */
  textViewKey: string;
  runKey: string;
  actor: string;
  /** The run request's (absent on jobs enqueued before envelope v1.1). */
  receipt?: Receipt;
}

/** What a text workflow's worker gets beside its input: the content, or the stored text view. */
export interface TextTaskInput {
  bytes: Uint8Array;
  mediaType: string;
  language: string;
  fromView: boolean;
}

/** What a text workflow's worker gives back. */
export interface TextWorkflowOutput {
  /** The text view's bytes when the worker made them (absent when it read the stored view). */
  textBytes?: Uint8Array;
  data?: Record<string, unknown>;
  engine?: EngineInfo;
  confidence?: number;
  stored?: StoredBytes;
  reused?: boolean;
}

interface RunRecord {
  jobId: string;
  derivedNamespaces: string[];
  viewKeys: string[];
}

const RUNS = table<RunRecord, [string, string, string]>('doc_workflow_runs');

export const workflowNotFound = (urn: string) => new SvcError('not_found', 'workflow_not_found', `No workflow ${urn}; this service runs ${WORKFLOWS.join(', ')}`);

export class WorkflowService {
  constructor(
    private readonly units: UnitStore,
    private readonly jobs: JobQueue,
    private readonly documents: Documents,
    private readonly metadata: Metadata,
    private readonly views: ViewService,
  ) {
    this.defineTextWorkflow('workflow.ocr', 'ocr', OCR_SCHEMA);
    this.defineTextWorkflow('workflow.entities', 'entities', ENTITIES_SCHEMA);
    views.defineMaterialize('workflow.redact');
  }

  /**
   * Registers the schemas of the workflows' derived entries (identical re-registration is a
   * no-op). A URN registered before with another body stays as it is (the workflows' entries are
   * then validated against it, and quarantined if they do not fit): the URNs that did.
   */
  async registerSchemas(): Promise<string[]> {
    const kept: string[] = [];
    for (const schema of BUILT_IN_SCHEMAS) {
      await this.metadata.registerSchema(undefined, schema).catch((err: unknown) => {
        if (!(err instanceof SvcError && err.code === 'schema_conflict')) throw err;
        kept.push(schema.schemaUrn);
      });
    }
    return kept;
  }

  /** POST /v1/documents/{id}/workflows/{urn}/run: the job (202), or 404/403/400/422 before any. */
  async run(principal: Principal, documentId: string, workflowUrn: string, parse: Parse<WorkflowRun>, request: RequestInfo, keep?: InUnit<{ jobId: string }>): Promise<{ jobId: string }> {
    // An Idempotency-Key's answer commits with the job (engine/idempotency).
    const within = keep && ((unit: Unit, job: { jobId: string }) => keep(unit, { jobId: job.jobId }));
    if (!isWorkflow(workflowUrn)) throw workflowNotFound(workflowUrn);
    requireCapability(principal, `workflow.run:${workflowUrn}`);
    const cmd = parse();
    const source = await this.documents.sourceContent(principal, documentId, cmd.sourceVersion, 'workflow.run');
    const base: ViewBase = { key: source.contentRef.key, mediaType: source.contentType, size: source.size };
    this.views.checkSize(base);
    const { language } = cmd;

    if (workflowUrn === REDACT_WORKFLOW) {
      const ops: ViewOp[] = [{ op: 'ocrText', version: 1, language }, { op: 'redact', version: 1, profile: cmd.profile ?? 'public' }];
      checkApplicable(ops, base.mediaType);
      checkOcrLanguage(language);
      const input: MaterializeInput = { documentId: source.documentId, base, ops, viewKey: viewKey(base.key, ops) };
      return { jobId: (await this.jobs.enqueue(principal.tenant, 'workflow.redact', input, { within })).jobId };
    }

    const textOps: ViewOp[] = [{ op: 'ocrText', version: 1, language }];
    checkApplicable(textOps, base.mediaType);
    checkOcrLanguage(language);
    const ocr = workflowUrn === OCR_WORKFLOW;
    const targetNamespace = cmd.targetNamespace ?? (ocr ? 'urn:svc:ocr' : 'urn:svc:entities');
    const runKey = createHash('sha256').update(canonicalJson({ content: base.key, workflow: workflowUrn, language, targetNamespace })).digest('hex');
    const input: TextWorkflowInput = {
      documentId: source.documentId, versionId: source.versionId, base, language, targetNamespace, textViewKey: viewKey(base.key, textOps), runKey, actor: principal.subject, receipt: receiptOf(principal, request),
    };
    return { jobId: (await this.jobs.enqueue(principal.tenant, ocr ? 'workflow.ocr' : 'workflow.entities', input, { within })).jobId };
  }

  /**
   * OCR and entities: both read the content's text (the stored text view when there is one, else
   * the worker extracts it and the view is stored), and write one derived entry.
   */
  private defineTextWorkflow(kind: string, task: 'ocr' | 'entities', schema: string): void {
    this.jobs.define<TextWorkflowOutput>({
      kind,
      task: { filename: VIEW_TASKS_MODULE, name: task },
      timeoutMs: TIMEOUT_MS,
      prepare: async (job) => {
        const input = job.input as TextWorkflowInput;
        if (await this.units.has(RUNS, [job.tenant, input.documentId, input.runKey])) return { done: { reused: true } };
        // OCR needs the pages' details, so it always reads the content; entities need only the text.
        const text = task === 'entities' ? await this.views.readView(job.tenant, input.textViewKey) : undefined;
        const bytes = text ?? (await this.views.readBase(input.base));
        const prepared: TextTaskInput = { bytes, mediaType: text ? 'text/plain' : input.base.mediaType, language: input.language, fromView: text !== undefined };
        return { prepared, transfer: bytes.length > 0 ? [bytes.buffer as ArrayBuffer] : [] };
      },
      store: async (job, output) => {
        const input = job.input as TextWorkflowInput;
        if (!output.textBytes || (await this.views.has(job.tenant, input.textViewKey))) return { ...output, textBytes: undefined };
        const stored = await this.views.store(output.textBytes, { ops: [{ op: 'ocrText', version: 1, language: input.language }], base: input.base });
        return { ...output, textBytes: undefined, stored };
      },
      apply: (unit, job, output) => this.applyTextWorkflow(unit, job, output, schema),
    });
  }

  /** In the job's completion unit: the text view (if made), the derived entry, the run's record. */
  private async applyTextWorkflow(unit: Unit, job: JobRecord, output: TextWorkflowOutput, schema: string) {
    const input = job.input as TextWorkflowInput;
    const runKey: [string, string, string] = [job.tenant, input.documentId, input.runKey];
    if (output.reused) {
      const run = await unit.get(RUNS, runKey);
      if (run) return { derivedNamespaces: run.derivedNamespaces, viewKeys: run.viewKeys };
      throw new JobError('run_missing', 'The stored run vanished; run the workflow again', true);
    }
    if (!output.data || !output.engine) throw new Error('a text workflow task returned no data');
    const textOps: ViewOp[] = [{ op: 'ocrText', version: 1, language: input.language }];
    // The text view exists now: stored by an earlier run or request (record keeps that one), or by this one.
    await this.views.record(unit, job.tenant, input.textViewKey, textOps, input.base, output.stored);
    const fromView = schema === ENTITIES_SCHEMA;
    const provenance = {
      producer: { name: output.engine.name, version: output.engine.version },
      producedAt: new Date().toISOString(),
      input: fromView ? { kind: 'view' as const, key: input.textViewKey } : { kind: 'blob' as const, key: input.base.key },
      ...(output.confidence === undefined ? {} : { confidence: output.confidence }),
    };
    const valid = await this.metadata.derived.record(unit, job, input.documentId, input.targetNamespace, { schema, data: output.data, provenance, actor: input.actor, receipt: input.receipt });
    const outputs = {
      derivedNamespaces: [input.targetNamespace],
      ...(valid ? {} : { quarantinedNamespaces: [input.targetNamespace] }),
      viewKeys: [input.textViewKey],
    };
    // Only a valid entry is a result to reuse: a quarantined one is computed again next time.
    if (valid) unit.put(RUNS, runKey, { jobId: job.jobId, derivedNamespaces: outputs.derivedNamespaces, viewKeys: outputs.viewKeys });
    return outputs;
  }
}
