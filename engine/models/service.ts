// The model runtime's state: registrations (LMDB), loaded models (LRU + TTL cache), loading
// with a timeout and size limits, and row execution on the shared worker pool.

import { existsSync, mkdirSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Piscina } from 'piscina';
import type { ExecutionMode, ModelConfig } from '../config.js';
import type { Logger } from '../log.js';
import type { KeyedCatalog } from '../store/index.js';
import { readBundle } from './bundle/read.js';
import { compileBundle, type CompiledModel } from './compile.js';
import { ModelError } from './errors.js';
import { ModelRegistry, type Registration } from './registry.js';
import { Repositories } from './repositories.js';
import type { BundleRoots } from './roots.js';
import { sampleFrame } from './sample.js';
import { LRUCache } from 'lru-cache';
import type { FrameSplit } from './frame-split.js';
import type { FrameTask, SplitTask, TaskResult } from './protocol.js';
import type { RankQuery, RankedPart, TransformQuery, TransformedPart } from './transform.js';

export interface LoadedModel {
  registration: Registration;
  /** One load of the model: workers key their compiled copy by it. */
  key: string;
  docPath: string;
  model: CompiledModel;
  /** Requests running rows now; the document is deleted once it is dropped and unused. */
  users: number;
  dropped: boolean;
}

/** A frame request's body, shared with the workers that run its parts. */
export interface FrameBody {
  bytes: SharedArrayBuffer;
  length: number;
}

/** Body bytes per part below which a frame is not split further (each part parses the whole body). */
const PART_MIN_BYTES = 4096;

/** How many parts a frame runs in: at most `width`, and one per PART_MIN_BYTES of body. */
function frameParts(width: number, bodyLength: number): number {
  return Math.max(1, Math.min(width, Math.ceil(bodyLength / PART_MIN_BYTES)));
}

const WARMUP_SINGLE_ROW_FRAMES = 256;

const WORKER_MODULE = new URL('../../workers/model.js', import.meta.url).href;

export class ModelService {
  readonly registry: ModelRegistry;
  private readonly repositories: Repositories;
  private readonly cache: LRUCache<string, LoadedModel>;
  private readonly loading = new Map<string, Promise<LoadedModel>>();
  private readonly docDir: string;
  private tasksInFlight = 0;

  constructor(
    readonly config: ModelConfig,
    registrations: KeyedCatalog<Registration>,
    fsRoot: string,
    private readonly roots: BundleRoots,
    private readonly pool: Piscina,
    private readonly log: Logger,
  ) {
    this.registry = new ModelRegistry(registrations);
    // Not under <SVC_FS_ROOT>/models: that is the default bundle root (SVC_MODEL_ROOTS), the
    // operator's, and this directory is emptied at every start.
    const workDir = join(fsRoot, 'model-runtime');
    if (!existsSync(workDir)) {
      // The first start since the work files moved: those of the old place are only work files.
      for (const old of ['loaded', 'downloads']) rmSync(join(fsRoot, 'models', old), { recursive: true, force: true });
    }
    // Downloads and compiled documents of a previous run are never reused.
    rmSync(workDir, { recursive: true, force: true });
    this.docDir = join(workDir, 'loaded');
    mkdirSync(this.docDir, { recursive: true });
    this.repositories = new Repositories(config, join(workDir, 'downloads'), roots);
    // An entry expires a fixed time after it was loaded (a read does not extend it); every entry
    // that leaves (evicted, expired, replaced, deleted) releases its model. lru-cache reads a ttl
    // of 0 as none, so MODEL_CACHE_TTL=0 becomes 1 ms: loaded for each request, as it says.
    this.cache = new LRUCache<string, LoadedModel>({ max: config.cacheSize, ttl: Math.max(1, config.cacheTtlMs), dispose: (loaded) => this.forget(loaded) });
  }

  get poolThreads(): number {
    return this.pool.threads.length;
  }

  get queueSize(): number {
    return this.pool.queueSize;
  }

  get runningTasks(): number {
    return this.tasksInFlight;
  }

  /** Registers (or replaces) a model: acquires, loads and warms it first; on failure the previous registration stays. */
  async register(name: string, uri: string): Promise<{ created: boolean; registration: Registration }> {
    Repositories.parse(uri);
    const registration: Registration = { modelName: name, uri: uri.trim(), registeredAt: new Date().toISOString() };
    const loaded = await this.load(registration);
    try {
      // One frame of MODEL_WARMUP_ROWS, then single-row frames on every thread: the request
      // path's code is compiled by the JIT before the first request rather than during the first thousands.
      await this.warm(loaded, 1, this.config.warmupRows);
      await this.warm(loaded, WARMUP_SINGLE_ROW_FRAMES, 1, this.poolThreads);
    } catch (err) {
      this.forget(loaded);
      throw err;
    }
    const created = this.registry.get(name) === undefined;
    await this.registry.put(registration);
    this.cache.set(name, loaded);
    this.log.info('model registered', { model: name, uri: registration.uri, inputs: loaded.model.inputSchema.length });
    return { created, registration };
  }

  /**
   * Drops the model from the cache and the registry. Answers the loaded model (loaded now if
   * need be), or only its registration when its bundle cannot be loaded any more (moved, or
   * outside SVC_MODEL_ROOTS since they changed): such a registration must still be removable.
   */
  async unregister(name: string): Promise<LoadedModel | Registration> {
    const registration = this.registry.get(name);
    let answer: LoadedModel | Registration;
    try {
      answer = await this.get(name);
    } catch (err) {
      if (!registration || !(err instanceof ModelError) || err.code === 404) throw err;
      answer = registration;
    }
    this.cache.delete(name);
    this.loading.delete(name);
    await this.registry.remove(name);
    return answer;
  }

  /**
   * Registrations whose file:// bundle the roots now refuse (made before SVC_MODEL_ROOTS or
   * security were set): they stay registered, and every use answers 403 ForbiddenLocation until
   * they are registered again from inside the roots or deleted. Said once at start.
   */
  async reportRefusedRegistrations(): Promise<void> {
    if (this.roots.directories === null) return;
    for (const { modelName, uri } of this.registry.list()) {
      const refused = await this.repositories.checkLocation(uri).then(
        () => false,
        (err: unknown) => err instanceof ModelError && err.error === 'ForbiddenLocation',
      );
      if (refused) this.log.warn('model registration outside SVC_MODEL_ROOTS: its uses answer 403 ForbiddenLocation until it is registered again', { model: modelName, uri });
    }
  }

  async get(name: string): Promise<LoadedModel> {
    const cached = this.cache.get(name);
    if (cached) return cached;
    const registration = this.registry.get(name);
    if (!registration) {
      const names = this.registry.names();
      if (names.length === 0) throw new ModelError('NoModelsLoaded', 'No models loaded', 404);
      throw new ModelError('ModelNotFound', `${name} not found in [${names.join(',')}]`, 404);
    }
    let pending = this.loading.get(name);
    if (!pending) {
      pending = this.load(registration).finally(() => this.loading.delete(name));
      this.loading.set(name, pending);
      const loaded = await pending;
      if (this.registry.get(name)?.uri === registration.uri) this.cache.set(name, loaded);
      return loaded;
    }
    return pending;
  }

  /** A transform of a request frame, in parts (see `frameParts`), in row order. */
  transform(loaded: LoadedModel, body: FrameBody, query: TransformQuery, mode: ExecutionMode, signal: AbortSignal): Promise<TransformedPart[]> {
    return this.runFrame('transform', loaded, body, query, mode, signal);
  }

  /** A rank of a request frame, in parts, in row order. */
  rank(loaded: LoadedModel, body: FrameBody, query: RankQuery, mode: ExecutionMode, signal: AbortSignal): Promise<RankedPart[]> {
    return this.runFrame('rank', loaded, body, query, mode, signal);
  }

  /**
   * Runs a frame in parts. With more than one part, a Leap frame is first split once on the pool
   * (frame-split.ts), so that each part parses only its own rows.
   */
  private runFrame<Q, T>(name: string, loaded: LoadedModel, body: FrameBody, query: Q, mode: ExecutionMode, signal: AbortSignal): Promise<T[]> {
    const count = frameParts(this.width(mode), body.length);
    const limits = { maxRows: this.config.maxFrameRows };
    return this.using(loaded, async () => {
      const splits = count > 1 ? await this.split(body, count, signal) : undefined;
      const tasks: FrameTask<Q>[] = [];
      for (let index = 0; index < count; index++) {
        tasks.push({ key: loaded.key, docPath: loaded.docPath, body: body.bytes, length: body.length, limits, part: { index, count }, split: splits?.[index], query });
      }
      return this.runTasks<T>(name, tasks, signal);
    });
  }

  private async split(body: FrameBody, count: number, signal: AbortSignal): Promise<FrameSplit[] | undefined> {
    const task: SplitTask = { body: body.bytes, length: body.length, count };
    this.tasksInFlight++;
    try {
      return (await this.pool.run(task, { filename: WORKER_MODULE, name: 'split', signal })) as FrameSplit[] | undefined;
    } finally {
      this.tasksInFlight--;
    }
  }

  /** Most tasks a request may use: `seq` one, `par` one per thread, `par-N` at most N. */
  private width(mode: ExecutionMode): number {
    return mode.kind === 'seq' ? 1 : mode.kind === 'par' ? this.poolThreads : Math.max(1, Math.min(mode.n, this.poolThreads));
  }

  /** Keeps the model's document while `work` runs (a dropped model's is deleted after). */
  private async using<T>(loaded: LoadedModel, work: () => Promise<T>): Promise<T> {
    loaded.users++;
    try {
      return await work();
    } finally {
      if (--loaded.users === 0 && loaded.dropped) rmSync(loaded.docPath, { force: true });
    }
  }

  /**
   * Transforms `frames` random frames of `rows` rows each (health checks and warm-up), on the
   * request path: JSON body, parse, run, JSON output. `concurrency` chains run side by side.
   */
  async warm(loaded: LoadedModel, frames: number, rows: number, concurrency = 1): Promise<void> {
    const signal = AbortSignal.timeout(this.config.loadTimeoutMs);
    const query: TransformQuery = { select: [], rank: [], desc: true, missing: 'impute' };
    const chain = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const text = Buffer.from(JSON.stringify(sampleFrame(loaded.model.inputSchema, loaded.model.inputDomains, rows, [])));
        const bytes = new SharedArrayBuffer(text.length);
        text.copy(new Uint8Array(bytes));
        await this.transform(loaded, { bytes, length: text.length }, query, this.config.executionStrategy, signal).catch((err: unknown) => {
          throw timeoutOr(err, signal, `Timeout error within ${this.config.loadTimeoutMs}ms for model [${loaded.registration.modelName}]: warm-up timed out`);
        });
      }
    };
    const chains = Math.max(1, Math.min(concurrency, frames));
    await Promise.all(Array.from({ length: chains }, (_, c) => chain(Math.floor(frames / chains) + (c < frames % chains ? 1 : 0))));
  }

  close(): void {
    this.cache.clear();
  }

  /** Runs the tasks together; results in task order; the first failing task (in order) gives the error. */
  private async runTasks<T>(name: string, tasks: object[], signal: AbortSignal): Promise<T[]> {
    this.tasksInFlight += tasks.length;
    const settled = await Promise.allSettled(
      tasks.map((task) =>
        (this.pool.run(task, { filename: WORKER_MODULE, name, signal }) as Promise<TaskResult<T>>).finally(() => this.tasksInFlight--),
      ),
    );
    // A body that is not JSON is the answer whichever part found it (a split part sees only its rows).
    for (const s of settled) {
      if (s.status === 'fulfilled' && !s.value.ok && s.value.syntax) throw new ModelError(s.value.error, s.value.message, s.value.code as 400);
    }
    return settled.map((s) => {
      if (s.status === 'rejected') throw s.reason;
      if (!s.value.ok) throw new ModelError(s.value.error, s.value.message, s.value.code as 400);
      return s.value.value;
    });
  }

  private async load(registration: Registration): Promise<LoadedModel> {
    const { modelName, uri } = registration;
    const signal = AbortSignal.timeout(this.config.loadTimeoutMs);
    const started = Date.now();
    const work = (async () => {
      const acquired = await this.repositories.acquire(uri, signal);
      try {
        const { maxBundleBytes: maxBytes, maxBundleFiles: maxFiles, maxZipEntries, maxDirectoryEntries } = this.config;
        const doc = await readBundle(acquired.path, { maxBytes, maxFiles, maxZipEntries, maxDirectoryEntries }, signal);
        const model = compileBundle(doc);
        const key = randomUUID();
        const docPath = join(this.docDir, `${key}.json`);
        writeFileSync(`${docPath}.tmp`, JSON.stringify(doc));
        renameSync(`${docPath}.tmp`, docPath);
        return { registration, key, docPath, model, users: 0, dropped: false };
      } finally {
        await acquired.release();
      }
    })();
    const timeout = new Promise<never>((_, reject) =>
      signal.addEventListener('abort', () =>
        reject(new ModelError('ModelTimeout', `Timeout error within ${this.config.loadTimeoutMs}ms for model [${modelName}]: bundle load timed out`, 408)),
      ),
    );
    const loaded = await Promise.race([work, timeout]);
    this.log.info('model loaded', { model: modelName, uri, ms: Date.now() - started });
    return loaded;
  }

  private forget(loaded: LoadedModel): void {
    loaded.dropped = true;
    if (loaded.users === 0) rmSync(loaded.docPath, { force: true });
  }
}

export function timeoutOr(err: unknown, signal: AbortSignal, message: string): unknown {
  return signal.aborted ? new ModelError('ModelTimeout', message, 408) : err;
}
