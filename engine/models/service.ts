// The model runtime's state: the registrations this node serves (read from the ModelRegistry
// store: the node's LMDB, or on pg-s3 the table every node shares, followed through its change
// feed), loaded models (LRU + TTL cache, per node), loading with a timeout and size limits, and
// row execution on the shared worker pool.

import { existsSync, mkdirSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Piscina } from 'piscina';
import type { ExecutionMode, ModelConfig } from '../base/config.js';
import type { Logger } from '../base/log.js';
import type { ModelRegistration, ModelRegistry, RegistryWatch } from '../store/index.js';
import { readBundle } from './bundle/read.js';
import { compileBundle, type CompiledModel } from './compile.js';
import { isModelError, modelError, modelNotFound, modelTimeout } from './errors.js';
import { Repositories } from './repositories.js';
import type { BundleRoots } from './roots.js';
import { sampleFrame } from './sample.js';
import { LRUCache } from 'lru-cache';
import type { FrameSplit } from './frame-split.js';
import type { FrameTask, SplitTask, TaskResult } from './protocol.js';
import type { RankQuery, RankedPart, TransformQuery, TransformedPart } from './transform.js';

export interface LoadedModel {
  /** What was loaded; its generation is UNCOMMITTED while a PUT validates it. */
  registration: ModelRegistration;
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

/** The generation of a bundle loaded by a PUT before its registration is committed: no stored one is negative. */
const UNCOMMITTED = -1;

const WORKER_MODULE = new URL('../../workers/model.js', import.meta.url).href;

export class ModelService {
  private readonly repositories: Repositories;
  private readonly cache: LRUCache<string, LoadedModel>;
  /** Loads in flight, by name, for one generation each. */
  private readonly loading = new Map<string, { generation: number; loaded: Promise<LoadedModel> }>();
  /** The registrations this node serves: the store's, as last read (`refresh`). */
  private registrations = new Map<string, ModelRegistration>();
  private watch?: RegistryWatch;
  /** The read of the store running now, and the one queued after it (see `refresh`). */
  private refreshing?: Promise<void>;
  private refreshQueued?: Promise<void>;
  private refreshFailing = false;
  private closed = false;
  private readonly docDir: string;
  private tasksInFlight = 0;

  constructor(
    readonly config: ModelConfig,
    private readonly store: ModelRegistry,
    fsRoot: string,
    private readonly roots: BundleRoots,
    private readonly pool: Piscina,
    private readonly log: Logger,
  ) {
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
    this.repositories = new Repositories(config, join(workDir, 'downloads'), roots, log);
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

  /** Reads the registry, then follows its changes (on a shared store, every node's). */
  async start(): Promise<void> {
    await this.refresh();
    this.watch = this.store.watch(() => void this.refresh().catch(() => {}));
  }

  /** The registrations this node serves, by name. */
  registered(): ModelRegistration[] {
    return [...this.registrations.values()];
  }

  /**
   * Registers (or replaces) a model: acquires, loads and warms it here first, and commits the
   * registration only if that succeeded, so a bundle that cannot load leaves the previous
   * registration on every node. Other nodes load it on first use.
   */
  async register(name: string, uri: string): Promise<{ created: boolean; registration: ModelRegistration }> {
    Repositories.parse(uri);
    const location = uri.trim();
    const loaded = await this.load({ modelName: name, uri: location, registeredAt: '', generation: UNCOMMITTED });
    let committed: { created: boolean; registration: ModelRegistration };
    try {
      // One frame of MODEL_WARMUP_ROWS, then single-row frames on every thread: the request
      // path's code is compiled by the JIT before the first request rather than during the first thousands.
      await this.warm(loaded, 1, this.config.warmupRows);
      await this.warm(loaded, WARMUP_SINGLE_ROW_FRAMES, 1, this.poolThreads);
      committed = await this.store.put(name, location, new Date().toISOString());
    } catch (err) {
      this.forget(loaded);
      throw err;
    }
    const { registration } = committed;
    loaded.registration = registration;
    await this.refresh().catch(() => {
      // Committed all the same. No read that started before the commit can still overwrite this
      // (reads run one at a time), and the next one that succeeds starts after it.
      this.registrations.set(name, registration);
    });
    // Another node's registration of the name may have committed after this one: then that one is served.
    if (this.registrations.get(name)?.generation === registration.generation) this.cache.set(name, loaded);
    else this.forget(loaded);
    this.log.info('model registered', { model: name, uri: registration.uri, inputs: loaded.model.inputSchema.length });
    return committed;
  }

  /**
   * Removes the registration, on every node. Answers the loaded model (loaded now if need be), or
   * only its registration when its bundle cannot be loaded any more (moved, or outside
   * SVC_MODEL_ROOTS since they changed): such a registration must still be removable. Reads the
   * store, not this node's copy, so a registration made on another node a moment ago is removable too.
   */
  async unregister(name: string): Promise<LoadedModel | ModelRegistration> {
    // Each round that does not remove was overtaken by another node's write of the name: read again.
    for (;;) {
      const all = await this.store.list();
      const registration = all.find((r) => r.modelName === name);
      if (!registration) throw modelNotFound(name, all.map((r) => r.modelName));
      let answer: LoadedModel | ModelRegistration;
      try {
        answer = await this.loadedOf(registration);
      } catch (err) {
        if (!isModelError(err) || err.kind === 'not_found') throw err;
        answer = registration;
      }
      if ('removed' in (await this.store.remove(name, registration.generation))) {
        await this.refresh().catch(() => this.follow(this.registered().filter((r) => r.modelName !== name)));
        return answer;
      }
    }
  }

  /**
   * Reads the store into `registrations` and drops the loaded models and loads of generations no
   * longer registered. Reads run one at a time, and each call is answered by a read that started
   * after it: a node never goes back to an older registry than one it has served, and a caller
   * that has just committed a change reads it.
   */
  refresh(): Promise<void> {
    if (this.refreshQueued) return this.refreshQueued;
    if (!this.refreshing) return this.startRefresh();
    const queued = this.refreshing.catch(() => {}).then(() => {
      this.refreshQueued = undefined;
      return this.startRefresh();
    });
    this.refreshQueued = queued;
    return queued;
  }

  private startRefresh(): Promise<void> {
    const read: Promise<void> = this.store
      .list()
      .then(
        (registrations) => {
          if (this.refreshFailing) this.log.info('models: the registry is read again');
          this.refreshFailing = false;
          this.follow(registrations);
        },
        (err: unknown) => {
          // Said once per outage (the watch asks again every few seconds), and not while closing.
          if (!this.refreshFailing && !this.closed) this.log.warn('models: reading the registry failed; this node serves the registrations it read last', { err: String(err) });
          this.refreshFailing = true;
          throw err;
        },
      )
      .finally(() => {
        if (this.refreshing === read) this.refreshing = undefined;
      });
    this.refreshing = read;
    return read;
  }

  /** Serves `registrations` from now on: loaded copies and loads of other generations are dropped. */
  private follow(registrations: readonly ModelRegistration[]): void {
    const next = new Map(registrations.map((r) => [r.modelName, r]));
    const current = (name: string, generation: number) => next.get(name)?.generation === generation;
    for (const [name, loaded] of [...this.cache.entries()]) {
      if (!current(name, loaded.registration.generation)) this.cache.delete(name);
    }
    for (const [name, pending] of this.loading) {
      if (!current(name, pending.generation)) this.loading.delete(name);
    }
    this.registrations = next;
  }

  /**
   * Registrations whose bundle the roots now refuse (made before SVC_MODEL_ROOTS or
   * security were set): they stay registered, and every use answers 403 ForbiddenLocation until
   * they are registered again from inside the roots or deleted. Said once at start.
   */
  async reportRefusedRegistrations(): Promise<void> {
    if (!this.roots.restricted) return;
    for (const { modelName, uri } of this.registrations.values()) {
      const refused = await this.repositories.checkLocation(uri).then(
        () => false,
        (err: unknown) => isModelError(err) && err.code === 'model_location_forbidden',
      );
      if (refused) this.log.warn('model registration outside SVC_MODEL_ROOTS: its uses answer 403 ForbiddenLocation until it is registered again', { model: modelName, uri });
    }
  }

  /** The loaded model registered under `name`, loaded on this node at its first use. */
  async get(name: string): Promise<LoadedModel> {
    const registration = this.registrations.get(name);
    if (!registration) throw modelNotFound(name, [...this.registrations.keys()]);
    return this.loadedOf(registration);
  }

  /** `registration`'s loaded copy: the cached one, the load in flight, or a new load (cached while it is the registered generation). */
  private async loadedOf(registration: ModelRegistration): Promise<LoadedModel> {
    const { modelName: name, generation } = registration;
    const cached = this.cache.get(name);
    if (cached?.registration.generation === generation) return cached;
    const inFlight = this.loading.get(name);
    if (inFlight?.generation === generation) return inFlight.loaded;
    const pending = this.load(registration).finally(() => {
      if (this.loading.get(name)?.loaded === pending) this.loading.delete(name);
    });
    this.loading.set(name, { generation, loaded: pending });
    const loaded = await pending;
    if (this.registrations.get(name)?.generation === generation) this.cache.set(name, loaded);
    // Replaced or removed while it loaded: this request still runs it, then its document goes.
    else loaded.dropped = true;
    return loaded;
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

  async close(): Promise<void> {
    this.closed = true;
    await this.watch?.close();
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
      if (s.status === 'fulfilled' && !s.value.ok && s.value.syntax) throw modelError(s.value.kind, s.value.code, s.value.message);
    }
    return settled.map((s) => {
      if (s.status === 'rejected') throw s.reason;
      if (!s.value.ok) throw modelError(s.value.kind, s.value.code, s.value.message);
      return s.value.value;
    });
  }

  private async load(registration: ModelRegistration): Promise<LoadedModel> {
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
        reject(modelTimeout(`Timeout error within ${this.config.loadTimeoutMs}ms for model [${modelName}]: bundle load timed out`)),
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
  return signal.aborted ? modelTimeout(message) : err;
}
