/**
 * svc against nginx (issue 7): the same bytes served and accepted by both, on loopback, in the
 * same run, with the same client and connection counts on both sides, over a size/concurrency
 * matrix; svc and nginx back to back in every cell of every round, the order flipping each round.
 *
 * - Large objects, 1 GiB (256 MiB with --quick), one connection: svc `GET /api/v1/blobs/<id>` of
 *   a blob uploaded first vs nginx `GET /large.bin`, a static file with the same bytes (sendfile
 *   on), read over a raw socket with a 1 MiB buffer and discarded, after one untimed pass each;
 *   uploads: svc `POST /api/v1/blobs` vs nginx WebDAV `PUT /dav/<name>`, node:http streaming the
 *   file with Content-Length, a fresh random file each round (svc's dedup never helps it).
 * - 4 KiB objects at 1, 8 and 32 keep-alive connections, 1 MiB objects at 1 and 8 (--quick:
 *   4 KiB at 8 and 32, 1 MiB at 8), closed loop, a warm-up then a measured window: downloads round-robin over 8
 *   objects per size (svc blobs vs nginx static files with the same bytes), uploads of distinct
 *   bodies (every 4 KiB region stamped: bench/wrk.ts) as svc POST vs nginx PUT of distinct names.
 *   The cells are driven by wrk (bench/wrk.ts, one thread) when it is installed, else by the
 *   Node generator (bench/load.ts) with the message `wrk not installed: apt-get install wrk
 *   (Debian)`.
 * - A generator check before the matrix: 4 KiB downloads at 32 connections from both peers with
 *   the Node generator and with wrk (one thread): which one gets more out of the same server, at
 *   what CPU (one window each: a single window is noisy on a shared host, the figures say so).
 * - Every upload cell is checked: nginx must have created a file per counted response, svc's
 *   /api/stats must show no duplicate block and at least one ingest per counted response.
 *
 * Durability: svc runs with SVC_DURABILITY=relaxed (no fsync; trusts the page cache); nginx never
 * fsyncs a PUT (it writes the body to a temp file and renames it). Neither is crash-safe against
 * power loss; both survive a process crash once they answered. `sync` runs (untimed) before every
 * upload window so no window pays for the previous one's write-back.
 *
 * nginx: the Debian binary (`nginx-light` / `nginx` in Debian 12 carry ngx_http_dav_module),
 * started as a child with a generated configuration in a temp dir (`-p <dir> -c <dir>/nginx.conf`,
 * daemon off, master process + 2 worker processes: svc runs 2 workers on this 2-CPU host), access
 * log off, sendfile and tcp_nopush on (Debian's defaults), keepalive_requests raised so the load
 * generator's keep-alive sockets are not closed after 1,000 requests. When nginx is not
 * installed the scenario is skipped with a message saying how to install it.
 *
 *   node dist/bench/peers-nginx.js [--quick] [--no-wrk]
 *
 * Writes bench/results/peers-nginx-<timestamp>.json and prints Markdown. `runNginxPeers` and
 * `renderNginxPeersSection` are for bench/run.ts.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchArgs } from './args.js';
import { processCpuSeconds } from './cpu.js';
import { writeRandomFile } from './large.js';
import { type LoadResult, runLoad } from './load.js';
import { RawConnection, bodyRequest, getRequest, postRequest } from './raw-http.js';
import { type Target, f, machineEnvironment, mark, median, mib, ms, pct, renderTargets } from './report.js';
import { ServerProcess } from './server-process.js';
import { freePort, fsDescription, tmpParentFor } from './host.js';
import { WRK_INSTALL_HINT, type WrkInfo, type WrkSummary, type WrkWork, findWrk, runWrk, stampedBody } from './wrk.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const KiB = 1024;
/** Objects per size the downloads go round-robin over. */
const OBJECTS = 8;
/** wrk threads: 1 measured best on this 2-CPU host (2 took CPU from svc: docs/performance.md). */
export const WRK_THREADS = 1;
export const NGINX_INSTALL_HINT = 'nginx not installed: apt-get install nginx-light (Debian)';

export type Peer = 'svc' | 'nginx';
export type Direction = 'download' | 'upload';
export type Generator = 'wrk' | 'node';

export interface NginxPeersOptions {
  /** The repository root (dist/server/main.js is started from there). */
  repo: string;
  quick: boolean;
  /** Rounds of each measurement (default 3; 1 with quick). */
  rounds?: number;
  /** Where the temp directory goes (default: os.tmpdir() when on the repository's disk). */
  tmpParent?: string;
  /** Use the Node generator even when wrk is installed. */
  noWrk?: boolean;
  progress?: (msg: string) => void;
}

/** CPU over a measurement, % of one core. Server = the process and its children (nginx: master + workers; svc: one process, all threads). */
export interface PeerCpu {
  serverPercent?: number;
  /** The load generator: wrk (its own /proc ticks) or this process when the Node generator runs. */
  benchPercent: number;
  /** This process while wrk ran (the harness, mostly idle). */
  harnessPercent?: number;
  /** Host busy time minus server, generator and harness. */
  otherPercent?: number;
}

export interface LargeRun {
  peer: Peer;
  round: number;
  bytes: number;
  seconds: number;
  mbPerSecond: number;
  status: number;
  cpu: PeerCpu;
  /** The response body (svc's JSON), dropped before the result is stored. */
  responseBody?: string;
}

/** One measured window of a matrix cell (raw sample). */
export interface MatrixRun {
  peer: Peer;
  round: number;
  direction: Direction;
  sizeBytes: number;
  connections: number;
  generator: Generator;
  requests: number;
  seconds: number;
  requestsPerSecond: number;
  /** Body bytes per second (requests x size), decimal MB. */
  mbPerSecond: number;
  latency: { p50Ms: number; p99Ms: number };
  /** Server over the measured window (wrk) or over the whole load call, warm-up included (Node generator). */
  cpu: PeerCpu;
  /** What was checked after the window (files created, svc's stats). */
  verified?: string;
  /** wrk's command line and done() line. */
  wrk?: { args: string[]; summary: WrkSummary; wallSeconds: number };
  /** The Node generator's result. */
  load?: LoadResult;
}

export interface GeneratorCheckRun {
  peer: Peer;
  /** 0.. (the generators' order is reversed in odd repetitions). */
  rep: number;
  sizeBytes: number;
  connections: number;
  generator: string;
  requestsPerSecond: number;
  mbPerSecond: number;
  generatorCpuPercent: number;
  serverCpuPercent?: number;
  /** The rest of the host (other work on this shared machine). */
  otherCpuPercent?: number;
  p99Ms: number;
}

export interface Comparison {
  key: string;
  name: string;
  direction: Direction;
  sizeBytes: number;
  connections: number;
  generator?: Generator;
  unit: 'MB/s' | 'req/s';
  svc: number[];
  nginx: number[];
  /** svc / nginx per round (same round, back to back). */
  ratios: number[];
  svcMedian: number;
  nginxMedian: number;
  medianRatio: number;
  /** The issue's target for svc / nginx, when it names one for this size. */
  target?: number;
}

export interface NginxPeersResult {
  tool: 'svc-bench-peers-nginx';
  startedAt: string;
  finishedAt?: string;
  mode: 'full' | 'quick';
  skipped?: string;
  environment: ReturnType<typeof machineEnvironment>;
  durability: { svc: 'relaxed'; nginx: string };
  nginx?: { binary: string; version: string; davModule: boolean; workerProcesses: number; user?: string; config?: string };
  svc?: { workers?: unknown; problems: string[] };
  /** The load generators: wrk (when installed and used) and the Node one. */
  generators?: { wrk?: WrkInfo & { threads: number }; wrkMissing?: string; node: string; bySize: Array<{ sizeBytes: number; generator: Generator }> };
  settings: {
    largeBytes: number;
    rounds: number;
    warmupSeconds: number;
    durationSeconds: number;
    objects: number;
    matrix: Array<{ sizeBytes: number; connections: number[]; generator: Generator }>;
    dataDir?: string;
  };
  generatorCheck: GeneratorCheckRun[];
  largeDownloads: LargeRun[];
  largeUploads: LargeRun[];
  runs: MatrixRun[];
  comparisons: Comparison[];
  nginxErrorLog?: string;
  errors: Array<{ phase: string; message: string }>;
  targets: Target[];
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** The nginx binary, or undefined. */
export function findNginx(): string | undefined {
  try {
    const p = execFileSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (p) return p;
  } catch {
    // not on PATH
  }
  for (const p of ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx']) if (fs.existsSync(p)) return p;
  return undefined;
}

function nginxVersion(binary: string): { version: string; davModule: boolean } {
  // nginx -V writes to stderr.
  const r = spawnSync(binary, ['-V'], { encoding: 'utf8' });
  const text = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  return { version: /nginx version: nginx\/(\S+)/.exec(text)?.[1] ?? 'unknown', davModule: /with-http_dav_module/.test(text) };
}

/** `pid` and its descendants (from /proc/<n>/stat's ppid field). */
function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(name));
      children.set(ppid, list);
    } catch {
      // gone meanwhile
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]) ?? []));
  return out;
}

function hostBusySeconds(): number | undefined {
  try {
    const v = fs.readFileSync('/proc/stat', 'latin1').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - v[3] - (v[4] ?? 0)) / ticks();
  } catch {
    return undefined;
  }
}

let clk: number | undefined;
function ticks(): number {
  if (clk === undefined) {
    try {
      clk = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clk = 100;
    }
  }
  return clk;
}

/** CPU of a server's process tree, of this process and of the host over a window. */
class TreeCpuWindow {
  private readonly pids: number[];
  private readonly server0: number;
  private readonly self0 = process.cpuUsage();
  private readonly host0 = hostBusySeconds();
  private readonly t0 = performance.now();

  constructor(rootPid: number) {
    this.pids = processTree(rootPid);
    this.server0 = this.serverSeconds();
  }

  private serverSeconds(): number {
    let s = 0;
    for (const p of this.pids) s += processCpuSeconds(p) ?? 0;
    return s;
  }

  /**
   * `generatorCpuSeconds`: the CPU of an external load generator (wrk) over the window; it is
   * then the bench figure, and this process's own CPU is reported as the harness's.
   */
  end(generatorCpuSeconds?: number): PeerCpu {
    const seconds = (performance.now() - this.t0) / 1000;
    const self = process.cpuUsage(this.self0);
    const selfPercent = ((self.user + self.system) / 1e6 / seconds) * 100;
    const external = generatorCpuSeconds !== undefined && Number.isFinite(generatorCpuSeconds);
    const benchPercent = external ? (generatorCpuSeconds / seconds) * 100 : selfPercent;
    const harnessPercent = external ? selfPercent : undefined;
    const serverPercent = ((this.serverSeconds() - this.server0) / seconds) * 100;
    const host1 = hostBusySeconds();
    const otherPercent = this.host0 !== undefined && host1 !== undefined ? Math.max(0, ((host1 - this.host0) / seconds) * 100 - benchPercent - serverPercent - (harnessPercent ?? 0)) : undefined;
    return { serverPercent, benchPercent, harnessPercent, otherPercent };
  }
}

// ---------------------------------------------------------------------------------------------
// nginx as a child process

export class NginxProcess {
  readonly workerPids: number[] = [];
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private readonly exited: Promise<void>;
  private stderr = '';

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
    readonly dir: string,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => {
      this.exitInfo = { code, signal };
      resolve();
    }));
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (t: string) => {
      this.stderr = (this.stderr + t).slice(-4000);
    });
    child.stdout?.resume();
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  static config(dir: string, port: number, workers: number, user: string | undefined): string {
    const p = (name: string) => path.join(dir, name);
    return [
      'daemon off;',
      'master_process on;',
      `worker_processes ${workers};`,
      ...(user ? [`user ${user};`] : []),
      `pid ${p('nginx.pid')};`,
      `error_log ${p('error.log')} warn;`,
      'events { worker_connections 1024; }',
      'http {',
      '  access_log off;',
      '  sendfile on;',
      '  tcp_nopush on;',
      '  keepalive_requests 1000000000;',
      '  keepalive_timeout 300s;',
      '  default_type application/octet-stream;',
      `  client_body_temp_path ${p('client_body')};`,
      `  proxy_temp_path ${p('proxy')};`,
      `  fastcgi_temp_path ${p('fastcgi')};`,
      `  uwsgi_temp_path ${p('uwsgi')};`,
      `  scgi_temp_path ${p('scgi')};`,
      '  server {',
      `    listen 127.0.0.1:${port};`,
      `    root ${p('www')};`,
      '    location / { }',
      '    location /dav/ {',
      '      dav_methods PUT;',
      '      create_full_put_path on;',
      '      client_max_body_size 0;',
      `      client_body_temp_path ${p('dav-tmp')};`,
      '    }',
      '  }',
      '}',
      '',
    ].join('\n');
  }

  static async start(binary: string, dir: string, workers: number): Promise<{ nginx: NginxProcess; config: string; user?: string }> {
    for (const d of ['www', 'www/dav', 'client_body', 'dav-tmp', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) fs.mkdirSync(path.join(dir, d), { recursive: true });
    const port = await freePort();
    // As root the workers would switch to `nobody`, which cannot write the temp dir: keep root.
    const user = process.getuid?.() === 0 ? 'root' : undefined;
    const config = NginxProcess.config(dir, port, workers, user);
    const conf = path.join(dir, 'nginx.conf');
    fs.writeFileSync(conf, config);
    const child = spawn(binary, ['-p', `${dir}/`, '-c', conf, '-e', path.join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
    const nginx = new NginxProcess(child, port, dir);
    await new Promise<void>((resolve, reject) => child.once('spawn', resolve).once('error', reject));
    const deadline = performance.now() + 10_000;
    for (;;) {
      if (!nginx.alive) throw new Error(`nginx exited at start (code ${nginx.exitInfo?.code}, signal ${nginx.exitInfo?.signal}): ${nginx.stderr} ${nginx.errorLog()}`);
      const ok = await new Promise<boolean>((resolve) => {
        const s = net.connect(port, '127.0.0.1');
        s.once('connect', () => {
          s.destroy();
          resolve(true);
        });
        s.once('error', () => resolve(false));
      });
      if (ok) break;
      if (performance.now() > deadline) {
        await nginx.stop();
        throw new Error(`nginx did not listen on 127.0.0.1:${port} within 10 s: ${nginx.errorLog()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    // Its workers, so that they can be signalled if the master has to be killed.
    for (let i = 0; i < 50 && nginx.workerPids.length < workers; i++) {
      nginx.workerPids.splice(0, nginx.workerPids.length, ...processTree(nginx.pid).slice(1));
      if (nginx.workerPids.length < workers) await new Promise((r) => setTimeout(r, 20));
    }
    return { nginx, config, user };
  }

  errorLog(): string {
    try {
      return fs.readFileSync(path.join(this.dir, 'error.log'), 'utf8').slice(-4000);
    } catch {
      return '';
    }
  }

  /** SIGQUIT (graceful), then SIGTERM after 10 s, then SIGKILL (master and the workers it started). */
  async stop(): Promise<void> {
    for (const [sig, waitMs] of [['SIGQUIT', 10_000], ['SIGTERM', 5_000], ['SIGKILL', 5_000]] as const) {
      if (!this.alive) break;
      try {
        this.child.kill(sig);
      } catch {
        // gone
      }
      await Promise.race([this.exited, new Promise((r) => setTimeout(r, waitMs).unref())]);
    }
    this.killWorkers();
  }

  /** Synchronous last resort (exit handlers): the master, then any worker still there. */
  kill(): void {
    if (this.alive) {
      try {
        this.child.kill('SIGKILL');
      } catch {
        // gone
      }
    }
    this.killWorkers();
  }

  private killWorkers(): void {
    for (const pid of this.workerPids) {
      try {
        // Only if it is still an nginx process (the pid was not reused).
        if (fs.readFileSync(`/proc/${pid}/comm`, 'latin1').trim() === 'nginx') process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Measurements (the same client code for both peers)

/** Streams `file` as the body of `method path` with Content-Length (node:http), expecting `expect`. */
async function sendFile(port: number, pid: number, peer: Peer, round: number, method: 'POST' | 'PUT', urlPath: string, file: string, size: number, expect: number, timeoutMs: number): Promise<LargeRun> {
  const cpu = new TreeCpuWindow(pid);
  const started = performance.now();
  let responseBody = '';
  const status = await new Promise<number>((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method, path: urlPath, agent: false, headers: { 'Content-Type': 'application/octet-stream', 'Content-Length': String(size) } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => {
          clearTimeout(timer);
          responseBody = Buffer.concat(parts).toString('utf8');
          if (res.statusCode !== expect) reject(new Error(`${peer} ${method} ${urlPath} answered HTTP ${res.statusCode}: ${Buffer.concat(parts).toString('utf8').slice(0, 300)}`));
          else resolve(res.statusCode);
        });
        res.on('error', reject);
      },
    );
    const timer = setTimeout(() => req.destroy(new Error(`${peer} upload did not complete within ${timeoutMs / 1000} s`)), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    const src = fs.createReadStream(file, { highWaterMark: MiB });
    src.on('error', (err) => req.destroy(err));
    src.pipe(req);
  });
  const seconds = (performance.now() - started) / 1000;
  return { peer, round, bytes: size, seconds, mbPerSecond: size / seconds / 1e6, status, cpu: cpu.end(), responseBody };
}

/** GET over one raw socket with a 1 MiB read buffer, counting and discarding the bytes. */
async function fetchLarge(port: number, pid: number, peer: Peer, round: number, urlPath: string, size: number, timeoutMs: number): Promise<LargeRun> {
  const conn = await RawConnection.connect(port, '127.0.0.1', MiB);
  try {
    const cpu = new TreeCpuWindow(pid);
    const started = performance.now();
    const res = await conn.request(getRequest(urlPath), false, timeoutMs);
    const seconds = (res.doneAt - started) / 1000;
    const c = cpu.end();
    if (res.status !== 200) throw new Error(`${peer} GET ${urlPath} answered HTTP ${res.status}: ${res.body?.toString('utf8').slice(0, 300)}`);
    if (res.bodyBytes !== size) throw new Error(`${peer} GET ${urlPath} returned ${res.bodyBytes} bytes, expected ${size}`);
    return { peer, round, bytes: res.bodyBytes, seconds, mbPerSecond: res.bodyBytes / seconds / 1e6, status: res.status, cpu: c };
  } finally {
    conn.close();
  }
}


// ---------------------------------------------------------------------------------------------
// Matrix cells: the same generator and connection count for both peers

/** "4 KiB", "1 MiB", "256 MiB", "1 GiB". */
export function sizeLabel(bytes: number): string {
  if (bytes >= GiB && bytes % GiB === 0) return `${bytes / GiB} GiB`;
  if (bytes >= MiB && bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes >= KiB && bytes % KiB === 0) return `${bytes / KiB} KiB`;
  return `${bytes} B`;
}

const sizeKey = (bytes: number) => sizeLabel(bytes).replace(/ /g, '').replace(/iB$/, '').toLowerCase();

/** The issue's target for svc / nginx: downloads >= 0.8x for 1 GiB and >= 1.0x for 4 KiB, uploads >= 0.5x; none for 1 MiB downloads. */
export function nginxTarget(direction: Direction, sizeBytes: number, large: boolean): number | undefined {
  if (direction === 'upload') return 0.5;
  if (large) return 0.8;
  if (sizeBytes <= 4 * KiB) return 1.0;
  return undefined;
}

interface CellSpec {
  peer: Peer;
  round: number;
  port: number;
  pid: number;
  direction: Direction;
  sizeBytes: number;
  connections: number;
  generator: Generator;
  wrk?: { binary: string; threads: number };
  warmupSeconds: number;
  durationSeconds: number;
  /** Script and body files. */
  tmp: string;
  /** Downloads: the objects' paths. */
  paths?: string[];
  /** Uploads: svc POST to a fixed path; nginx PUT under `prefix` (warm-up and window in their own directories). */
  upload?: { method: 'POST' | 'PUT'; path: string; distinctNames: boolean; expectStatus: number };
}

async function svcStats(port: number): Promise<{ ingests: number; freshBlocks: number; duplicateBlocks: number }> {
  const res = await RawConnection.requestOnce(port, getRequest('/api/stats'), 10_000);
  if (res.status !== 200) throw new Error(`GET /api/stats answered HTTP ${res.status}`);
  return JSON.parse(res.body!.toString('utf8')) as { ingests: number; freshBlocks: number; duplicateBlocks: number };
}

function syncDisks(): void {
  spawnSync('sync', [], { stdio: 'ignore', timeout: 120_000 });
}

/** One warm-up and one measured window against one peer. */
async function runCell(c: CellSpec): Promise<MatrixRun> {
  const base = { peer: c.peer, round: c.round, direction: c.direction, sizeBytes: c.sizeBytes, connections: c.connections, generator: c.generator };
  const up = c.upload;
  const pathFor = (phase: 'w' | 'm') => (up && up.distinctNames ? `${up.path}${phase}/` : up?.path ?? '');
  if (up) syncDisks();
  if (c.generator === 'wrk') {
    const threads = Math.min(c.wrk!.threads, c.connections);
    const work = (phase: 'w' | 'm'): WrkWork => (up ? { kind: 'upload', method: up.method, path: pathFor(phase), distinctNames: up.distinctNames, bodyBytes: c.sizeBytes } : { kind: 'get', paths: c.paths! });
    const spec = { binary: c.wrk!.binary, port: c.port, threads, connections: c.connections, dir: c.tmp };
    if (c.warmupSeconds > 0) await runWrk({ ...spec, durationSeconds: c.warmupSeconds, work: work('w') });
    const cpu = new TreeCpuWindow(c.pid);
    const w = await runWrk({ ...spec, durationSeconds: c.durationSeconds, work: work('m') });
    const s = w.summary;
    const run: MatrixRun = {
      ...base,
      requests: s.requests,
      seconds: s.durationUs / 1e6,
      requestsPerSecond: w.requestsPerSecond,
      mbPerSecond: (w.requestsPerSecond * c.sizeBytes) / 1e6,
      latency: { p50Ms: s.latencyUs.p50 / 1000, p99Ms: s.latencyUs.p99 / 1000 },
      cpu: cpu.end(w.cpuSeconds),
      wrk: { args: w.args, summary: s, wallSeconds: w.wallSeconds },
    };
    if (w.errorCount > 0) throw new Error(`${c.peer}: wrk counted errors ${JSON.stringify(s.errors)} in ${s.requests} responses (status = HTTP status >= 400)`);
    if (!up && s.requests > 0 && s.bytes / s.requests < c.sizeBytes) throw new Error(`${c.peer}: wrk read ${s.bytes} bytes for ${s.requests} responses, less than ${c.sizeBytes} per response`);
    return run;
  }
  // The Node generator: warm-up and window in one call.
  let seq = 0;
  let next: (conn: number) => Buffer | string;
  if (up) {
    const body = randomBytes(c.sizeBytes);
    const prefix = pathFor('m');
    next = (conn) => {
      seq++;
      const b = stampedBody(body, conn + 1, seq);
      return up.distinctNames ? bodyRequest(up.method, `${prefix}${conn + 1}-${seq}.bin`, 'application/octet-stream', b) : bodyRequest(up.method, up.path, 'application/octet-stream', b);
    };
  } else {
    const reqs = c.paths!.map((p) => getRequest(p));
    next = () => reqs[seq++ % reqs.length];
  }
  const cpu = new TreeCpuWindow(c.pid);
  const load = await runLoad({ port: c.port, connections: c.connections, pipeline: 1, warmupMs: c.warmupSeconds * 1000, durationMs: c.durationSeconds * 1000, next, expectStatus: up?.expectStatus ?? 200 });
  const t = cpu.end();
  if (load.errors > 0) throw new Error(`${c.peer}: ${load.errors} errors in ${load.requests} responses, first: ${load.firstError}`);
  if (!up && load.bodyBytes !== load.requests * c.sizeBytes) throw new Error(`${c.peer}: ${load.bodyBytes} body bytes for ${load.requests} responses of ${c.sizeBytes}`);
  return {
    ...base,
    requests: load.requests,
    seconds: load.durationSeconds,
    requestsPerSecond: load.requestsPerSecond,
    mbPerSecond: (load.requestsPerSecond * c.sizeBytes) / 1e6,
    latency: { p50Ms: load.latency.p50Ms, p99Ms: load.latency.p99Ms },
    // The generator's CPU over the measured window; the server's over the whole call.
    cpu: { serverPercent: t.serverPercent, benchPercent: load.cpu.benchPercent, otherPercent: t.otherPercent },
    load,
  };
}

function compare(key: string, name: string, unit: Comparison['unit'], meta: Pick<Comparison, 'direction' | 'sizeBytes' | 'connections' | 'generator' | 'target'>, runs: Array<{ peer: Peer; round: number; value: number }>): Comparison {
  const svc = runs.filter((r) => r.peer === 'svc').sort((a, b) => a.round - b.round);
  const nginx = runs.filter((r) => r.peer === 'nginx').sort((a, b) => a.round - b.round);
  const ratios: number[] = [];
  for (const s of svc) {
    const n = nginx.find((x) => x.round === s.round);
    if (n) ratios.push(s.value / n.value);
  }
  return {
    key,
    name,
    ...meta,
    unit,
    svc: svc.map((r) => r.value),
    nginx: nginx.map((r) => r.value),
    ratios,
    svcMedian: median(svc.map((r) => r.value)),
    nginxMedian: median(nginx.map((r) => r.value)),
    medianRatio: median(ratios),
  };
}

// ---------------------------------------------------------------------------------------------
// The scenario

export async function runNginxPeers(opts: NginxPeersOptions): Promise<NginxPeersResult> {
  const progress = opts.progress ?? (() => {});
  const quick = opts.quick;
  const rounds = opts.rounds ?? (quick ? 1 : 3);
  const largeBytes = quick ? 256 * MiB : GiB;
  const warmupSeconds = 1;
  const durationSeconds = 2;
  const timeoutMs = 10 * 60_000;
  const wrkInfo = opts.noWrk ? undefined : findWrk();
  const smallGenerator: Generator = wrkInfo ? 'wrk' : 'node';
  const matrix: NginxPeersResult['settings']['matrix'] = [
    { sizeBytes: 4 * KiB, connections: quick ? [8, 32] : [1, 8, 32], generator: smallGenerator },
    // 1 MiB at 32 connections too would add ~40 s to a full run that is ~9 min already.
    { sizeBytes: MiB, connections: quick ? [8] : [1, 8], generator: smallGenerator },
  ];
  const result: NginxPeersResult = {
    tool: 'svc-bench-peers-nginx',
    startedAt: new Date().toISOString(),
    mode: quick ? 'quick' : 'full',
    environment: machineEnvironment(opts.repo),
    durability: { svc: 'relaxed', nginx: 'no fsync (WebDAV PUT writes a temp file and renames it; no fsync directive exists)' },
    generators: {
      wrk: wrkInfo ? { ...wrkInfo, threads: WRK_THREADS } : undefined,
      wrkMissing: wrkInfo ? undefined : opts.noWrk ? 'wrk not used: --no-wrk' : WRK_INSTALL_HINT,
      node: 'bench/load.ts: raw keep-alive HTTP/1.1 sockets, 64 KiB reads, one Node.js thread',
      bySize: matrix.map((m) => ({ sizeBytes: m.sizeBytes, generator: m.generator })),
    },
    settings: { largeBytes, rounds, warmupSeconds, durationSeconds, objects: OBJECTS, matrix },
    generatorCheck: [],
    largeDownloads: [],
    largeUploads: [],
    runs: [],
    comparisons: [],
    errors: [],
    targets: [],
  };
  if (!wrkInfo && !opts.noWrk) progress(WRK_INSTALL_HINT);
  const binary = findNginx();
  if (!binary) {
    result.skipped = NGINX_INSTALL_HINT;
    progress(NGINX_INSTALL_HINT);
    result.finishedAt = new Date().toISOString();
    result.targets = nginxPeersTargets(result);
    return result;
  }
  const v = nginxVersion(binary);
  const workers = 2;
  result.nginx = { binary, version: v.version, davModule: v.davModule, workerProcesses: workers };
  if (!v.davModule) {
    result.skipped = `${binary} (nginx ${v.version}) was built without ngx_http_dav_module: apt-get install nginx-light (Debian)`;
    progress(result.skipped);
    result.finishedAt = new Date().toISOString();
    result.targets = nginxPeersTargets(result);
    return result;
  }

  const tmp = fs.mkdtempSync(path.join(opts.tmpParent ?? tmpParentFor(opts.repo), 'svc-peers-nginx-'));
  result.settings.dataDir = `${path.dirname(tmp)} (${fsDescription(tmp)})`;
  const fsRoot = path.join(tmp, 'svc-data');
  const ngxDir = path.join(tmp, 'nginx');
  const scratch = path.join(tmp, 'scratch');
  fs.mkdirSync(fsRoot);
  fs.mkdirSync(ngxDir);
  fs.mkdirSync(scratch);
  const trash = path.join(tmp, 'trash');
  fs.mkdirSync(trash);
  const www = path.join(ngxDir, 'www');
  let svc: ServerProcess | undefined;
  let nginx: NginxProcess | undefined;
  const emergency = () => {
    svc?.kill();
    nginx?.kill();
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  process.once('exit', emergency);

  const alive = () => (svc?.alive ?? false) && (nginx?.alive ?? false);
  const describeFailure = (err: unknown) => `${err instanceof Error ? err.message : String(err)}${svc && !svc.alive ? `; ${svc.describeExit()}` : ''}${nginx && !nginx.alive ? '; nginx exited' : ''}`;
  const recordFailure = (name: string, err: unknown, indent: string) => {
    const message = describeFailure(err);
    result.errors.push({ phase: name, message });
    progress(`${indent}${name} FAILED: ${message}`);
  };
  const phase = async (name: string, fn: () => Promise<void>) => {
    if (!alive()) {
      result.errors.push({ phase: name, message: 'not run: a server is gone' });
      return;
    }
    progress(name);
    try {
      await fn();
    } catch (err) {
      recordFailure(name, err, '');
    }
  };
  /** One cell's failure is recorded and the phase goes on, unless a server is gone. */
  const cell = async (name: string, fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (err) {
      recordFailure(name, err, '  ');
      if (!alive()) throw err;
    }
  };

  try {
    const started = await NginxProcess.start(binary, ngxDir, workers);
    nginx = started.nginx;
    result.nginx.user = started.user;
    result.nginx.config = started.config;
    progress(`nginx ${v.version} pid ${nginx.pid} (workers ${nginx.workerPids.join(', ')}) on 127.0.0.1:${nginx.port}, root ${www}`);
    const saved = process.env.HTTP_PORT;
    process.env.HTTP_PORT = '0'; // the model listener must not take (or collide on) 8080
    try {
      svc = await ServerProcess.start({ entry: path.join(opts.repo, 'dist', 'server', 'main.js'), fsRoot, durability: 'relaxed', startTimeoutMs: 60_000 });
    } finally {
      if (saved === undefined) delete process.env.HTTP_PORT;
      else process.env.HTTP_PORT = saved;
    }
    result.svc = { workers: svc.listeningLog?.workers, problems: svc.problems };
    progress(`svc pid ${svc.pid} on 127.0.0.1:${svc.port} (SVC_DURABILITY=relaxed, workers ${String(svc.listeningLog?.workers)})`);
    progress(`load generator: ${smallGenerator === 'wrk' ? `wrk (${wrkInfo!.version}, -t ${WRK_THREADS})` : `Node (bench/load.ts${wrkInfo ? ', --no-wrk' : `; ${WRK_INSTALL_HINT}`})`}`);
    const s = svc;
    const n = nginx;
    const order = (round: number): Peer[] => (round % 2 === 0 ? ['svc', 'nginx'] : ['nginx', 'svc']);
    const portOf = (p: Peer) => (p === 'svc' ? s.port : n.port);
    const pidOf = (p: Peer) => (p === 'svc' ? s.pid : n.pid);
    const wrkSpec = wrkInfo ? { binary: wrkInfo.binary, threads: WRK_THREADS } : undefined;

    // The download objects: the same bytes as svc blobs and as nginx static files.
    const paths = new Map<number, { svc: string[]; nginx: string[] }>();
    await phase(`storing ${OBJECTS} objects of ${matrix.map((m) => sizeLabel(m.sizeBytes)).join(' and ')} in both`, async () => {
      for (const m of matrix) {
        const dir = `obj-${sizeKey(m.sizeBytes)}`;
        fs.mkdirSync(path.join(www, dir), { recursive: true });
        const p = { svc: [] as string[], nginx: [] as string[] };
        for (let i = 0; i < OBJECTS; i++) {
          const body = randomBytes(m.sizeBytes);
          fs.writeFileSync(path.join(www, dir, `${i}.bin`), body);
          p.nginx.push(`/${dir}/${i}.bin`);
          const res = await RawConnection.requestOnce(s.port, postRequest('/api/v1/blobs', 'application/octet-stream', body), 60_000);
          if (res.status !== 201) throw new Error(`svc storing a ${sizeLabel(m.sizeBytes)} object answered HTTP ${res.status}: ${res.body?.toString('utf8').slice(0, 300)}`);
          p.svc.push(`/api/v1/blobs/${(JSON.parse(res.body!.toString('utf8')) as { blob: { id: string } }).blob.id}`);
        }
        paths.set(m.sizeBytes, p);
      }
    });

    // Which generator gets more out of the same server: Node vs wrk on the same cells.
    const checks: Array<{ peer: Peer; sizeBytes: number; connections: number; generators: Array<{ name: string; generator: Generator; threads?: number }> }> = [];
    if (wrkInfo) {
      // The thread count (wrk -t 2) and 1 MiB checks of the first runs are in docs/performance.md.
      const small = [{ name: 'node', generator: 'node' as const }, { name: 'wrk -t 1', generator: 'wrk' as const, threads: 1 }];
      for (const peer of ['nginx', 'svc'] as const) checks.push({ peer, sizeBytes: 4 * KiB, connections: 32, generators: small });
    }
    if (checks.length && paths.size) await phase(`generator check: Node vs wrk on the same cells (${warmupSeconds} s warm-up + ${durationSeconds} s each)`, async () => {
      const rep = 0;
      for (const ch of checks) {
        for (const g of ch.generators) {
          await cell(`generator check ${ch.peer} ${sizeLabel(ch.sizeBytes)} ${ch.connections} connections ${g.name}`, async () => {
            const r = await runCell({
              peer: ch.peer, round: -1, port: portOf(ch.peer), pid: pidOf(ch.peer), direction: 'download', sizeBytes: ch.sizeBytes, connections: ch.connections,
              generator: g.generator, wrk: g.threads ? { binary: wrkInfo!.binary, threads: g.threads } : undefined, warmupSeconds, durationSeconds, tmp: scratch,
              paths: paths.get(ch.sizeBytes)![ch.peer],
            });
            result.generatorCheck.push({ peer: ch.peer, rep, sizeBytes: ch.sizeBytes, connections: ch.connections, generator: g.name, requestsPerSecond: r.requestsPerSecond, mbPerSecond: r.mbPerSecond, generatorCpuPercent: r.cpu.benchPercent, serverCpuPercent: r.cpu.serverPercent, otherCpuPercent: r.cpu.otherPercent, p99Ms: r.latency.p99Ms });
            progress(`  ${ch.peer} ${sizeLabel(ch.sizeBytes)} x${ch.connections} ${g.name}: ${f(r.requestsPerSecond)} req/s, generator CPU ${pct(r.cpu.benchPercent)}, server ${pct(r.cpu.serverPercent)}`);
          });
        }
      }
    });

    // Large download: the same bytes as an svc blob and an nginx static file.
    await phase(`large downloads (${sizeLabel(largeBytes)}, ${rounds} round(s))`, async () => {
      const file = path.join(www, 'large.bin');
      writeRandomFile(file, largeBytes, `peers-nginx-download-${result.startedAt}`);
      const up = await sendFile(s.port, s.pid, 'svc', 0, 'POST', '/api/v1/blobs', file, largeBytes, 201, timeoutMs);
      const id = (JSON.parse(up.responseBody ?? '{}') as { blob?: { id?: string } }).blob?.id;
      if (!id) throw new Error(`svc answered the upload without a blob id: ${up.responseBody?.slice(0, 300)}`);
      const urlOf = (p: Peer) => (p === 'svc' ? `/api/v1/blobs/${id}` : '/large.bin');
      // One untimed pass each: both read from the page cache afterwards.
      for (const p of ['svc', 'nginx'] as const) await fetchLarge(portOf(p), pidOf(p), p, -1, urlOf(p), largeBytes, timeoutMs);
      for (let round = 0; round < rounds; round++) {
        for (const p of order(round)) {
          const r = await fetchLarge(portOf(p), pidOf(p), p, round, urlOf(p), largeBytes, timeoutMs);
          result.largeDownloads.push(r);
          progress(`  round ${round + 1} ${p}: ${f(r.mbPerSecond)} MB/s, server CPU ${pct(r.cpu.serverPercent)}`);
        }
      }
    });

    // The matrix of downloads: for each round every cell, svc and nginx back to back.
    const runMatrix = async (direction: Direction) => {
      let cellNo = 0;
      for (let round = 0; round < rounds; round++) {
        for (const m of matrix) {
          for (const c of m.connections) {
            for (const p of order(round)) {
              const label = `${direction} ${sizeLabel(m.sizeBytes)} x${c} round ${round + 1} ${p}`;
              await cell(label, async () => {
                const dir = `up-${cellNo++}`;
                const before = direction === 'upload' && p === 'svc' ? await svcStats(s.port) : undefined;
                const r = await runCell({
                  peer: p, round, port: portOf(p), pid: pidOf(p), direction, sizeBytes: m.sizeBytes, connections: c, generator: m.generator, wrk: wrkSpec,
                  warmupSeconds, durationSeconds, tmp: scratch,
                  paths: direction === 'download' ? paths.get(m.sizeBytes)?.[p] : undefined,
                  upload: direction === 'upload' ? (p === 'svc' ? { method: 'POST', path: '/api/v1/blobs', distinctNames: false, expectStatus: 201 } : { method: 'PUT', path: `/dav/${dir}/`, distinctNames: true, expectStatus: 201 }) : undefined,
                });
                if (direction === 'upload' && p === 'nginx') {
                  // Files of the measured window (the warm-up wrote to its own directory; the Node generator's warm-up to the same one).
                  const made = fs.existsSync(path.join(www, 'dav', dir, 'm')) ? fs.readdirSync(path.join(www, 'dav', dir, 'm')).length : 0;
                  // Out of nginx's way (it may still finish a PUT whose client went away); the
                  // files go with the temp directory at the end: removing tens of thousands of
                  // files between windows took up to 24 s and raced with those PUTs.
                  fs.renameSync(path.join(www, 'dav', dir), path.join(trash, dir));
                  if (made < r.requests) throw new Error(`nginx created ${made} files for ${r.requests} counted responses`);
                  r.verified = `${made} files created for ${r.requests} counted responses`;
                }
                if (before) {
                  const after = await svcStats(s.port);
                  const ingests = after.ingests - before.ingests;
                  const dup = after.duplicateBlocks - before.duplicateBlocks;
                  r.verified = `${ingests} ingests (warm-up included) for ${r.requests} counted responses; ${after.freshBlocks - before.freshBlocks} fresh, ${dup} duplicate blocks`;
                  if (dup > 0 || ingests < r.requests) throw new Error(`svc: ${r.verified}`);
                }
                if (!r.load) delete r.load;
                result.runs.push(r);
                const fig = m.sizeBytes >= MiB ? `${f(r.mbPerSecond)} MB/s (${f(r.requestsPerSecond)} req/s)` : `${f(r.requestsPerSecond)} req/s`;
                progress(`  ${label}: ${fig}, server CPU ${pct(r.cpu.serverPercent)}, ${m.generator} ${pct(r.cpu.benchPercent)}`);
              });
            }
          }
        }
      }
    };
    if (paths.size) await phase(`downloads: ${matrix.map((m) => `${sizeLabel(m.sizeBytes)} at ${m.connections.join('/')} connections`).join(', ')} (${warmupSeconds} s warm-up + ${durationSeconds} s, ${rounds} round(s))`, () => runMatrix('download'));

    // Large upload: a fresh random file each round, sent to both.
    await phase(`large uploads (${sizeLabel(largeBytes)}, ${rounds} round(s))`, async () => {
      const file = path.join(tmp, 'upload.bin');
      for (let round = 0; round < rounds; round++) {
        writeRandomFile(file, largeBytes, `peers-nginx-upload-${result.startedAt}-${round}`);
        for (const p of order(round)) {
          const name = `large-${round}.bin`;
          syncDisks();
          const r = p === 'svc'
            ? await sendFile(s.port, s.pid, p, round, 'POST', '/api/v1/blobs', file, largeBytes, 201, timeoutMs)
            : await sendFile(n.port, n.pid, p, round, 'PUT', `/dav/${name}`, file, largeBytes, 201, timeoutMs);
          if (p === 'svc') {
            const body = JSON.parse(r.responseBody ?? '{}') as { duplicateBlocks?: number; blob?: { size?: number } };
            if (body.blob?.size !== largeBytes) throw new Error(`svc stored ${body.blob?.size} bytes, sent ${largeBytes}`);
            if (body.duplicateBlocks) progress(`  note: svc found ${body.duplicateBlocks} duplicate blocks`);
          } else {
            const size = fs.statSync(path.join(www, 'dav', name)).size;
            if (size !== largeBytes) throw new Error(`nginx stored ${size} bytes, sent ${largeBytes}`);
            fs.rmSync(path.join(www, 'dav', name));
          }
          delete r.responseBody;
          result.largeUploads.push(r);
          progress(`  round ${round + 1} ${p}: ${f(r.mbPerSecond)} MB/s, server CPU ${pct(r.cpu.serverPercent)}`);
        }
      }
      fs.rmSync(file, { force: true });
    });

    await phase(`uploads: ${matrix.map((m) => `${sizeLabel(m.sizeBytes)} at ${m.connections.join('/')} connections`).join(', ')} (${warmupSeconds} s warm-up + ${durationSeconds} s, ${rounds} round(s))`, () => runMatrix('upload'));
  } catch (err) {
    result.errors.push({ phase: 'harness', message: describeFailure(err) });
    progress(`FAILED: ${err instanceof Error ? err.stack : String(err)}`);
  } finally {
    progress('stopping svc and nginx');
    if (svc) {
      await svc.stop();
      result.svc = { workers: svc.listeningLog?.workers, problems: svc.problems };
    }
    if (nginx) {
      result.nginxErrorLog = nginx.errorLog() || undefined;
      await nginx.stop();
    }
    progress(`removing ${tmp}`);
    fs.rmSync(tmp, { recursive: true, force: true });
    progress('removed');
    process.off('exit', emergency);
  }
  result.comparisons = nginxComparisons(result);
  result.finishedAt = new Date().toISOString();
  result.targets = nginxPeersTargets(result);
  return result;
}

/** Every comparison of the result, in report order (downloads, then uploads; by size, then connections). */
export function nginxComparisons(r: NginxPeersResult): Comparison[] {
  const out: Comparison[] = [];
  const large = sizeLabel(r.settings.largeBytes);
  for (const direction of ['download', 'upload'] as const) {
    const verb = direction === 'download' ? 'Download' : 'Upload';
    for (const m of r.settings.matrix) {
      for (const c of m.connections) {
        const runs = r.runs.filter((x) => x.direction === direction && x.sizeBytes === m.sizeBytes && x.connections === c);
        const mb = m.sizeBytes >= MiB;
        out.push(compare(`${direction}-${sizeKey(m.sizeBytes)}-c${c}`, `${verb} ${sizeLabel(m.sizeBytes)}, ${c} conn.`, mb ? 'MB/s' : 'req/s', { direction, sizeBytes: m.sizeBytes, connections: c, generator: m.generator, target: nginxTarget(direction, m.sizeBytes, false) },
          runs.map((x) => ({ peer: x.peer, round: x.round, value: mb ? x.mbPerSecond : x.requestsPerSecond }))));
      }
    }
    const largeRuns = direction === 'download' ? r.largeDownloads : r.largeUploads;
    out.push(compare(`${direction}-large`, `${verb} ${large}, 1 conn.`, 'MB/s', { direction, sizeBytes: r.settings.largeBytes, connections: 1, target: nginxTarget(direction, r.settings.largeBytes, true) },
      largeRuns.map((x) => ({ peer: x.peer, round: x.round, value: x.mbPerSecond }))));
  }
  return out.filter((c) => c.ratios.length > 0);
}

// ---------------------------------------------------------------------------------------------
// Targets and report

export const spread = (v: number[], digits = 0) => (v.length === 0 ? 'n/a' : v.length === 1 ? f(v[0], digits) : `${f(Math.min(...v), digits)}–${f(Math.max(...v), digits)}`);

/** PASS / FAIL on the median ratio; `*` when the rounds' ratios fall on both sides of the target. */
export function verdict(c: Comparison): string {
  if (c.target === undefined) return 'no target';
  const pass = c.medianRatio >= c.target;
  const straddles = Math.min(...c.ratios) < c.target && Math.max(...c.ratios) >= c.target;
  return `${mark(pass)}${straddles ? '*' : ''}`;
}

export function nginxPeersTargets(r: NginxPeersResult): Target[] {
  const quickNote = r.mode === 'quick' ? ' (quick run: the target is for 1 GiB)' : '';
  if (r.skipped || r.comparisons.length === 0) {
    const why = r.skipped ? `skipped: ${r.skipped}` : 'n/a';
    return [
      { name: 'svc/nginx: large download', value: why, target: '>= 0.8x nginx', pass: undefined },
      { name: 'svc/nginx: 4 KiB downloads', value: why, target: '>= 1.0x nginx', pass: undefined },
      { name: 'svc/nginx: uploads', value: why, target: '>= 0.5x nginx', pass: undefined },
    ];
  }
  return r.comparisons
    .filter((c) => c.target !== undefined)
    .map((c) => ({
      name: `svc/nginx: ${c.name}${c.key.endsWith('large') ? quickNote : ''}${c.direction === 'upload' ? ' (svc hashes, chunks, dedups)' : ''}`,
      value: `${f(c.medianRatio, 2)}x (svc ${f(c.svcMedian)} / nginx ${f(c.nginxMedian)} ${c.unit}${c.ratios.length > 1 ? `; rounds ${c.ratios.map((x) => f(x, 2)).join(', ')}` : ''})`,
      target: `>= ${f(c.target, 1)}x nginx`,
      pass: c.medianRatio >= c.target!,
    }));
}

/** The generator line of the reports: which generator drove which cells. */
export function generatorText(r: NginxPeersResult): string {
  const g = r.generators;
  if (!g) return 'n/a';
  const used = g.bySize.every((x) => x.generator === 'wrk') && g.wrk ? `wrk (${g.wrk.version}, ${g.wrk.binary}, -t ${g.wrk.threads}, a generated Lua script per run)` : `the Node generator (${g.node}; ${g.wrkMissing ?? 'wrk not used'})`;
  return `${g.bySize.map((x) => sizeLabel(x.sizeBytes)).join(' and ')} cells: ${used}; large objects: one connection (node:http upload, raw-socket download)`;
}

export function renderNginxPeersSection(r: NginxPeersResult): string {
  const L: string[] = ['## svc against nginx (issue 7): size/concurrency matrix', ''];
  if (r.skipped) {
    L.push(`Skipped: ${r.skipped}`, '');
    return L.join('\n');
  }
  const s = r.settings;
  L.push(
    `nginx ${r.nginx?.version ?? '?'} (${r.nginx?.binary ?? '?'}), master + ${r.nginx?.workerProcesses ?? '?'} worker processes${r.nginx?.user ? ` (user ${r.nginx.user})` : ''}, sendfile and tcp_nopush on, access log off; svc with SVC_DURABILITY=relaxed, ${String(r.svc?.workers ?? '?')} workers. ` +
      `Durability: neither side fsyncs (svc relaxed trusts the page cache; nginx's WebDAV PUT writes a temp file and renames it, without fsync); \`sync\` runs untimed before every upload window. Loopback only; data of both on ${s.dataDir ?? '?'}. ` +
      `${s.rounds} round(s), svc and nginx back to back in every cell, the order flipped every round; ratio = svc / nginx in the same round: median [min–max] over the rounds.`,
    '',
    `Load generators: ${generatorText(r)}.`,
    '',
  );
  L.push('### Targets', '', ...renderTargets(r.targets));
  if (r.errors.length) L.push('### Errors', '', ...r.errors.map((e) => `- **${e.phase}**: ${e.message.replace(/\n/g, ' ')}`), '');
  L.push('| Measurement | svc median [min–max] | nginx median [min–max] | svc / nginx median [min–max] | Target | Verdict |', '|---|---|---|---|---|---|');
  for (const c of r.comparisons) {
    L.push(`| ${c.name} | ${f(c.svcMedian)} [${spread(c.svc)}] ${c.unit} | ${f(c.nginxMedian)} [${spread(c.nginx)}] ${c.unit} | ${f(c.medianRatio, 2)}x [${spread(c.ratios, 2)}] | ${c.target === undefined ? '–' : `>= ${f(c.target, 1)}x`} | ${verdict(c)} |`);
  }
  L.push('', '`*`: the rounds\' ratios fall on both sides of the target.', '');
  L.push('| Measurement | Peer | Server CPU | Generator CPU | Other CPU | p50 / p99 latency |', '|---|---|---|---|---|---|');
  const cpuRows = (name: string, runs: Array<{ peer: Peer; cpu: PeerCpu; lat?: [number, number] }>) => {
    for (const p of ['svc', 'nginx'] as const) {
      const x = runs.filter((y) => y.peer === p);
      if (!x.length) continue;
      const lat = x[0].lat ? `${ms(median(x.map((y) => y.lat![0])))} / ${ms(median(x.map((y) => y.lat![1])))}` : '';
      L.push(`| ${name} | ${p} | ${pct(median(x.map((y) => y.cpu.serverPercent ?? NaN)))} | ${pct(median(x.map((y) => y.cpu.benchPercent)))} | ${pct(median(x.map((y) => y.cpu.otherPercent ?? NaN)))} | ${lat} |`);
    }
  };
  for (const c of r.comparisons) {
    if (c.key.endsWith('-large')) cpuRows(c.name, c.direction === 'download' ? r.largeDownloads : r.largeUploads);
    else cpuRows(`${c.name} (${c.generator})`, r.runs.filter((x) => x.direction === c.direction && x.sizeBytes === c.sizeBytes && x.connections === c.connections).map((x) => ({ peer: x.peer, cpu: x.cpu, lat: [x.latency.p50Ms, x.latency.p99Ms] })));
  }
  L.push('');
  if (r.generatorCheck.length) {
    L.push('Generator check (same cell, same server, generators back to back, every window):', '', '| Server | Cell | Repetition | Generator | Requests/s | MB/s | Generator CPU | Server CPU | Other CPU | p99 |', '|---|---|---|---|---|---|---|---|---|---|');
    for (const g of r.generatorCheck) L.push(`| ${g.peer} | ${sizeLabel(g.sizeBytes)} downloads, ${g.connections} conn. | ${g.rep + 1} | ${g.generator} | ${f(g.requestsPerSecond)} | ${f(g.mbPerSecond)} | ${pct(g.generatorCpuPercent)} | ${pct(g.serverCpuPercent)} | ${pct(g.otherCpuPercent)} | ${ms(g.p99Ms)} |`);
    L.push('');
  }
  L.push(
    `Large objects: one connection, the file streamed with Content-Length by node:http (uploads; a fresh random file each round, sent to both) or read over a raw socket with a 1 MiB buffer and discarded (downloads, after one untimed pass each); MB/s decimal. ` +
      `Matrix cells: closed loop, ${s.warmupSeconds} s warm-up + ${s.durationSeconds} s measured, no pipelining; downloads of ${s.objects} objects per size round-robin (the same bytes on both sides), uploads of distinct bodies (svc POST /api/v1/blobs, nginx PUT /dav/<distinct name>). ` +
      `CPU: % of one core (${r.environment.cpus} CPUs = ${r.environment.cpus * 100}%); server = its process tree (nginx master and workers; svc's one process, all threads); generator = wrk (its /proc ticks) or the Node generator (this process); other = the rest of the host. Server and generator share the host's CPUs.`,
    '',
  );
  if (r.svc?.problems.length) L.push(`svc warnings/errors logged: ${r.svc.problems.length}`, ...r.svc.problems.slice(0, 5).map((p) => `- \`${p.replace(/`/g, "'").slice(0, 300)}\``), '');
  if (r.nginxErrorLog) L.push('nginx error log (warn and above):', '', '```', r.nginxErrorLog.trim().slice(-1500), '```', '');
  return L.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Standalone

async function main(): Promise<void> {
  const args = benchArgs({
    usage: 'usage: node dist/bench/peers-nginx.js [--quick] [--no-wrk]',
    options: {
      quick: { type: 'boolean', help: '256 MiB instead of 1 GiB, a smaller matrix, 1 round instead of 3' },
      'no-wrk': { type: 'boolean', help: 'the Node generator for the 4 KiB cells even when wrk is installed' },
    },
  });
  const { quick, 'no-wrk': noWrk } = args.values;
  const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const progress = (msg: string) => process.stderr.write(`[peers-nginx ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      progress(`${sig}: stopping svc and nginx, removing the temp directory`);
      process.exit(130); // the scenario's 'exit' handler kills both and removes the directory
    });
  }
  const result = await runNginxPeers({ repo, quick, noWrk, progress });
  const outDir = path.join(repo, 'bench', 'results');
  fs.mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, `peers-nginx-${result.startedAt.replace(/:/g, '-')}.json`);
  fs.writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  const e = result.environment;
  const header = [
    `# svc against nginx (${quick ? 'quick run, --quick' : 'full run'})`,
    '',
    `- Run: ${result.startedAt} → ${result.finishedAt}`,
    `- Host: ${e.cpuModel}, ${e.cpus} CPU(s), ${mib(e.memoryBytes, 0)} RAM, ${e.os}, Node ${e.node}; load average at start ${e.loadAverageAtStart.join(' / ')}`,
    `- Code: ${e.gitCommit ? `\`${e.gitCommit.slice(0, 12)}\`${e.gitDirty ? ' (working tree has uncommitted changes)' : ''}` : 'unknown'}`,
    '',
  ];
  process.stdout.write(`${header.join('\n')}\n${renderNginxPeersSection(result)}\n`);
  progress(`wrote ${path.relative(repo, file)}; verdicts: ${result.targets.map((t) => `${t.name}: ${mark(t.pass)}`).join('; ')}`);
  if (result.errors.length > 0) process.exitCode = 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
