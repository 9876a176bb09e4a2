// Views of document content, materialized once into the CAS and served from it (decisions.md,
// "Views", "View delivery"). Owner of the `doc_views` table (a tenant's materialized views by
// key) and `doc_view_jobs` (the job materializing a view, so concurrent first requests join one
// job). Materialization is a durable job: its content is read here, the engines run on the
// worker pool (workers/views.ts), the result is stored through the same ingest as every upload.

import { fileURLToPath } from 'node:url';
import type { BlobReader, BlockRoots, DirectIngest, IngestOptions } from '../cas/index.js';
import { JobError, type JobQueue, type JobRecord } from '../jobs/index.js';
import { Manifest, type ManifestRecord, type Unit, type UnitStore, table } from '../store/index.js';
import { readWhole, storeBytes, type StoredBytes } from './content-io.js';
import { type ViewOp, possibleViewKeys, viewKey, viewMediaType, viewUnsupported } from './view-spec.js';

export const VIEW_TASKS_MODULE = fileURLToPath(new URL('../../workers/views.js', import.meta.url));
const TERMINAL = new Set(['completed', 'failed', 'dead']);
/** OCR of a long scan takes minutes on two cores; longer than this it is retried, then dead. */
const MATERIALIZE_TIMEOUT_MS = 30 * 60_000;

const VIEWS = table<ViewRecord, [string, string]>('doc_views');
const VIEW_JOBS = table<string, [string, string]>('doc_view_jobs');

export interface ViewRecord {
  key: string;
  /** The content key the view was made from (absent on records made before it was kept). */
  base?: string;
  /** Absent for a view without bytes (a text view of content without text). */
  blobId?: string;
  record?: ManifestRecord;
  mediaType: string;
  size: number;
  createdAt: number;
}

/** Base content as a view starts from it: its content key and media type. */
export interface ViewBase {
  key: string;
  mediaType: string;
  size: number;
}

export interface MaterializeInput {
  documentId: string;
  base: ViewBase;
  ops: ViewOp[];
  viewKey: string;
}

/** What the worker gives back: the view's bytes. */
export interface MaterializeOutput {
  bytes?: Uint8Array;
  stored?: StoredBytes;
  reused?: boolean;
}

export interface ViewDeps {
  /** The manifest of stored document content by key (`b3:<hex>`), if any. */
  contentOf(key: string): Promise<Manifest | undefined>;
  reader: BlobReader;
  startIngest(options: IngestOptions): DirectIngest;
  maxInputBytes: number;
}

export class ViewService {
  constructor(
    private readonly units: UnitStore,
    private readonly jobs: JobQueue,
    private readonly deps: ViewDeps,
  ) {
    this.defineMaterialize('view.materialize');
  }

  /**
   * A job kind that materializes the view its input names (also the redact workflow's): prepare
   * reads the base content (a view already stored completes the job at once), the worker applies
   * the operations, store puts the bytes into the CAS, apply records the view.
   */
  defineMaterialize(kind: string): void {
    this.jobs.define<MaterializeOutput>({
      kind,
      task: { filename: VIEW_TASKS_MODULE, name: 'materialize' },
      timeoutMs: MATERIALIZE_TIMEOUT_MS,
      prepare: async (job) => {
        const input = job.input as MaterializeInput;
        if (await this.units.has(VIEWS, [job.tenant, input.viewKey])) return { done: { reused: true } };
        const bytes = await this.readBase(input.base);
        return { prepared: { bytes }, transfer: [bytes.buffer as ArrayBuffer] };
      },
      store: async (job, output) => (output.bytes ? { stored: await this.store(output.bytes, job.input as MaterializeInput) } : output),
      apply: async (unit, job, output) => {
        const input = job.input as MaterializeInput;
        if (!output.reused) await this.record(unit, job.tenant, input.viewKey, input.ops, input.base, output.stored);
        return { derivedNamespaces: [], viewKeys: [input.viewKey] };
      },
    });
  }

  /** The tenant's materialized view, if there is one. */
  async cached(tenant: string, key: string): Promise<{ record: ViewRecord; manifest?: Manifest } | undefined> {
    const record = await this.units.get(VIEWS, [tenant, key]);
    if (!record) return undefined;
    return { record, manifest: record.blobId && record.record ? new Manifest(record.blobId, record.record) : undefined };
  }

  /**
   * The view of `base`: stored already, or the job materializing it (joined when one is under way,
   * started otherwise; one check-and-start step, so concurrent first requests share one job).
   */
  request(tenant: string, documentId: string, base: ViewBase, ops: ViewOp[]): Promise<{ key: string; jobId?: string }> {
    const key = viewKey(base.key, ops);
    this.checkSize(base);
    return this.units.run(async (unit) => {
      if (await unit.has(VIEWS, [tenant, key])) return { key };
      const running = await unit.get(VIEW_JOBS, [tenant, key]);
      const job = running === undefined ? undefined : await this.jobs.get(tenant, running);
      if (job && !TERMINAL.has(job.state)) return { key, jobId: job.jobId };
      const input: MaterializeInput = { documentId, base, ops, viewKey: key };
      const started = this.jobs.enqueueIn(unit, tenant, 'view.materialize', input);
      unit.put(VIEW_JOBS, [tenant, key], started.jobId);
      return { key, jobId: started.jobId };
    });
  }

  /** The job, once settled or after `ms` (then undefined: still running). */
  async settled(jobId: string, ms: number): Promise<JobRecord | undefined> {
    return this.jobs.settled(jobId, ms).catch(() => undefined);
  }

  /** 422 view_unsupported for content larger than the engines take (SVC_VIEW_MAX_INPUT_BYTES). */
  checkSize(base: ViewBase): void {
    if (base.size > this.deps.maxInputBytes) {
      throw viewUnsupported(`The content (${base.size} bytes) is larger than views are made of (SVC_VIEW_MAX_INPUT_BYTES = ${this.deps.maxInputBytes})`);
    }
  }

  /** The base content's bytes for a worker (a JobError when it cannot be read as a view's input). */
  async readBase(base: ViewBase): Promise<Buffer> {
    const manifest = await this.deps.contentOf(base.key);
    if (!manifest) throw new JobError('content_not_found', `The content ${base.key} is not in the catalog`, false);
    if (manifest.record.size > this.deps.maxInputBytes) throw new JobError('view_unsupported', 'The content is larger than SVC_VIEW_MAX_INPUT_BYTES', false);
    return readWhole(this.deps.reader, manifest);
  }

  /** A view's bytes as the tenant's stored view reads them (for a workflow that starts from a view). */
  async readView(tenant: string, key: string): Promise<Buffer | undefined> {
    const found = await this.cached(tenant, key);
    if (!found) return undefined;
    return found.manifest ? readWhole(this.deps.reader, found.manifest) : Buffer.alloc(0);
  }

  has(tenant: string, key: string): Promise<boolean> {
    return this.units.has(VIEWS, [tenant, key]);
  }

  /** The bytes of a view into the CAS (unlisted: the view record keeps them). */
  store(bytes: Uint8Array, input: Pick<MaterializeInput, 'ops' | 'base'>): Promise<StoredBytes | undefined> {
    return storeBytes(this.deps.startIngest, bytes, viewMediaType(input.ops, input.base.mediaType));
  }

  /** In a job's completion unit: the view's record (its materializing job is done). */
  async record(unit: Unit, tenant: string, key: string, ops: readonly ViewOp[], base: ViewBase, stored: StoredBytes | undefined): Promise<void> {
    if (!(await unit.has(VIEWS, [tenant, key]))) {
      unit.put(VIEWS, [tenant, key], {
        key, base: base.key, blobId: stored?.blobId, record: stored?.record, mediaType: viewMediaType(ops, base.mediaType), size: stored?.record.size ?? 0, createdAt: Date.now(),
      });
    }
    unit.remove(VIEW_JOBS, [tenant, key]);
  }

  /**
   * Whether `key` is a view of the tenant made from one of `contents` (content keys): its record
   * names its base; a record made before bases were kept is matched by the keys the views this
   * service makes of each content would have (every step combination, installed OCR languages).
   */
  async isViewOf(tenant: string, key: string, contents: readonly string[]): Promise<boolean> {
    const view = await this.units.get(VIEWS, [tenant, key]);
    if (!view) return false;
    if (view.base !== undefined) return contents.includes(view.base);
    return contents.some((content) => possibleViewKeys(content).includes(key));
  }

  /** Blocks of stored views: garbage collection keeps them while a view record points at them. */
  blockRoots(): BlockRoots {
    const units = this.units;
    return {
      name: 'document views',
      // In the data directory only where the store is this node's (fs, s3); pg-s3 shares it.
      persistent: !units.shared,
      async *digests() {
        for await (const { value } of units.scan(VIEWS)) {
          const refs = value.record?.refs;
          if (refs) for (let at = 0; at < refs.length; at += 40) yield refs.subarray(at, at + 32);
        }
      },
    };
  }
}
