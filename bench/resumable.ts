/**
 * The resumable-upload scenario (issue 4): one large file uploaded as one resumable session in
 * 8 MiB parts, sequentially on one keep-alive connection, to svc (`/api/v1/uploads`: create,
 * PATCH parts, commit) and to the tus reference server (`@tus/server` + `@tus/file-store`,
 * bench/tus-server.ts: POST creation with Upload-Length, PATCH parts), alternating
 * svc, tus, svc, tus, ... in the same run.
 *
 * Each round uploads a fresh deterministic random file (its own seed: svc stores every block as
 * new, as tus writes every byte), the same file to both servers; its same-run SHA-256 rate
 * (bench/large.ts measureSha256) is the limit the throughput is compared with. Parts are read
 * from the file into two alternating buffers (the next part is read while the current one is in
 * flight), never the whole file. Dirty pages are flushed (`sync`) before each timed upload so no
 * run pays for the previous one's write-back.
 *
 * Measured per upload: the parts phase (create → last 204: throughput, part latency, CPU of the
 * server and of the bench), svc's commit (latency, % of the parts phase, CPU-seconds), the blob
 * id against the file's SHA-256 (svc) or the stored file's SHA-256 (tus), and svc's fresh and
 * duplicate blocks (/api/stats before and after).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { type CpuReport, CpuWindow, processCpuSeconds } from './cpu.js';
import { type ShaResult, measureSha256, writeRandomFile } from './large.js';
import { type Results, type Target, cpuText, f, mbs, median, mib, ms, pct, renderErrors, renderHeader, renderServer, renderTargets } from './report.js';
import { type ServerProcess, listeningPort } from './server-process.js';

const MiB = 1024 * 1024;
/** Every request's own time limit; a stalled server fails the run instead of hanging the bench. */
const REQUEST_TIMEOUT_MS = 120_000;
const THROUGHPUT_TARGET = 1.5;
const COMMIT_TARGET_PERCENT = 5;

export interface ResumableOptions {
  repo: string;
  /** The svc server (dist/server/main.js serve). */
  server: ServerProcess;
  durability: 'strict' | 'relaxed';
  /** Directory for the round files and the tus store (removed by the caller). */
  tmp: string;
  bodyBytes: number;
  rounds: number;
  partBytes?: number;
  seed: string;
  /**
   * The blob scenario's file, already stored by svc: uploaded once more as a resumable session
   * after the rounds (every block a duplicate; not part of the comparison).
   */
  storedFile?: { file: string; sha256Hex: string };
  progress: (msg: string) => void;
}

export interface ResumableRun {
  server: 'svc' | 'tus';
  /** 1.., or 0 for the re-upload of stored content. */
  round: number;
  /** `fresh`: a new file; `stored`: content svc already holds (all blocks duplicate). */
  content: 'fresh' | 'stored';
  bytes: number;
  parts: number;
  /** TCP connections the client opened for the whole session (1 = keep-alive held). */
  connections: number;
  /** Create request sent → last part's 204. */
  partsSeconds: number;
  mbPerSecond: number;
  ratioToSha256?: number;
  partLatency: { p50Ms: number; maxMs: number };
  /** svc: commit request sent → 200. */
  commitMs?: number;
  /** Commit latency as % of the parts phase. */
  commitPercent?: number;
  /** Create → commit 200 (svc), create → last 204 (tus). */
  totalSeconds: number;
  mbPerSecondWithCommit: number;
  /** Parts phase. */
  cpu: CpuReport;
  /** Server CPU-seconds (user + system, all threads) of the whole session, commit included. */
  serverCpuSeconds?: number;
  /** Of it, the commit. */
  commitServerCpuSeconds?: number;
  blobId?: string;
  expectedId: string;
  /** svc: committed blob id equals `sha-256:<file's SHA-256>:<size>`; tus: its stored file has the file's SHA-256 and size. */
  contentMatches: boolean;
  blocks?: { fresh: number; duplicate: number };
}

export interface ResumableRound {
  round: number;
  seed: string;
  sha256: ShaResult;
}

export interface Summary {
  runs: number;
  bestMbPerSecond: number;
  medianMbPerSecond: number;
}

export interface ResumableResult {
  skipped?: string;
  /** Why the scenario stopped early (the runs before it are kept). */
  error?: string;
  bodyBytes: number;
  partBytes: number;
  rounds: number;
  durability: 'strict' | 'relaxed';
  tusVersions?: { server: string; fileStore: string };
  roundFiles: ResumableRound[];
  runs: ResumableRun[];
  svc?: Summary & { medianCommitMs: number; medianCommitPercent: number; worstCommitPercent: number };
  tus?: Summary;
  /** svc median / tus median, svc best / tus best (parts phase), and the medians with svc's commit included. */
  ratio?: { median: number; best: number; medianWithCommit: number };
  /** Problems the tus server printed on stderr (it prints nothing when all is well). */
  tusProblems: string[];
  targets: Target[];
}

// ---------------------------------------------------------------------------------------------
// HTTP client: node:http on one keep-alive connection

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

class Client {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  private readonly sockets = new Set<net.Socket>();

  constructor(private readonly port: number) {}

  get connections(): number {
    return this.sockets.size;
  }

  /** One request; resolves once the answer is read and the body has been handed to the socket. */
  request(method: string, target: string, headers: Record<string, string>, body?: Buffer): Promise<Answer> {
    return new Promise((resolve, reject) => {
      let answer: Answer | undefined;
      let finished = false;
      /** What arrived of the answer, for the error message when the request fails. */
      let seen = '';
      const done = () => {
        if (answer && finished) {
          clearTimeout(timer);
          resolve(answer);
        }
      };
      const req = http.request({ host: '127.0.0.1', port: this.port, method, path: target, agent: this.agent, headers: { ...headers, 'Content-Length': String(body?.length ?? 0) } }, (res) => {
        const parts: Buffer[] = [];
        seen = `; the server had answered HTTP ${res.statusCode}`;
        res.on('data', (d: Buffer) => {
          parts.push(d);
          seen = `; the server had answered HTTP ${res.statusCode}: ${Buffer.concat(parts).toString('utf8').slice(0, 500)}`;
        });
        res.on('end', () => {
          answer = { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString('utf8') };
          done();
        });
        res.on('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
      });
      const timer = setTimeout(() => req.destroy(new Error(`no answer to ${method} ${target} within ${REQUEST_TIMEOUT_MS / 1000} s`)), REQUEST_TIMEOUT_MS);
      req.on('socket', (s) => this.sockets.add(s));
      req.on('finish', () => {
        finished = true;
        done();
      });
      req.on('error', (err) => {
        clearTimeout(timer);
        // An answer that came whole before the failure (e.g. a refusal, then the server closed
        // while the body was still being sent) is the answer.
        if (answer) resolve(answer);
        else reject(new Error(`${method} ${target}: ${err.message}${seen}`));
      });
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Reads the file's parts ahead: part i+1 is read while part i is in flight. */
class PartReader {
  private readonly buffers: [Buffer, Buffer];
  private next: Promise<Buffer> | undefined;
  private index = 0;

  private constructor(
    private readonly fh: FileHandle,
    private readonly size: number,
    private readonly partBytes: number,
  ) {
    this.buffers = [Buffer.allocUnsafe(partBytes), Buffer.allocUnsafe(partBytes)];
  }

  static async open(file: string, size: number, partBytes: number): Promise<PartReader> {
    const reader = new PartReader(await open(file, 'r'), size, partBytes);
    reader.next = reader.read(0);
    return reader;
  }

  get parts(): number {
    return Math.ceil(this.size / this.partBytes);
  }

  private async read(i: number): Promise<Buffer> {
    const at = i * this.partBytes;
    const length = Math.min(this.partBytes, this.size - at);
    const buf = this.buffers[i % 2];
    for (let got = 0; got < length; ) {
      const { bytesRead } = await this.fh.read(buf, got, length - got, at + got);
      if (bytesRead === 0) throw new Error(`the file ended at ${at + got} bytes, expected ${this.size}`);
      got += bytesRead;
    }
    return buf.subarray(0, length);
  }

  /** Part i (in order); starts reading part i+1. Its buffer is reused two parts later. */
  async take(): Promise<Buffer> {
    const part = await this.next!;
    this.index++;
    this.next = this.index < this.parts ? this.read(this.index) : undefined;
    return part;
  }

  async close(): Promise<void> {
    await this.next?.catch(() => undefined);
    await this.fh.close();
  }
}

function describe(a: Answer): string {
  return `HTTP ${a.status}${a.body ? `: ${a.body.slice(0, 500)}` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// The tus server process

export class TusProcess {
  port = 0;
  readonly problems: string[] = [];
  private stderrTail = '';
  private exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private readonly exited: Promise<void>;

  private constructor(readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => {
      this.exit = { code, signal };
      resolve();
    }));
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-8192);
      for (const line of text.split('\n')) if (line.trim() && this.problems.length < 20) this.problems.push(line.slice(0, 1000));
    });
  }

  static async start(entry: string, directory: string, env?: NodeJS.ProcessEnv): Promise<TusProcess> {
    const tus = new TusProcess(spawn(process.execPath, [entry, directory, '0'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } }));
    try {
      tus.port = await listeningPort(tus.child, () => tus.stderrTail, 30_000, 'the tus server');
    } catch (err) {
      tus.kill();
      throw err;
    }
    return tus;
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  describeExit(): string {
    return this.exit ? `the tus server exited (code ${this.exit.code}, signal ${this.exit.signal}); stderr tail: ${this.stderrTail.slice(-2000)}` : 'the tus server is running';
  }

  async stop(): Promise<void> {
    if (this.alive) {
      this.child.kill('SIGTERM');
      const timedOut = await Promise.race([this.exited.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 5000).unref())]);
      if (timedOut) this.kill();
    }
    await this.exited;
  }

  kill(): void {
    if (this.alive) {
      try {
        this.child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// One upload each way

export interface UploadInput {
  round: number;
  content: 'fresh' | 'stored';
  file: string;
  bytes: number;
  partBytes: number;
  sha256Hex: string;
  sha256MbPerSecond?: number;
}

/** A flat `/api/stats` counter. */
async function svcStats(port: number): Promise<{ freshBlocks: number; duplicateBlocks: number }> {
  const client = new Client(port);
  try {
    const a = await client.request('GET', '/api/stats', {});
    if (a.status !== 200) throw new Error(`GET /api/stats answered ${describe(a)}`);
    return JSON.parse(a.body) as { freshBlocks: number; duplicateBlocks: number };
  } finally {
    client.close();
  }
}

export async function uploadSvc(server: ServerProcess, input: UploadInput): Promise<ResumableRun> {
  const before = await svcStats(server.port);
  const reader = await PartReader.open(input.file, input.bytes, input.partBytes);
  const client = new Client(server.port);
  const latencies: number[] = [];
  const id = randomUUID();
  const base = `/api/v1/uploads/${id}`;
  try {
    const cpu0 = processCpuSeconds(server.pid);
    const window = new CpuWindow(server.pid);
    const started = performance.now();
    const created = await client.request('POST', '/api/v1/uploads', { 'X-Svc-Upload-Session-Id': id, 'Upload-Length': String(input.bytes), 'Content-Type': 'application/octet-stream' });
    if (created.status !== 201) throw new Error(`POST /api/v1/uploads answered ${describe(created)}`);
    let offset = 0;
    for (let i = 0; i < reader.parts; i++) {
      const part = await reader.take();
      const t = performance.now();
      const a = await client.request('PATCH', base, { 'Upload-Offset': String(offset), 'Upload-Part-Id': randomUUID() }, part);
      latencies.push(performance.now() - t);
      if (a.status !== 204) throw new Error(`PATCH part ${i + 1}/${reader.parts} at offset ${offset} (${part.length} bytes) answered ${describe(a)}`);
      const next = Number(a.headers['upload-offset']);
      if (next !== offset + part.length) throw new Error(`PATCH part ${i + 1} at offset ${offset}: Upload-Offset ${a.headers['upload-offset']} in the answer, expected ${offset + part.length}`);
      offset = next;
    }
    const partsDone = performance.now();
    const cpu = window.end();
    const cpu1 = processCpuSeconds(server.pid);
    const commit = await client.request('POST', `${base}/commit`, {});
    const finished = performance.now();
    const cpu2 = processCpuSeconds(server.pid);
    if (commit.status !== 200) throw new Error(`POST ${base}/commit answered ${describe(commit)}`);
    const blobId = (JSON.parse(commit.body) as { committedBlob?: string }).committedBlob;
    const after = await svcStats(server.port);
    const partsSeconds = (partsDone - started) / 1000;
    const commitMs = finished - partsDone;
    const expectedId = `sha-256:${input.sha256Hex}:${input.bytes}`;
    return {
      server: 'svc',
      round: input.round,
      content: input.content,
      bytes: input.bytes,
      parts: reader.parts,
      connections: client.connections,
      partsSeconds,
      mbPerSecond: input.bytes / partsSeconds / 1e6,
      ratioToSha256: input.sha256MbPerSecond ? input.bytes / partsSeconds / 1e6 / input.sha256MbPerSecond : undefined,
      partLatency: { p50Ms: median(latencies), maxMs: Math.max(...latencies) },
      commitMs,
      commitPercent: (commitMs / (partsDone - started)) * 100,
      totalSeconds: (finished - started) / 1000,
      mbPerSecondWithCommit: input.bytes / ((finished - started) / 1000) / 1e6,
      cpu,
      serverCpuSeconds: cpu0 !== undefined && cpu2 !== undefined ? cpu2 - cpu0 : undefined,
      commitServerCpuSeconds: cpu1 !== undefined && cpu2 !== undefined ? cpu2 - cpu1 : undefined,
      blobId,
      expectedId,
      contentMatches: blobId === expectedId,
      blocks: { fresh: after.freshBlocks - before.freshBlocks, duplicate: after.duplicateBlocks - before.duplicateBlocks },
    };
  } finally {
    client.close();
    await reader.close();
  }
}

async function uploadTus(tus: TusProcess, directory: string, input: UploadInput): Promise<ResumableRun> {
  const reader = await PartReader.open(input.file, input.bytes, input.partBytes);
  const client = new Client(tus.port);
  const latencies: number[] = [];
  const tusHeaders = { 'Tus-Resumable': '1.0.0' };
  let stored: string | undefined;
  try {
    const cpu0 = processCpuSeconds(tus.pid);
    const window = new CpuWindow(tus.pid);
    const started = performance.now();
    const created = await client.request('POST', '/files', { ...tusHeaders, 'Upload-Length': String(input.bytes) });
    if (created.status !== 201 || typeof created.headers.location !== 'string') throw new Error(`tus POST /files answered ${describe(created)} (Location ${created.headers.location})`);
    const target = new URL(created.headers.location, `http://127.0.0.1:${tus.port}`).pathname;
    stored = path.join(directory, decodeURIComponent(target.slice(target.lastIndexOf('/') + 1)));
    let offset = 0;
    for (let i = 0; i < reader.parts; i++) {
      const part = await reader.take();
      const t = performance.now();
      const a = await client.request('PATCH', target, { ...tusHeaders, 'Upload-Offset': String(offset), 'Content-Type': 'application/offset+octet-stream' }, part);
      latencies.push(performance.now() - t);
      if (a.status !== 204) throw new Error(`tus PATCH part ${i + 1}/${reader.parts} at offset ${offset} answered ${describe(a)}`);
      const next = Number(a.headers['upload-offset']);
      if (next !== offset + part.length) throw new Error(`tus PATCH part ${i + 1} at offset ${offset}: Upload-Offset ${a.headers['upload-offset']}, expected ${offset + part.length}`);
      offset = next;
    }
    const finished = performance.now();
    const cpu = window.end();
    const cpu1 = processCpuSeconds(tus.pid);
    const seconds = (finished - started) / 1000;
    // Outside the timed window: the stored file must be the source file.
    let contentMatches = false;
    if (existsSync(stored) && statSync(stored).size === input.bytes) contentMatches = measureSha256(stored).hex === input.sha256Hex;
    return {
      server: 'tus',
      round: input.round,
      content: input.content,
      bytes: input.bytes,
      parts: reader.parts,
      connections: client.connections,
      partsSeconds: seconds,
      mbPerSecond: input.bytes / seconds / 1e6,
      ratioToSha256: input.sha256MbPerSecond ? input.bytes / seconds / 1e6 / input.sha256MbPerSecond : undefined,
      partLatency: { p50Ms: median(latencies), maxMs: Math.max(...latencies) },
      totalSeconds: seconds,
      mbPerSecondWithCommit: input.bytes / seconds / 1e6,
      cpu,
      serverCpuSeconds: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined,
      expectedId: `sha-256:${input.sha256Hex}:${input.bytes}`,
      contentMatches,
    };
  } finally {
    client.close();
    await reader.close();
    // Removed after each run (its dirty pages with it): the store holds one upload at a time.
    if (stored) for (const f of [stored, `${stored}.json`]) rmSync(f, { force: true });
  }
}

/** Flushes dirty pages (outside the timed windows) so a run does not pay the previous one's write-back. */
function flushDirtyPages(): void {
  try {
    execFileSync('sync', { stdio: 'ignore' });
  } catch {
    // not fatal: the runs are then merely noisier
  }
}

function packageVersion(repo: string, name: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(repo, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

// ---------------------------------------------------------------------------------------------
// The scenario

/** Runs the scenario: a missing package skips it (`skipped`), a failure ends it (`error`; the runs so far are kept). */
export async function runResumable(opts: ResumableOptions): Promise<ResumableResult> {
  const partBytes = opts.partBytes ?? 8 * MiB;
  const result: ResumableResult = {
    bodyBytes: opts.bodyBytes,
    partBytes,
    rounds: opts.rounds,
    durability: opts.durability,
    roundFiles: [],
    runs: [],
    tusProblems: [],
    targets: [],
  };
  const entry = path.join(opts.repo, 'dist', 'bench', 'tus-server.js');
  if (!existsSync(path.join(opts.repo, 'node_modules', '@tus', 'server')) || !existsSync(path.join(opts.repo, 'node_modules', '@tus', 'file-store'))) {
    result.skipped = 'resumable-upload scenario skipped: @tus/server or @tus/file-store is not installed (npm ci)';
    opts.progress(result.skipped);
    return result;
  }
  result.tusVersions = { server: packageVersion(opts.repo, '@tus/server'), fileStore: packageVersion(opts.repo, '@tus/file-store') };
  const tusDir = path.join(opts.tmp, 'tus');
  mkdirSync(tusDir, { recursive: true });
  let tus: TusProcess;
  try {
    tus = await TusProcess.start(entry, tusDir);
  } catch (err) {
    result.error = `starting the tus server (${entry}): ${err instanceof Error ? err.message : String(err)}`;
    return result;
  }
  const killTus = () => tus.kill();
  process.once('exit', killTus);
  opts.progress(`resumable: tus server (@tus/server ${result.tusVersions.server}, @tus/file-store ${result.tusVersions.fileStore}) pid ${tus.pid} on port ${tus.port}, store ${tusDir}`);
  const svc = opts.server;
  const guard = (what: string, err: unknown): Error => {
    let message = err instanceof Error ? err.message : String(err);
    if (!svc.alive) message += `; ${svc.describeExit()}`;
    if (!tus.alive) message += `; ${tus.describeExit()}`;
    return new Error(`${what}: ${message}`);
  };
  try {
    for (let round = 1; round <= opts.rounds; round++) {
      const seed = `${opts.seed}:resumable:${round}`;
      const file = path.join(opts.tmp, `resumable-${round}.bin`);
      opts.progress(`resumable: round ${round}/${opts.rounds}: writing ${opts.bodyBytes / MiB} MiB (seed "${seed}")`);
      writeRandomFile(file, opts.bodyBytes, seed);
      const sha256 = measureSha256(file);
      result.roundFiles.push({ round, seed, sha256 });
      const input: UploadInput = { round, content: 'fresh', file, bytes: opts.bodyBytes, partBytes, sha256Hex: sha256.hex, sha256MbPerSecond: sha256.mbPerSecond };
      try {
        flushDirtyPages();
        opts.progress(`resumable: round ${round}: svc, ${Math.ceil(opts.bodyBytes / partBytes)} parts of ${partBytes / MiB} MiB (SHA-256 of the file ${f(sha256.mbPerSecond)} MB/s)`);
        let run: ResumableRun;
        try {
          run = await uploadSvc(svc, input);
        } catch (err) {
          throw guard(`svc, round ${round}`, err);
        }
        result.runs.push(run);
        opts.progress(`resumable: round ${round}: svc ${f(run.mbPerSecond)} MB/s, commit ${ms(run.commitMs)} (${pct(run.commitPercent, 2)}), id ${run.contentMatches ? 'matches' : `DOES NOT match (${run.blobId})`}`);
        flushDirtyPages();
        opts.progress(`resumable: round ${round}: tus`);
        try {
          run = await uploadTus(tus, tusDir, input);
        } catch (err) {
          throw guard(`tus, round ${round}`, err);
        }
        result.runs.push(run);
        opts.progress(`resumable: round ${round}: tus ${f(run.mbPerSecond)} MB/s, stored file ${run.contentMatches ? 'matches' : 'DOES NOT match'}`);
      } finally {
        rmSync(file, { force: true });
      }
    }
    if (opts.storedFile && existsSync(opts.storedFile.file)) {
      flushDirtyPages();
      opts.progress('resumable: svc, re-upload of the blob scenario\'s file (already stored: every block a duplicate)');
      try {
        result.runs.push(await uploadSvc(svc, { round: 0, content: 'stored', file: opts.storedFile.file, bytes: opts.bodyBytes, partBytes, sha256Hex: opts.storedFile.sha256Hex }));
      } catch (err) {
        throw guard('svc, re-upload of stored content', err);
      }
    }
  } catch (err) {
    result.error = err instanceof Error ? err.message : String(err);
  } finally {
    summarize(result);
    await tus.stop();
    process.off('exit', killTus);
    result.tusProblems = tus.problems;
    // What FileStore left (nothing after a clean run: each run's files are removed).
    if (existsSync(tusDir) && readdirSync(tusDir).length > 0) result.tusProblems.push(`[bench] files left in the tus store: ${readdirSync(tusDir).slice(0, 5).join(', ')}`);
  }
  return result;
}

function summarize(r: ResumableResult): void {
  const fresh = (server: 'svc' | 'tus') => r.runs.filter((x) => x.server === server && x.content === 'fresh');
  const svc = fresh('svc');
  const tus = fresh('tus');
  const summary = (runs: ResumableRun[]): Summary => ({ runs: runs.length, bestMbPerSecond: Math.max(...runs.map((x) => x.mbPerSecond)), medianMbPerSecond: median(runs.map((x) => x.mbPerSecond)) });
  if (svc.length) {
    const commits = svc.map((x) => x.commitPercent!);
    r.svc = { ...summary(svc), medianCommitMs: median(svc.map((x) => x.commitMs!)), medianCommitPercent: median(commits), worstCommitPercent: Math.max(...commits) };
  }
  if (tus.length) r.tus = summary(tus);
  if (r.svc && r.tus) {
    r.ratio = {
      median: r.svc.medianMbPerSecond / r.tus.medianMbPerSecond,
      best: r.svc.bestMbPerSecond / r.tus.bestMbPerSecond,
      medianWithCommit: median(svc.map((x) => x.mbPerSecondWithCommit)) / r.tus.medianMbPerSecond,
    };
  }
  r.targets = resumableTargets(r);
}

export function resumableTargets(r: ResumableResult): Target[] {
  const targets: Target[] = [];
  const size = mib(r.bodyBytes, 0);
  targets.push({
    name: `Resumable upload of ${size} in ${r.partBytes / MiB} MiB parts: svc vs tus throughput, same run (median of ${r.svc?.runs ?? 0} vs ${r.tus?.runs ?? 0})`,
    value: r.ratio ? `${f(r.ratio.median, 2)}× (${mbs(r.svc!.medianMbPerSecond)} / ${mbs(r.tus!.medianMbPerSecond)}); best ${f(r.ratio.best, 2)}×; commit included ${f(r.ratio.medianWithCommit, 2)}×` : 'n/a',
    target: `≥ ${THROUGHPUT_TARGET}×`,
    pass: r.ratio ? r.ratio.median >= THROUGHPUT_TARGET : undefined,
  });
  targets.push({
    name: 'Resumable upload: commit latency as % of the parts phase (create → last 204)',
    value: r.svc ? `worst ${pct(r.svc.worstCommitPercent, 2)}, median ${pct(r.svc.medianCommitPercent, 2)} (${ms(r.svc.medianCommitMs)})` : 'n/a',
    target: `< ${COMMIT_TARGET_PERCENT}% (every run)`,
    pass: r.svc ? r.svc.worstCommitPercent < COMMIT_TARGET_PERCENT : undefined,
  });
  const checked = r.runs.filter((x) => x.server === 'svc');
  targets.push({
    name: 'Resumable upload: committed blob id = sha-256:<SHA-256 of the file>:<size>',
    value: checked.length ? `${checked.filter((x) => x.contentMatches).length} of ${checked.length} svc uploads` : 'n/a',
    target: 'every upload',
    pass: checked.length ? checked.every((x) => x.contentMatches) : undefined,
  });
  return targets;
}

// ---------------------------------------------------------------------------------------------
// Report

/** The resumable-upload section of the report (Markdown, `##` headings). */
export function renderResumableSection(m: ResumableResult): string {
  const L: string[] = [];
  L.push('## Resumable uploads (issue 4): svc upload sessions vs tus');
  L.push('');
  if (m.skipped) {
    L.push(`Skipped: ${m.skipped}`, '');
    return L.join('\n');
  }
  if (m.error) L.push(`**Stopped early**: ${m.error.replace(/\n/g, ' ')}`, '');
  const parts = Math.ceil(m.bodyBytes / m.partBytes);
  L.push(`- ${mib(m.bodyBytes, 0)} per upload as one session of ${parts} parts of ${m.partBytes / MiB} MiB, sent one after another on one keep-alive connection (node:http Agent, maxSockets 1); each part read from the file into one of two buffers while the previous part is in flight (the file is never read whole)`);
  L.push(`- svc: \`POST /api/v1/uploads\` (X-Svc-Upload-Session-Id, Upload-Length) → \`PATCH /api/v1/uploads/<id>\` per part (Upload-Offset, Upload-Part-Id) → \`POST …/commit\`; SVC_DURABILITY=${m.durability}. tus: \`@tus/server\` ${m.tusVersions?.server ?? '?'} with \`@tus/file-store\` ${m.tusVersions?.fileStore ?? '?'} (bench/tus-server.ts, its own process), \`POST /files\` (Upload-Length) → \`PATCH\` per part (Upload-Offset, application/offset+octet-stream). tus neither hashes nor deduplicates, and its FileStore never fsyncs, whatever SVC_DURABILITY says`);
  L.push(`- Rounds run svc then tus on a fresh random file (a new seed each round, so svc stores every block as new), the same file for both; dirty pages flushed with \`sync\` before each upload; the SHA-256 limit is \`node:crypto\` on one core over that round's file`);
  L.push('- Parts phase: create request sent → last part\'s 204 (the throughput); commit: commit request sent → 200. Server CPU is % of one core over the parts phase (all threads); CPU-s is user + system over the whole session, commit included');
  L.push('');
  L.push(...renderTargets(m.targets));
  L.push('| Round | Server | Content | Parts phase | MB/s | × SHA-256 | Part p50 / max | Commit | Commit % of parts phase | With commit | Server CPU (parts) | Server CPU-s | Bench CPU | Other CPU | Blocks fresh / duplicate | Content check |');
  L.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const x of m.runs) {
    const check = x.server === 'svc' ? (x.contentMatches ? 'id = SHA-256 ✓' : `id MISMATCH: ${x.blobId ?? 'none'}`) : x.contentMatches ? 'stored file = SHA-256 ✓' : 'stored file MISMATCH';
    L.push(
      `| ${x.round || '-'} | ${x.server} | ${x.content === 'fresh' ? 'new file' : 'already stored'}${x.connections !== 1 ? ` (${x.connections} connections!)` : ''} | ${f(x.partsSeconds, 2)} s | ${f(x.mbPerSecond)} | ${x.ratioToSha256 === undefined ? 'n/a' : `${f(x.ratioToSha256, 2)}×`} | ${ms(x.partLatency.p50Ms)} / ${ms(x.partLatency.maxMs)} | ${x.commitMs === undefined ? '-' : ms(x.commitMs)} | ${x.commitPercent === undefined ? '-' : pct(x.commitPercent, 2)} | ${f(x.mbPerSecondWithCommit)} MB/s | ${pct(x.cpu.serverPercent)} | ${f(x.serverCpuSeconds, 2)}${x.commitServerCpuSeconds !== undefined ? ` (commit ${f(x.commitServerCpuSeconds, 2)})` : ''} | ${pct(x.cpu.benchPercent)} | ${pct(x.cpu.otherPercent)}${x.cpu.stealPercent ? ` (steal ${pct(x.cpu.stealPercent)})` : ''} | ${x.blocks ? `${f(x.blocks.fresh)} / ${f(x.blocks.duplicate)}` : '-'} | ${check} |`,
    );
  }
  L.push('');
  for (const r of m.roundFiles) L.push(`- Round ${r.round}: SHA-256 of the file ${mbs(r.sha256.mbPerSecond)} (${f(r.sha256.seconds, 2)} s of hashing; CPU ${cpuText(r.sha256.cpu)})`);
  if (m.svc) L.push(`- svc: best ${mbs(m.svc.bestMbPerSecond)}, median ${mbs(m.svc.medianMbPerSecond)} over ${m.svc.runs} run(s); commit median ${ms(m.svc.medianCommitMs)} (${pct(m.svc.medianCommitPercent, 2)} of the parts phase), worst ${pct(m.svc.worstCommitPercent, 2)}`);
  if (m.tus) L.push(`- tus: best ${mbs(m.tus.bestMbPerSecond)}, median ${mbs(m.tus.medianMbPerSecond)} over ${m.tus.runs} run(s)`);
  if (m.ratio) L.push(`- svc / tus: median ${f(m.ratio.median, 2)}×, best ${f(m.ratio.best, 2)}× (parts phase); with svc's commit in its time ${f(m.ratio.medianWithCommit, 2)}×`);
  const stored = m.runs.find((x) => x.content === 'stored');
  if (stored) L.push(`- Round "-": the blob scenario's file, which svc already holds, sent again as a resumable session (every block a duplicate, nothing written); not part of the comparison`);
  if (m.tusProblems.length) {
    L.push('- tus server stderr:');
    for (const p of m.tusProblems.slice(0, 10)) L.push(`  - \`${p.replace(/`/g, "'").slice(0, 500)}\``);
  }
  L.push('');
  return L.join('\n');
}

/** The whole report of a `--resumable-only` run. */
export function renderResumableReport(r: Results, m: ResumableResult): string {
  const L = renderHeader(r, `svc benchmark: resumable uploads only (--resumable-only${r.mode === 'quick' ? ', --quick' : ''}; SVC_DURABILITY=${r.durability})`, r.startedAt, [
    '- MB/s are decimal (10^6 bytes per second); sizes are binary (MiB, GiB); the servers and the client share the host\'s CPUs',
  ]);
  L.push(...renderErrors(r), renderResumableSection(m), ...renderServer(r));
  return L.join('\n');
}
