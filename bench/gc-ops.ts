/**
 * Garbage collection and operator events (issue 6).
 *
 * 1. GC at scale: a data directory is prepared directly (not through HTTP, which would take
 *    hours at 1M blocks): N block files of 64 random bytes in the block-store layout
 *    (`blocks/<h[0:3]>/<sha256 hex>-64`), and the catalog written with the engine's own code
 *    (CatalogEnv.open + BlobCatalog.publish, which also writes the `blocks` records), one
 *    manifest per 1,000 blocks; then one manifest in ten is deleted (BlobCatalog.remove), so
 *    10% of the blocks are unreferenced but still have their `blocks` records, as after real
 *    deletes. The records are not aged: the server runs with SVC_GC_MIN_AGE=0s (and
 *    SVC_GC_QUARANTINE_AGE=0s for the purge step), so age does not decide anything. Then the
 *    real server starts on that directory and the bench times
 *    `POST /api/ops/v1/gc?phase=mark&apply=false`, `phase=quarantine&apply=true` and
 *    `phase=purge&apply=true`, with the server's memory (VmRSS/RssAnon/RssFile every 50 ms and
 *    VmHWM, reset before each phase through /proc/<pid>/clear_refs) and CPU, and checks the
 *    reports' counts (and the quarantine directory on disk). Preparation is timed apart.
 * 2. 100 idle SSE subscribers: 4 KiB GET and POST throughput (bench/load.ts, 8 keep-alive
 *    connections, closed loop) without and with 100 `GET /api/ops/v1/events` streams that read
 *    every event (real sockets, in a child process so that the load generator's event loop is
 *    not theirs), alternating (ABBA), at SVC_OPS_REFRESH_MS=1000 (the default) and 100.
 *
 *   node dist/bench/gc-ops.js [--quick] [--strict] [--gc-only | --sse-only] [--blocks N]
 *
 * Writes bench/results/gc-ops-<timestamp>.json and prints the Markdown section. `runGcOps` and
 * `renderGcOpsSection` are for bench/run.ts.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { xxh64 } from '@node-rs/xxhash';
import type { StoredBlock } from '../engine/store/index.js';

import { CatalogEnv, LmdbBlobCatalog } from '../engine/store/index.js';
import { benchArgs } from './args.js';
import { processCpuSeconds } from './cpu.js';
import { type LoadResult, runLoad, summarize } from './load.js';
import { RawConnection, bodyRequest, getRequest, postRequest } from './raw-http.js';
import type { GcReport } from '../engine/gc/report.js';
import { type Target, f, machineEnvironment, mark, median, mib, ms, pct, renderTargets } from './report.js';
import { ServerProcess } from './server-process.js';
import { fsDescription, tmpParentFor } from './host.js';

const BLOCK_BYTES = 64;
const BLOCKS_PER_MANIFEST = 1000;
/** One manifest in this many is deleted: its blocks become unreferenced. */
const DELETE_EVERY = 10;
const SUBSCRIBERS = 100;
const COST_TARGET = 0.05;

export interface GcOpsOptions {
  /** The repository root (dist/server/main.js is started from there). */
  repo: string;
  quick: boolean;
  durability: 'strict' | 'relaxed';
  /** Block files for the GC part (default 1,000,000; 100,000 with quick). */
  blocks?: number;
  gc?: boolean;
  sse?: boolean;
  /** Where the temp data directories go (default: os.tmpdir() when on the repository's disk). */
  tmpParent?: string;
  progress?: (msg: string) => void;
}

export interface MemoryPeak {
  /** VmRSS right before the phase's request. */
  beforeBytes: number;
  /** VmHWM after the phase (reset before it when /proc/<pid>/clear_refs allowed it). */
  hwmBytes?: number;
  hwmReset: boolean;
  /** Peaks of the 50 ms samples. */
  peakRssBytes: number;
  peakAnonBytes: number;
  peakFileBytes: number;
  samples: number;
  /** max(sampled peak, VmHWM when reset) − the idle baseline's VmRSS. */
  growthOverIdleBytes: number;
  /** The same for RssAnon (heap and other private memory, LMDB's map excluded). */
  anonGrowthOverIdleBytes: number;
}

export interface GcPhaseResult {
  phase: 'mark' | 'quarantine' | 'purge';
  apply: boolean;
  request: string;
  seconds: number;
  /** The report's finishedAt − startedAt. */
  serverSeconds: number;
  /** Block files in the store when the phase started / seconds. */
  blockFilesPerSecond: number;
  serverCpuSeconds?: number;
  memory: MemoryPeak;
  catalogBytesAfter: number;
  /** The server's report (engine/gc), without its run bookkeeping. */
  report: Omit<GcReport, 'runId' | 'phase' | 'apply' | 'trigger' | 'startedAt' | 'finishedAt'>;
  check: { ok: boolean; text: string };
  /** GET /api/health/live, one after the other on one keep-alive connection during the phase: how long other requests wait. */
  probe: { requests: number; p50Ms: number; p99Ms: number; maxMs: number };
}

export interface GcScaleResult {
  blocks: number;
  blockBytes: number;
  referenced: number;
  unreferenced: number;
  manifests: number;
  deletedManifests: number;
  blocksPerManifest: number;
  dataDir: { parent: string; fsType: string; sameDeviceAsRepo: boolean };
  preparation: {
    seconds: number;
    fileWriteSeconds: number;
    catalogSeconds: number;
    deleteSeconds: number;
    catalogBytes: number;
    /** Disk space a block file takes (st_blocks of one) x the number of files. */
    blockFilesAllocatedBytes: number;
    /** statfs delta over the preparation (other processes write to the same disk meanwhile). */
    diskBytesUsed: number;
  };
  serverStartSeconds: number;
  idleRssBytes: number;
  idleAnonBytes: number;
  phases: GcPhaseResult[];
  quarantineFilesOnDisk?: number;
  cleanupSeconds?: number;
  error?: string;
}

export interface SseRun {
  round: number;
  subscribers: number;
  get: LoadResult;
  post: LoadResult;
  /** Snapshot events the subscribers received during each measured window (all subscribers). */
  eventsDuringGet?: number;
  eventsDuringPost?: number;
  /** Seconds between the subscriber counts around each load call (warm-up, window and drain). */
  getCallSeconds: number;
  postCallSeconds: number;
  /** svc_ops_subscribers while subscribed. */
  serverSubscribers?: number;
}

/** The server idle (no requests) without and then with the subscribers: what they cost on their own. */
export interface SseIdle {
  seconds: number;
  withoutCpuPercent: number;
  withCpuPercent: number;
  /** Snapshot events per second the subscribers received in the idle window (all of them). */
  eventsPerSecond: number;
}

export interface SseSetting {
  refreshMs: number;
  idle?: SseIdle;
  runs: SseRun[];
  getRatios: number[];
  postRatios: number[];
  getMedianRatio: number;
  postMedianRatio: number;
  /** median(with) / median(without). */
  getRatioOfMedians: number;
  postRatioOfMedians: number;
  error?: string;
}

export interface SseResult {
  connections: number;
  warmupMs: number;
  durationMs: number;
  rounds: number;
  settings: SseSetting[];
}

export interface GcOpsResult {
  tool: 'svc-bench-gc-ops';
  startedAt: string;
  finishedAt?: string;
  mode: 'full' | 'quick';
  durability: 'strict' | 'relaxed';
  environment: { cpuModel: string; cpus: number; memoryBytes: number; os: string; node: string; gitCommit?: string; gitDirty?: boolean; loadAverageAtStart: number[] };
  gc?: GcScaleResult;
  sse?: SseResult;
  serverProblems: string[];
  errors: Array<{ phase: string; message: string }>;
  targets: Target[];
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** Child processes and directories to remove when the bench is interrupted (standalone main). */
const cleanups = new Set<() => void>();

/** Sets environment variables for the server about to start, restoring them afterwards. */
async function withEnv<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const saved = new Map<string, string | undefined>();
  for (const [k, v] of Object.entries(vars)) {
    saved.set(k, process.env[k]);
    process.env[k] = v;
  }
  try {
    return await fn();
  } finally {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

function procStatus(pid: number): { rss: number; anon: number; file: number; hwm: number } | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/status`, 'latin1');
    const field = (name: string) => {
      const m = new RegExp(`^${name}:\\s+(\\d+)\\s+kB`, 'm').exec(text);
      return m ? Number(m[1]) * 1024 : 0;
    };
    return { rss: field('VmRSS'), anon: field('RssAnon'), file: field('RssFile') + field('RssShmem'), hwm: field('VmHWM') };
  } catch {
    return undefined;
  }
}

/** VmRSS, RssAnon and RssFile(+Shmem) every `intervalMs`; the peaks of each. */
class MemorySampler {
  peakRss = 0;
  peakAnon = 0;
  peakFile = 0;
  samples = 0;
  private timer?: NodeJS.Timeout;

  constructor(private readonly pid: number, private readonly intervalMs = 50) {}

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
  }

  sample(): void {
    const s = procStatus(this.pid);
    if (!s) return;
    this.samples++;
    this.peakRss = Math.max(this.peakRss, s.rss);
    this.peakAnon = Math.max(this.peakAnon, s.anon);
    this.peakFile = Math.max(this.peakFile, s.file);
  }

  stop(): void {
    clearInterval(this.timer);
    this.sample();
  }
}

/** Resets the peak RSS (VmHWM) of a process we own; false when the kernel refuses. */
function resetHwm(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

function usedBytes(dir: string): number {
  const s = fs.statfsSync(dir);
  return (s.blocks - s.bfree) * s.bsize;
}

function catalogBytes(fsRoot: string): number {
  try {
    return fs.statSync(path.join(fsRoot, 'catalog', 'data.mdb')).size;
  } catch {
    return 0;
  }
}

async function startServer(repo: string, fsRoot: string, durability: 'strict' | 'relaxed', env: Record<string, string>): Promise<ServerProcess> {
  // HTTP_PORT=0: the model listener must not take (or collide on) its default 8080.
  const server = await withEnv({ HTTP_PORT: '0', ...env }, () =>
    ServerProcess.start({ entry: path.join(repo, 'dist', 'server', 'main.js'), fsRoot, durability, startTimeoutMs: 120_000 }),
  );
  const kill = () => server.kill();
  killers.set(server, kill);
  cleanups.add(kill);
  return server;
}

const killers = new WeakMap<ServerProcess, () => void>();

async function stopServer(server: ServerProcess, problems: string[]): Promise<void> {
  await server.stop();
  for (const p of server.problems) if (problems.length < 50) problems.push(p);
  const kill = killers.get(server);
  if (kill) cleanups.delete(kill);
}

function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------------
// 1. GC at scale

/**
 * Writes `total` block files and the catalog: manifests of BLOCKS_PER_MANIFEST blocks each
 * (published with BlobCatalog.publish), then every DELETE_EVERY-th manifest removed.
 */
async function prepareStore(fsRoot: string, total: number, progress: (m: string) => void): Promise<GcScaleResult['preparation'] & { manifests: number; deleted: number; unreferenced: number }> {
  const t0 = performance.now();
  const used0 = usedBytes(path.dirname(fsRoot));
  const blocksDir = path.join(fsRoot, 'blocks');
  fs.mkdirSync(path.join(blocksDir, '.tmp'), { recursive: true });
  for (let p = 0; p < 4096; p++) fs.mkdirSync(path.join(blocksDir, p.toString(16).padStart(3, '0')));
  const env = CatalogEnv.open(fsRoot, 'relaxed');
  const store = new LmdbBlobCatalog(env);
  const manifests = Math.ceil(total / BLOCKS_PER_MANIFEST);
  const ids: string[] = [];
  let fileWriteMs = 0;
  let pending: Array<Promise<unknown>> = [];
  let written = 0;
  let lastReport = performance.now();
  for (let m = 0; m < manifests; m++) {
    const count = Math.min(BLOCKS_PER_MANIFEST, total - written);
    const bytes = randomBytes(count * BLOCK_BYTES);
    const whole = createHash('sha256');
    const blocks: StoredBlock[] = new Array(count);
    const tw = performance.now();
    for (let i = 0; i < count; i++) {
      const data = bytes.subarray(i * BLOCK_BYTES, (i + 1) * BLOCK_BYTES);
      const hex = createHash('sha256').update(data).digest('hex');
      whole.update(data);
      fs.writeFileSync(path.join(blocksDir, hex.slice(0, 3), `${hex}-${BLOCK_BYTES}`), data);
      blocks[i] = { hex, size: BLOCK_BYTES, checksum: xxh64(data), fresh: true };
    }
    fileWriteMs += performance.now() - tw;
    written += count;
    const blobHex = whole.digest('hex');
    ids.push(`sha-256:${blobHex}:${count * BLOCK_BYTES}`);
    pending.push(store.publish(blobHex, count * BLOCK_BYTES, 'application/octet-stream', 'fastcdc', blocks));
    if (pending.length >= 64) {
      await Promise.all(pending);
      pending = [];
    }
    if (performance.now() - lastReport > 10_000) {
      lastReport = performance.now();
      progress(`  prepared ${f(written)} of ${f(total)} block files (${f((performance.now() - t0) / 1000, 0)} s)`);
    }
  }
  await Promise.all(pending);
  const published = performance.now();
  let deleted = 0;
  let unreferenced = 0;
  for (let m = DELETE_EVERY - 1; m < manifests; m += DELETE_EVERY) {
    if (!(await store.remove(ids[m]))) throw new Error(`manifest ${ids[m]} was not there to delete`);
    deleted++;
    unreferenced += Number(ids[m].split(':')[2]) / BLOCK_BYTES;
  }
  const counts = await store.totals();
  await env.close();
  const sample = fs.readdirSync(path.join(blocksDir, '000'))[0] ?? fs.readdirSync(path.join(blocksDir, 'fff'))[0];
  const perFile = sample ? fs.statSync(path.join(blocksDir, sample.slice(0, 3), sample)).blocks * 512 : NaN;
  const t1 = performance.now();
  if (counts.blocks !== total) throw new Error(`the catalog has ${counts.blocks} block records, ${total} block files were written`);
  if (counts.blobs !== manifests - deleted) throw new Error(`the catalog has ${counts.blobs} manifests, expected ${manifests - deleted}`);
  const seconds = (t1 - t0) / 1000;
  return {
    seconds,
    fileWriteSeconds: fileWriteMs / 1000,
    catalogSeconds: (published - t0 - fileWriteMs) / 1000,
    deleteSeconds: (t1 - published) / 1000,
    catalogBytes: catalogBytes(fsRoot),
    blockFilesAllocatedBytes: perFile * total,
    diskBytesUsed: usedBytes(path.dirname(fsRoot)) - used0,
    manifests,
    deleted,
    unreferenced,
  };
}

function countQuarantined(fsRoot: string): number {
  const q = path.join(fsRoot, 'blocks', '.quarantine');
  let n = 0;
  let parts: string[];
  try {
    parts = fs.readdirSync(q);
  } catch {
    return 0;
  }
  for (const p of parts) n += fs.readdirSync(path.join(q, p)).length;
  return n;
}

async function gcPhase(server: ServerProcess, fsRoot: string, phase: GcPhaseResult['phase'], apply: boolean, files: number, idle: { rss: number; anon: number }, expect: (r: GcPhaseResult['report']) => { ok: boolean; text: string }): Promise<GcPhaseResult> {
  const request = `POST /api/ops/v1/gc?phase=${phase}&apply=${apply}`;
  const before = procStatus(server.pid);
  const hwmReset = resetHwm(server.pid);
  const cpu0 = processCpuSeconds(server.pid);
  const sampler = new MemorySampler(server.pid);
  const probeConn = await RawConnection.connect(server.port);
  const latencies: number[] = [];
  let probing = true;
  const probeLoop = (async () => {
    while (probing) {
      const r = await probeConn.request(getRequest('/api/health/live'), false, 10 * 60_000);
      latencies.push(r.doneAt - r.sentAt);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  sampler.start();
  const t0 = performance.now();
  let res;
  try {
    res = await RawConnection.requestOnce(server.port, bodyRequest('POST', `/api/ops/v1/gc?phase=${phase}&apply=${apply}`, 'application/json', ''), 60 * 60_000);
  } finally {
    sampler.stop();
    probing = false;
    await probeLoop.catch(() => {});
    probeConn.close();
  }
  const lat = summarize(latencies);
  const seconds = (performance.now() - t0) / 1000;
  const cpu1 = processCpuSeconds(server.pid);
  const after = procStatus(server.pid);
  const body = res.body?.toString('utf8') ?? '';
  if (res.status !== 200) throw new Error(`${request} answered HTTP ${res.status}: ${body.slice(0, 500)}`);
  const report = JSON.parse(body) as GcPhaseResult['report'] & { startedAt: string; finishedAt: string };
  const hwm = hwmReset ? after?.hwm : undefined;
  const peak = Math.max(sampler.peakRss, hwm ?? 0);
  return {
    phase,
    apply,
    request,
    seconds,
    serverSeconds: (Date.parse(report.finishedAt) - Date.parse(report.startedAt)) / 1000,
    blockFilesPerSecond: files / seconds,
    serverCpuSeconds: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined,
    memory: {
      beforeBytes: before?.rss ?? 0,
      hwmBytes: hwm,
      hwmReset,
      peakRssBytes: sampler.peakRss,
      peakAnonBytes: sampler.peakAnon,
      peakFileBytes: sampler.peakFile,
      samples: sampler.samples,
      growthOverIdleBytes: peak - idle.rss,
      anonGrowthOverIdleBytes: sampler.peakAnon - idle.anon,
    },
    catalogBytesAfter: catalogBytes(fsRoot),
    report: {
      markedBlocks: report.markedBlocks,
      candidates: report.candidates,
      quarantined: report.quarantined,
      purged: report.purged,
      restored: report.restored,
      skipped: report.skipped,
      quarantineBlocks: report.quarantineBlocks,
      error: report.error,
    },
    check: expect(report),
    probe: { requests: latencies.length, p50Ms: lat.p50Ms, p99Ms: lat.p99Ms, maxMs: lat.maxMs },
  };
}

async function runGcScale(opts: GcOpsOptions, tmpParent: string, problems: string[], progress: (m: string) => void): Promise<GcScaleResult> {
  const total = opts.blocks ?? (opts.quick ? 100_000 : 1_000_000);
  const dir = fs.mkdtempSync(path.join(tmpParent, 'svc-gc-ops-'));
  const cleanup = () => removeDir(dir);
  cleanups.add(cleanup);
  const fsRoot = path.join(dir, 'data');
  const result: GcScaleResult = {
    blocks: total,
    blockBytes: BLOCK_BYTES,
    referenced: 0,
    unreferenced: 0,
    manifests: 0,
    deletedManifests: 0,
    blocksPerManifest: BLOCKS_PER_MANIFEST,
    dataDir: { parent: tmpParent, fsType: fsDescription(tmpParent), sameDeviceAsRepo: fs.statSync(tmpParent).dev === fs.statSync(opts.repo).dev },
    preparation: { seconds: 0, fileWriteSeconds: 0, catalogSeconds: 0, deleteSeconds: 0, catalogBytes: 0, blockFilesAllocatedBytes: 0, diskBytesUsed: 0 },
    serverStartSeconds: 0,
    idleRssBytes: 0,
    idleAnonBytes: 0,
    phases: [],
  };
  let server: ServerProcess | undefined;
  try {
    progress(`GC: preparing ${f(total)} block files of ${BLOCK_BYTES} bytes and their catalog in ${fsRoot} (${result.dataDir.fsType})`);
    const prep = await prepareStore(fsRoot, total, progress);
    result.manifests = prep.manifests;
    result.deletedManifests = prep.deleted;
    result.unreferenced = prep.unreferenced;
    result.referenced = total - prep.unreferenced;
    const { manifests: _m, deleted: _d, unreferenced: _u, ...preparation } = prep;
    result.preparation = preparation;
    progress(`GC: prepared in ${f(prep.seconds, 1)} s (files ${f(prep.fileWriteSeconds, 1)} s, catalog ${f(prep.catalogSeconds, 1)} s, deletes ${f(prep.deleteSeconds, 1)} s); ${f(result.referenced)} referenced, ${f(result.unreferenced)} unreferenced`);
    const ts = performance.now();
    server = await startServer(opts.repo, fsRoot, opts.durability, { SVC_GC_MIN_AGE: '0s', SVC_GC_QUARANTINE_AGE: '0s', SVC_GC_INTERVAL: '0' });
    result.serverStartSeconds = (performance.now() - ts) / 1000;
    // Idle baseline: a quiet moment after start, the median of 10 samples.
    await new Promise((r) => setTimeout(r, 2000));
    const idle: Array<{ rss: number; anon: number }> = [];
    for (let i = 0; i < 10; i++) {
      const s = procStatus(server.pid);
      if (s) idle.push(s);
      await new Promise((r) => setTimeout(r, 100));
    }
    result.idleRssBytes = median(idle.map((s) => s.rss));
    result.idleAnonBytes = median(idle.map((s) => s.anon));
    const base = { rss: result.idleRssBytes, anon: result.idleAnonBytes };
    const { referenced, unreferenced } = result;
    const counts = (r: GcPhaseResult['report'], moved: number, what: string) => {
      const ok = !r.error && r.markedBlocks === referenced && r.candidates === (what === 'purged' ? 0 : unreferenced) && moved === unreferenced;
      return { ok, text: `marked ${f(r.markedBlocks)} (expected ${f(referenced)}), candidates ${f(r.candidates)}, ${what} ${f(moved)} (expected ${f(unreferenced)})${r.error ? `; error: ${r.error}` : ''}` };
    };

    progress(`GC: POST /api/ops/v1/gc?phase=mark&apply=false (${f(total)} block files)`);
    result.phases.push(await gcPhase(server, fsRoot, 'mark', false, total, base, (r) => {
      const ok = !r.error && r.markedBlocks === referenced && r.candidates === unreferenced;
      return { ok, text: `marked ${f(r.markedBlocks)} (expected ${f(referenced)}), candidates ${f(r.candidates)} (expected ${f(unreferenced)})${r.error ? `; error: ${r.error}` : ''}` };
    }));
    progress(`GC: mark ${f(result.phases[0].seconds, 1)} s; POST /api/ops/v1/gc?phase=quarantine&apply=true`);
    result.phases.push(await gcPhase(server, fsRoot, 'quarantine', true, total, base, (r) => counts(r, r.quarantined.count, 'quarantined')));
    result.quarantineFilesOnDisk = countQuarantined(fsRoot);
    const q = result.phases[1];
    if (result.quarantineFilesOnDisk !== unreferenced) q.check = { ok: false, text: `${q.check.text}; but ${f(result.quarantineFilesOnDisk)} files in blocks/.quarantine` };
    else q.check.text += `; ${f(result.quarantineFilesOnDisk)} files in blocks/.quarantine`;
    progress(`GC: quarantine ${f(q.seconds, 1)} s; POST /api/ops/v1/gc?phase=purge&apply=true (SVC_GC_QUARANTINE_AGE=0s)`);
    // The purge walks no directory: it marks again, then settles the receipts.
    result.phases.push(await gcPhase(server, fsRoot, 'purge', true, total - unreferenced, base, (r) => {
      const ok = !r.error && r.markedBlocks === referenced && r.purged.count === unreferenced && r.quarantineBlocks === 0;
      return { ok, text: `marked ${f(r.markedBlocks)} (expected ${f(referenced)}), purged ${f(r.purged.count)} (expected ${f(unreferenced)}), receipts left ${f(r.quarantineBlocks)}${r.error ? `; error: ${r.error}` : ''}` };
    }));
    progress(`GC: purge ${f(result.phases[2].seconds, 1)} s`);
  } catch (err) {
    result.error = err instanceof Error ? err.message : String(err);
    if (server && !server.alive) result.error += `; ${server.describeExit()}`;
    progress(`GC FAILED: ${result.error}`);
  } finally {
    if (server) await stopServer(server, problems);
    progress(`GC: removing ${dir}`);
    const tc = performance.now();
    cleanup();
    cleanups.delete(cleanup);
    result.cleanupSeconds = (performance.now() - tc) / 1000;
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// 2. SSE subscribers vs 4 KiB throughput

/**
 * The subscribers' process (CommonJS, run with `node -e`): SSE_COUNT sockets on
 * `GET /api/ops/v1/events`, each reading and counting every event. Prints `{"type":"ready"}`
 * once each has had its first snapshot event; answers each `stats` line on stdin with the
 * totals; closes everything when stdin ends.
 */
const SUBSCRIBER_SCRIPT = String.raw`
const net = require('net');
const port = Number(process.env.SSE_PORT), count = Number(process.env.SSE_COUNT);
const MARK = 'event: snapshot\n';
const subs = [];
let ready = false;
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
function check() {
  if (!ready && subs.every((s) => s.events > 0)) { ready = true; out({ type: 'ready' }); }
}
for (let i = 0; i < count; i++) {
  const s = { events: 0, bytes: 0, tail: '', head: '', closed: false, error: undefined, status: undefined };
  subs.push(s);
  const sock = net.connect(port, '127.0.0.1');
  s.sock = sock;
  sock.setEncoding('latin1');
  sock.on('connect', () => sock.write('GET /api/ops/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n'));
  sock.on('data', (text) => {
    s.bytes += text.length;
    if (s.status === undefined) { s.head += text; if (s.head.length >= 12) s.status = Number(s.head.slice(9, 12)); }
    const t = s.tail + text;
    let at = 0;
    while ((at = t.indexOf(MARK, at)) >= 0) { s.events++; at += MARK.length; }
    s.tail = t.slice(-(MARK.length - 1));
    check();
  });
  sock.on('error', (err) => { s.error = String(err); });
  sock.on('close', () => { s.closed = true; });
}
let buf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  buf += d;
  let nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    buf = buf.slice(nl + 1);
    let events = 0, bytes = 0, minEvents = Infinity, closed = 0, errors = 0, non200 = 0;
    for (const s of subs) {
      events += s.events; bytes += s.bytes; minEvents = Math.min(minEvents, s.events);
      if (s.closed) closed++; if (s.error) errors++; if (s.status !== undefined && s.status !== 200) non200++;
    }
    out({ type: 'stats', events, bytes, minEvents, closed, errors, non200 });
  }
});
process.stdin.on('end', () => { for (const s of subs) s.sock.destroy(); process.exit(0); });
`;

interface SubscriberStats {
  events: number;
  bytes: number;
  minEvents: number;
  closed: number;
  errors: number;
  non200: number;
}

class Subscribers {
  private lines: string[] = [];
  private waiters: Array<() => void> = [];
  private partial = '';
  private exited = false;
  private readonly kill = () => this.child.kill('SIGKILL');

  private constructor(private readonly child: ChildProcess) {
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (text: string) => {
      this.partial += text;
      let nl: number;
      while ((nl = this.partial.indexOf('\n')) >= 0) {
        this.lines.push(this.partial.slice(0, nl));
        this.partial = this.partial.slice(nl + 1);
      }
      for (const w of this.waiters.splice(0)) w();
    });
    child.once('exit', () => {
      this.exited = true;
      for (const w of this.waiters.splice(0)) w();
    });
    cleanups.add(this.kill);
  }

  static async open(port: number, count: number): Promise<Subscribers> {
    const child = spawn(process.execPath, ['-e', SUBSCRIBER_SCRIPT], { env: { ...process.env, SSE_PORT: String(port), SSE_COUNT: String(count) }, stdio: ['pipe', 'pipe', 'inherit'] });
    const subs = new Subscribers(child);
    const line = await subs.next(30_000);
    if ((JSON.parse(line) as { type: string }).type !== 'ready') throw new Error(`subscribers: unexpected line ${line}`);
    return subs;
  }

  private async next(timeoutMs: number): Promise<string> {
    const until = Date.now() + timeoutMs;
    while (this.lines.length === 0) {
      if (this.exited) throw new Error('the subscribers process exited');
      if (Date.now() > until) throw new Error(`the subscribers process said nothing within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
    return this.lines.shift()!;
  }

  async stats(): Promise<SubscriberStats> {
    this.child.stdin!.write('stats\n');
    return JSON.parse(await this.next(10_000)) as SubscriberStats;
  }

  async close(): Promise<void> {
    this.child.stdin!.end();
    const gone = new Promise<void>((resolve) => (this.exited ? resolve() : this.child.once('exit', () => resolve())));
    await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
    if (!this.exited) this.kill();
    cleanups.delete(this.kill);
  }
}

async function metricValue(port: number, name: string): Promise<number | undefined> {
  const res = await RawConnection.requestOnce(port, getRequest('/metrics'), 10_000);
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(res.body?.toString('utf8') ?? '');
  return m ? Number(m[1]) : undefined;
}

async function runSseSetting(opts: GcOpsOptions, tmpParent: string, refreshMs: number, shape: { connections: number; warmupMs: number; durationMs: number; rounds: number }, problems: string[], progress: (m: string) => void): Promise<SseSetting> {
  const setting: SseSetting = { refreshMs, runs: [], getRatios: [], postRatios: [], getMedianRatio: NaN, postMedianRatio: NaN, getRatioOfMedians: NaN, postRatioOfMedians: NaN };
  const dir = fs.mkdtempSync(path.join(tmpParent, 'svc-sse-ops-'));
  const cleanup = () => removeDir(dir);
  cleanups.add(cleanup);
  let server: ServerProcess | undefined;
  let subs: Subscribers | undefined;
  try {
    server = await startServer(opts.repo, path.join(dir, 'data'), opts.durability, { SVC_OPS_REFRESH_MS: String(refreshMs) });
    const port = server.port;
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await RawConnection.requestOnce(port, postRequest('/api/v1/blobs', 'application/octet-stream', randomBytes(4096)), 60_000);
      if (res.status !== 201) throw new Error(`seeding a 4 KiB blob answered HTTP ${res.status}: ${res.body?.toString('utf8').slice(0, 300)}`);
      ids.push((JSON.parse(res.body!.toString('utf8')) as { blob: { id: string } }).blob.id);
    }
    const gets = ids.map((id) => getRequest(`/api/v1/blobs/${id}`));
    const s = server;
    // The subscribers' own cost: server CPU while idle, without and with them.
    const idleSeconds = opts.quick ? 3 : 10;
    const cpuOver = async (seconds: number): Promise<number> => {
      const c0 = processCpuSeconds(s.pid) ?? NaN;
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, seconds * 1000));
      return (((processCpuSeconds(s.pid) ?? NaN) - c0) / ((performance.now() - t0) / 1000)) * 100;
    };
    progress(`SSE refresh ${refreshMs} ms: idle server CPU without and with ${SUBSCRIBERS} subscribers (${idleSeconds} s each)`);
    await new Promise((r) => setTimeout(r, 1000));
    const withoutCpuPercent = await cpuOver(idleSeconds);
    subs = await Subscribers.open(port, SUBSCRIBERS);
    await new Promise((r) => setTimeout(r, 1000));
    const e0 = await subs.stats();
    const te = performance.now();
    const withCpuPercent = await cpuOver(idleSeconds);
    const e1 = await subs.stats();
    setting.idle = { seconds: idleSeconds, withoutCpuPercent, withCpuPercent, eventsPerSecond: (e1.events - e0.events) / ((performance.now() - te) / 1000) };
    await subs.close();
    subs = undefined;
    const load = async (kind: 'get' | 'post'): Promise<LoadResult> => {
      let seq = 0;
      const r = await runLoad({
        port,
        connections: shape.connections,
        pipeline: 1,
        warmupMs: shape.warmupMs,
        durationMs: shape.durationMs,
        next: kind === 'get' ? () => gets[seq++ % gets.length] : () => postRequest('/api/v1/blobs', 'application/octet-stream', randomBytes(4096)),
        expectStatus: kind === 'get' ? 200 : 201,
        server: s,
      });
      if (r.errors > 0) throw new Error(`${kind} load: ${r.errors} errors, first: ${r.firstError}`);
      return r;
    };
    for (let round = 1; round <= shape.rounds; round++) {
      // ABBA: without first in odd rounds, with first in even ones.
      const order = round % 2 === 1 ? [0, SUBSCRIBERS] : [SUBSCRIBERS, 0];
      const pair: SseRun[] = [];
      for (const n of order) {
        progress(`SSE refresh ${refreshMs} ms, round ${round}: ${n} subscribers`);
        let serverSubscribers: number | undefined;
        if (n > 0) {
          subs = await Subscribers.open(port, n);
          serverSubscribers = await metricValue(port, 'svc_ops_subscribers');
        }
        const s0 = await subs?.stats();
        const g0 = performance.now();
        const get = await load('get');
        const s1 = await subs?.stats();
        const g1 = performance.now();
        const post = await load('post');
        const s2 = await subs?.stats();
        const g2 = performance.now();
        if (subs) {
          if (s2!.closed || s2!.errors || s2!.non200) throw new Error(`subscribers: ${s2!.closed} closed, ${s2!.errors} errors, ${s2!.non200} not 200`);
          await subs.close();
          subs = undefined;
        }
        // Subscriber counts: the events received during the whole load call (warm-up and drain included).
        const scale = (a?: SubscriberStats, b?: SubscriberStats) => (a && b ? b.events - a.events : undefined);
        const run: SseRun = { round, subscribers: n, get, post, eventsDuringGet: scale(s0, s1), eventsDuringPost: scale(s1, s2), getCallSeconds: (g1 - g0) / 1000, postCallSeconds: (g2 - g1) / 1000, serverSubscribers };
        setting.runs.push(run);
        pair.push(run);
      }
      const w = pair.find((r) => r.subscribers > 0)!;
      const wo = pair.find((r) => r.subscribers === 0)!;
      setting.getRatios.push(w.get.requestsPerSecond / wo.get.requestsPerSecond);
      setting.postRatios.push(w.post.requestsPerSecond / wo.post.requestsPerSecond);
    }
    const rps = (n: number, k: 'get' | 'post') => setting.runs.filter((r) => (n > 0 ? r.subscribers > 0 : r.subscribers === 0)).map((r) => r[k].requestsPerSecond);
    setting.getMedianRatio = median(setting.getRatios);
    setting.postMedianRatio = median(setting.postRatios);
    setting.getRatioOfMedians = median(rps(1, 'get')) / median(rps(0, 'get'));
    setting.postRatioOfMedians = median(rps(1, 'post')) / median(rps(0, 'post'));
  } catch (err) {
    setting.error = err instanceof Error ? err.message : String(err);
    if (server && !server.alive) setting.error += `; ${server.describeExit()}`;
    progress(`SSE refresh ${refreshMs} ms FAILED: ${setting.error}`);
  } finally {
    if (subs) await subs.close();
    if (server) await stopServer(server, problems);
    cleanup();
    cleanups.delete(cleanup);
  }
  return setting;
}

// ---------------------------------------------------------------------------------------------
// Run, targets, report

export async function runGcOps(opts: GcOpsOptions): Promise<GcOpsResult> {
  const progress = opts.progress ?? (() => {});
  const tmpParent = opts.tmpParent ?? tmpParentFor(opts.repo);
  const result: GcOpsResult = {
    tool: 'svc-bench-gc-ops',
    startedAt: new Date().toISOString(),
    mode: opts.quick ? 'quick' : 'full',
    durability: opts.durability,
    environment: machineEnvironment(opts.repo),
    serverProblems: [],
    errors: [],
    targets: [],
  };
  if (opts.gc !== false) {
    result.gc = await runGcScale(opts, tmpParent, result.serverProblems, progress);
    if (result.gc.error) result.errors.push({ phase: 'gc', message: result.gc.error });
  }
  if (opts.sse !== false) {
    const shape = opts.quick ? { connections: 8, warmupMs: 500, durationMs: 2000, rounds: 2 } : { connections: 8, warmupMs: 1000, durationMs: 5000, rounds: 4 };
    result.sse = { ...shape, settings: [] };
    for (const refreshMs of [1000, 100]) {
      const setting = await runSseSetting(opts, tmpParent, refreshMs, shape, result.serverProblems, progress);
      result.sse.settings.push(setting);
      if (setting.error) result.errors.push({ phase: `sse refresh ${refreshMs} ms`, message: setting.error });
    }
  }
  result.finishedAt = new Date().toISOString();
  result.targets = gcOpsTargets(result);
  return result;
}

export function gcOpsTargets(r: GcOpsResult): Target[] {
  const targets: Target[] = [];
  const g = r.gc;
  if (g) {
    const mk = g.phases.find((p) => p.phase === 'mark');
    const qu = g.phases.find((p) => p.phase === 'quarantine');
    targets.push({
      name: `GC mark + quarantine of ${f(g.blocks)} blocks: report counts`,
      value: qu ? `marked ${f(qu.report.markedBlocks)}, quarantined ${f(qu.report.quarantined.count)}` : 'n/a',
      target: `marked ${f(g.referenced)}, quarantined ${f(g.unreferenced)}`,
      pass: mk && qu ? mk.check.ok && qu.check.ok : undefined,
    });
  }
  const d = r.sse?.settings.find((s) => s.refreshMs === 1000);
  if (d) {
    for (const k of ['get', 'post'] as const) {
      const ratio = k === 'get' ? d.getMedianRatio : d.postMedianRatio;
      const ok = Number.isFinite(ratio);
      targets.push({
        name: `${SUBSCRIBERS} idle SSE subscribers (SVC_OPS_REFRESH_MS=1000): 4 KiB ${k.toUpperCase()} throughput cost`,
        value: ok ? `${pct((1 - ratio) * 100, 1)} (median paired ratio ${f(ratio, 3)})` : 'n/a',
        target: '< 5%',
        pass: ok ? 1 - ratio < COST_TARGET : undefined,
      });
    }
  }
  return targets;
}

const sec = (s: number | undefined) => (s === undefined || !Number.isFinite(s) ? 'n/a' : s < 10 ? `${f(s, 2)} s` : `${f(s, 1)} s`);

export function renderGcOpsSection(r: GcOpsResult): string {
  const L: string[] = ['## Garbage collection and operator events (issue 6)', ''];
  L.push('### Targets', '', ...renderTargets(r.targets));
  if (r.errors.length) L.push('### Errors', '', ...r.errors.map((e) => `- **${e.phase}**: ${e.message.replace(/\n/g, ' ')}`), '');
  const g = r.gc;
  if (g) {
    L.push(`### GC at ${f(g.blocks)} blocks`, '');
    L.push(
      `Prepared directly (not timed below): ${f(g.blocks)} block files of ${g.blockBytes} bytes in the 4096 partitions, ${f(g.manifests)} manifests of ${f(g.blocksPerManifest)} blocks published with BlobCatalog.publish, then ${f(g.deletedManifests)} of them deleted: ${f(g.referenced)} blocks referenced, ${f(g.unreferenced)} unreferenced (with their \`blocks\` records). ` +
        `Preparation ${sec(g.preparation.seconds)} (files ${sec(g.preparation.fileWriteSeconds)}, catalog ${sec(g.preparation.catalogSeconds)}, deletes ${sec(g.preparation.deleteSeconds)}); catalog ${mib(g.preparation.catalogBytes)}, block files ${mib(g.preparation.blockFilesAllocatedBytes)} allocated on disk (${f(g.preparation.blockFilesAllocatedBytes / g.blocks)} bytes each); data on ${g.dataDir.fsType} under ${g.dataDir.parent}${g.dataDir.sameDeviceAsRepo ? ' (the repository\'s disk)' : ''}. ` +
        `Server with SVC_GC_MIN_AGE=0s and SVC_GC_QUARANTINE_AGE=0s (records not aged), SVC_DURABILITY=${r.durability}; started in ${sec(g.serverStartSeconds)}; idle VmRSS ${mib(g.idleRssBytes)} (RssAnon ${mib(g.idleAnonBytes)}).`,
      '',
    );
    L.push('| Request | Time | Block files/s | Server CPU | Peak VmRSS | Growth over idle | Peak RssAnon (growth) | Peak RssFile | Catalog after | Health probe p50 / max | Counts |');
    L.push('|---|---|---|---|---|---|---|---|---|---|---|');
    for (const p of g.phases) {
      const m = p.memory;
      const peak = Math.max(m.peakRssBytes, m.hwmBytes ?? 0);
      L.push(
        `| \`${p.request.replace('POST /api/ops/v1/gc', '')}\` | ${sec(p.seconds)} | ${f(p.blockFilesPerSecond)} | ${sec(p.serverCpuSeconds)} | ${mib(peak)} | +${mib(m.growthOverIdleBytes)} | ${mib(m.peakAnonBytes)} (+${mib(m.anonGrowthOverIdleBytes)}) | ${mib(m.peakFileBytes)} | ${mib(p.catalogBytesAfter)} | ${ms(p.probe.p50Ms)} / ${ms(p.probe.maxMs)} (${f(p.probe.requests)}) | ${p.check.ok ? 'OK' : 'WRONG'}: ${p.check.text} |`,
      );
    }
    L.push('');
    L.push(
      `Time = the POST until its report (one HTTP request). Block files/s = the files in the store / time (the purge walks no directory: its figure is the referenced blocks it marks / time). Peak VmRSS = max of the 50 ms samples and VmHWM (reset before each request via /proc/<pid>/clear_refs${g.phases.every((p) => p.memory.hwmReset) ? '' : ' — refused here, samples only'}); RssFile includes LMDB's memory map. Health probe = \`GET /api/health/live\` one after the other (10 ms apart) on one keep-alive connection during the request: how long other requests wait while GC runs (count in brackets). Every phase marks first. Removing the directory took ${sec(g.cleanupSeconds)}.`,
      '',
    );
  }
  const s = r.sse;
  if (s) {
    L.push(`### ${SUBSCRIBERS} idle SSE subscribers vs 4 KiB requests`, '');
    L.push(
      `${s.connections} keep-alive connections, closed loop, ${f(s.warmupMs / 1000, 1)} s warm-up + ${f(s.durationMs / 1000, 1)} s measured per run; GET of 8 stored 4 KiB blobs round-robin, then POST of distinct random 4 KiB bodies; runs without and with ${SUBSCRIBERS} \`GET /api/ops/v1/events\` streams alternating ABBA, ${s.rounds} of each. The subscribers read every event in a separate process. Ratio = with / without in the same round.`,
      '',
    );
    L.push('| SVC_OPS_REFRESH_MS | Request | Without: req/s per run | With: req/s per run | Paired ratios | Median paired ratio | Cost | Events received | Server CPU without / with | Other CPU without / with |');
    L.push('|---|---|---|---|---|---|---|---|---|---|');
    for (const st of s.settings) {
      if (st.error) {
        L.push(`| ${st.refreshMs} | | | | | | | | | error: ${st.error.replace(/\|/g, '/').slice(0, 200)} |`);
        continue;
      }
      for (const k of ['get', 'post'] as const) {
        const wo = st.runs.filter((x) => x.subscribers === 0);
        const w = st.runs.filter((x) => x.subscribers > 0);
        const ratios = k === 'get' ? st.getRatios : st.postRatios;
        const ratio = k === 'get' ? st.getMedianRatio : st.postMedianRatio;
        const evRate = w.map((x) => ((k === 'get' ? x.eventsDuringGet : x.eventsDuringPost) ?? 0) / (k === 'get' ? x.getCallSeconds : x.postCallSeconds) / SUBSCRIBERS);
        L.push(
          `| ${st.refreshMs} | ${k.toUpperCase()} | ${wo.map((x) => f(x[k].requestsPerSecond)).join(', ')} | ${w.map((x) => f(x[k].requestsPerSecond)).join(', ')} | ${ratios.map((x) => f(x, 3)).join(', ')} | ${f(ratio, 3)} | ${pct((1 - ratio) * 100, 1)} | ${f(median(evRate), 2)}/s per subscriber (median) | ${pct(median(wo.map((x) => x[k].cpu.serverPercent ?? NaN)))} / ${pct(median(w.map((x) => x[k].cpu.serverPercent ?? NaN)))} | ${pct(median(wo.map((x) => x[k].cpu.otherPercent ?? NaN)))} / ${pct(median(w.map((x) => x[k].cpu.otherPercent ?? NaN)))} |`,
        );
      }
    }
    L.push('');
    L.push(
      `Idle server (no requests), server CPU over ${f(s.settings[0]?.idle?.seconds ?? NaN)} s without / with the ${SUBSCRIBERS} subscribers: ${s.settings
        .filter((st) => st.idle)
        .map((st) => `refresh ${st.refreshMs} ms ${pct(st.idle!.withoutCpuPercent, 2)} / ${pct(st.idle!.withCpuPercent, 2)} of a core (${f(st.idle!.eventsPerSecond, 1)} events/s delivered)`)
        .join('; ')}.`,
      '',
    );
    const subsSeen = s.settings.flatMap((st) => st.runs.map((x) => x.serverSubscribers).filter((x) => x !== undefined));
    L.push(`Server-side \`svc_ops_subscribers\` while subscribed: ${subsSeen.length ? [...new Set(subsSeen)].join(', ') : 'n/a'}. Cost = 1 − median paired ratio; a negative cost is noise. Events received: snapshot events counted by the subscribers over each load call (warm-up, window, drain) / its duration. CPU: % of one core over the window (${r.environment.cpus} CPUs = ${r.environment.cpus * 100}%); other = the host's busy time minus server and load generator (the subscribers' process is in it when they run: other processes and the subscribers compete with the server for the CPUs).`, '');
  }
  if (r.serverProblems.length) {
    L.push(`Server warnings/errors logged: ${r.serverProblems.length}`, ...r.serverProblems.slice(0, 5).map((p) => `- \`${p.replace(/`/g, "'").slice(0, 300)}\``), '');
  }
  return L.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Standalone

async function main(): Promise<void> {
  const args = benchArgs({
    usage: 'usage: node dist/bench/gc-ops.js [--quick] [--strict] [--gc-only | --sse-only] [--blocks=N]',
    options: {
      quick: { type: 'boolean', help: '100,000 blocks, 2 s load windows, 2 rounds' },
      strict: { type: 'boolean', help: 'SVC_DURABILITY=strict (default: relaxed)' },
      'gc-only': { type: 'boolean', help: 'only GC at scale' },
      'sse-only': { type: 'boolean', help: 'only the SSE subscribers' },
      blocks: { type: 'string', value: 'N', help: 'block files for the GC part (default 1,000,000; 100,000 with --quick)' },
    },
  });
  const { quick, strict, 'gc-only': gcOnly, 'sse-only': sseOnly } = args.values;
  if (gcOnly && sseOnly) args.fail('--gc-only and --sse-only exclude each other');
  const blocks = args.number('blocks');
  const gc = !sseOnly;
  const sse = !gcOnly;
  const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const progress = (msg: string) => process.stderr.write(`[gc-ops ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  const emergency = () => {
    for (const c of [...cleanups].reverse()) {
      try {
        c();
      } catch {
        // best effort
      }
    }
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      progress(`${sig}: stopping the server and removing the temp directories`);
      emergency();
      process.exit(130);
    });
  }
  const result = await runGcOps({ repo, quick, durability: strict ? 'strict' : 'relaxed', blocks, gc, sse, progress });
  const outDir = path.join(repo, 'bench', 'results');
  fs.mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, `gc-ops-${result.startedAt.replace(/:/g, '-')}.json`);
  fs.writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  const e = result.environment;
  const header = [
    `# svc: garbage collection and operator events (${quick ? 'quick run, --quick' : 'full run'}; SVC_DURABILITY=${result.durability})`,
    '',
    `- Run: ${result.startedAt} → ${result.finishedAt}`,
    `- Host: ${e.cpuModel}, ${e.cpus} CPU(s), ${mib(e.memoryBytes, 0)} RAM, ${e.os}, Node ${e.node}; load average at start ${e.loadAverageAtStart.join(' / ')}`,
    `- Code: ${e.gitCommit ? `\`${e.gitCommit.slice(0, 12)}\`${e.gitDirty ? ' (working tree has uncommitted changes)' : ''}` : 'unknown'}`,
    '',
  ];
  process.stdout.write(`${header.join('\n')}\n${renderGcOpsSection(result)}\n`);
  progress(`wrote ${path.relative(repo, file)}; verdicts: ${result.targets.map((t) => `${t.name}: ${mark(t.pass)}`).join('; ')}`);
  if (result.errors.length > 0 || result.targets.some((t) => t.pass === false && t.name.includes('report counts'))) process.exitCode = 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
