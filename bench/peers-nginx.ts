/**
 * svc against nginx (issue 7, first scenario): the same bytes served and accepted by both, on
 * loopback, in the same run, alternating svc and nginx (ABAB... by round, the order flipping each
 * round), with the same client code and connection counts on both sides.
 *
 * - 1 GiB download (256 MiB with --quick): svc `GET /api/v1/blobs/<id>` of a blob uploaded first
 *   vs nginx `GET /large.bin`, a static file with the same bytes (sendfile on). One raw keep-alive
 *   socket, 1 MiB read buffer, bytes counted and discarded; one untimed warm-up pass each.
 * - 4 KiB downloads: closed-loop load (bench/load.ts) at 8 and 32 keep-alive connections, 8
 *   objects round-robin: svc blobs vs nginx static files with the same bytes.
 * - 1 GiB upload (256 MiB quick): svc `POST /api/v1/blobs` vs nginx WebDAV `PUT /dav/<name>`,
 *   node:http streaming the file from disk with Content-Length; each round a fresh random file
 *   (so svc's dedup never helps it), sent to both.
 * - 4 KiB uploads: closed-loop load at 8 and 32 connections, distinct random bodies: svc POST vs
 *   nginx PUT of distinct names.
 *
 * Durability: svc runs with SVC_DURABILITY=relaxed (no fsync; trusts the page cache); nginx never
 * fsyncs a PUT (it writes the body to a temp file and renames it). Neither is crash-safe against
 * power loss; both survive a process crash once they answered.
 *
 * nginx: the Debian binary (`nginx-light` / `nginx` in Debian 12 carry ngx_http_dav_module),
 * started as a child with a generated configuration in a temp dir (`-p <dir> -c <dir>/nginx.conf`,
 * daemon off, master process + 2 worker processes: svc runs 2 workers on this 2-CPU host), access
 * log off, sendfile and tcp_nopush on (Debian's defaults), keepalive_requests raised so the load
 * generator's keep-alive sockets are not closed after 1,000 requests. When nginx is not
 * installed the scenario is skipped with a message saying how to install it.
 *
 *   node dist/bench/peers-nginx.js [--quick]
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
import { processCpuSeconds } from './cpu.js';
import { writeRandomFile } from './large.js';
import { type LoadResult, runLoad } from './load.js';
import { RawConnection, bodyRequest, getRequest, postRequest } from './raw-http.js';
import { type Target, f, machineEnvironment, mark, mib, ms, pct, renderTargets } from './report.js';
import { ServerProcess } from './server-process.js';
import { freePort, fsTypeName, tmpParentFor } from './host.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const SMALL = 4096;
const SMALL_OBJECTS = 8;
export const NGINX_INSTALL_HINT = 'nginx not installed: apt-get install nginx-light (Debian)';

export type Peer = 'svc' | 'nginx';

export interface NginxPeersOptions {
  /** The repository root (dist/server/main.js is started from there). */
  repo: string;
  quick: boolean;
  /** Rounds of each measurement (default 2; 1 with quick). */
  rounds?: number;
  /** Where the temp directory goes (default: os.tmpdir() when on the repository's disk). */
  tmpParent?: string;
  progress?: (msg: string) => void;
}

/** CPU over a measurement, % of one core. Server = the process and its children (nginx: master + workers; svc: one process, all threads). */
export interface PeerCpu {
  serverPercent?: number;
  benchPercent: number;
  /** Host busy time minus server and bench. */
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

export interface SmallRun {
  peer: Peer;
  round: number;
  connections: number;
  load: LoadResult;
  /** Server CPU over the whole runLoad call (warm-up, window, drain), % of one core. */
  serverCpuPercentOverCall?: number;
}

export interface Comparison {
  key: string;
  name: string;
  unit: 'MB/s' | 'req/s';
  svc: number[];
  nginx: number[];
  /** svc / nginx per round (same round, back to back). */
  ratios: number[];
  svcMedian: number;
  nginxMedian: number;
  medianRatio: number;
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
  settings: { largeBytes: number; smallBytes: number; rounds: number; warmupMs: number; durationMs: number; connections: number[]; dataDir?: string };
  largeDownloads: LargeRun[];
  largeUploads: LargeRun[];
  smallDownloads: SmallRun[];
  smallUploads: SmallRun[];
  comparisons: Comparison[];
  nginxErrorLog?: string;
  errors: Array<{ phase: string; message: string }>;
  targets: Target[];
}

// ---------------------------------------------------------------------------------------------
// Helpers

function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

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

  end(): PeerCpu {
    const seconds = (performance.now() - this.t0) / 1000;
    const self = process.cpuUsage(this.self0);
    const benchPercent = ((self.user + self.system) / 1e6 / seconds) * 100;
    const serverPercent = ((this.serverSeconds() - this.server0) / seconds) * 100;
    const host1 = hostBusySeconds();
    const otherPercent = this.host0 !== undefined && host1 !== undefined ? Math.max(0, ((host1 - this.host0) / seconds) * 100 - benchPercent - serverPercent) : undefined;
    return { serverPercent, benchPercent, otherPercent };
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

async function loadRun(peer: Peer, round: number, port: number, pid: number, connections: number, warmupMs: number, durationMs: number, next: () => Buffer | string, expectStatus: number): Promise<SmallRun> {
  const cpu = new TreeCpuWindow(pid);
  const load = await runLoad({ port, connections, pipeline: 1, warmupMs, durationMs, next, expectStatus });
  const c = cpu.end();
  // runLoad without a server: its otherPercent includes the server; take it out.
  if (load.cpu.otherPercent !== undefined && c.serverPercent !== undefined) load.cpu.otherPercent = Math.max(0, load.cpu.otherPercent - c.serverPercent);
  load.cpu.serverPercent = c.serverPercent;
  if (load.errors > 0) throw new Error(`${peer} at ${connections} connections: ${load.errors} errors, first: ${load.firstError}`);
  return { peer, round, connections, load, serverCpuPercentOverCall: c.serverPercent };
}

function compare(key: string, name: string, unit: Comparison['unit'], runs: Array<{ peer: Peer; round: number; value: number }>): Comparison {
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
  const rounds = opts.rounds ?? (opts.quick ? 1 : 2);
  const largeBytes = opts.quick ? 256 * MiB : GiB;
  const warmupMs = opts.quick ? 500 : 1000;
  const durationMs = opts.quick ? 2000 : 5000;
  const connections = [8, 32];
  const timeoutMs = 10 * 60_000;
  const result: NginxPeersResult = {
    tool: 'svc-bench-peers-nginx',
    startedAt: new Date().toISOString(),
    mode: opts.quick ? 'quick' : 'full',
    environment: machineEnvironment(opts.repo),
    durability: { svc: 'relaxed', nginx: 'no fsync (WebDAV PUT writes a temp file and renames it; no fsync directive exists)' },
    settings: { largeBytes, smallBytes: SMALL, rounds, warmupMs, durationMs, connections },
    largeDownloads: [],
    largeUploads: [],
    smallDownloads: [],
    smallUploads: [],
    comparisons: [],
    errors: [],
    targets: [],
  };
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
  result.settings.dataDir = `${path.dirname(tmp)} (${fsTypeName(tmp)})`;
  const fsRoot = path.join(tmp, 'svc-data');
  const ngxDir = path.join(tmp, 'nginx');
  fs.mkdirSync(fsRoot);
  fs.mkdirSync(ngxDir);
  const www = path.join(ngxDir, 'www');
  let svc: ServerProcess | undefined;
  let nginx: NginxProcess | undefined;
  const emergency = () => {
    svc?.kill();
    nginx?.kill();
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  process.once('exit', emergency);

  const phase = async (name: string, fn: () => Promise<void>) => {
    progress(name);
    try {
      await fn();
    } catch (err) {
      const message = `${err instanceof Error ? err.message : String(err)}${svc && !svc.alive ? `; ${svc.describeExit()}` : ''}${nginx && !nginx.alive ? '; nginx exited' : ''}`;
      result.errors.push({ phase: name, message });
      progress(`${name} FAILED: ${message}`);
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
    const s = svc;
    const n = nginx;
    const order = (round: number): Peer[] => (round % 2 === 0 ? ['svc', 'nginx'] : ['nginx', 'svc']);
    const portOf = (p: Peer) => (p === 'svc' ? s.port : n.port);
    const pidOf = (p: Peer) => (p === 'svc' ? s.pid : n.pid);

    // Large download: the same bytes as an svc blob and an nginx static file.
    await phase(`large downloads (${largeBytes / MiB} MiB, ${rounds} round(s))`, async () => {
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

    // 4 KiB downloads: 8 objects with the same bytes on both sides.
    await phase(`4 KiB downloads (${connections.join(' and ')} connections, ${durationMs / 1000} s windows)`, async () => {
      const bodies = Array.from({ length: SMALL_OBJECTS }, () => randomBytes(SMALL));
      fs.mkdirSync(path.join(www, 'small'), { recursive: true });
      const svcReqs: string[] = [];
      const ngxReqs: string[] = [];
      for (const [i, body] of bodies.entries()) {
        fs.writeFileSync(path.join(www, 'small', `${i}.bin`), body);
        ngxReqs.push(getRequest(`/small/${i}.bin`));
        const res = await RawConnection.requestOnce(s.port, postRequest('/api/v1/blobs', 'application/octet-stream', body), 30_000);
        if (res.status !== 201) throw new Error(`svc seeding a 4 KiB blob answered HTTP ${res.status}: ${res.body?.toString('utf8').slice(0, 300)}`);
        svcReqs.push(getRequest(`/api/v1/blobs/${(JSON.parse(res.body!.toString('utf8')) as { blob: { id: string } }).blob.id}`));
      }
      for (let round = 0; round < rounds; round++) {
        for (const c of connections) {
          for (const p of order(round)) {
            const reqs = p === 'svc' ? svcReqs : ngxReqs;
            let seq = 0;
            const r = await loadRun(p, round, portOf(p), pidOf(p), c, warmupMs, durationMs, () => reqs[seq++ % reqs.length], 200);
            if (r.load.bodyBytes !== r.load.requests * SMALL) throw new Error(`${p}: ${r.load.bodyBytes} body bytes for ${r.load.requests} requests`);
            result.smallDownloads.push(r);
            progress(`  round ${round + 1} ${c} conns ${p}: ${f(r.load.requestsPerSecond)} req/s, server CPU ${pct(r.load.cpu.serverPercent)}, bench ${pct(r.load.cpu.benchPercent)}`);
          }
        }
      }
    });

    // Large upload: a fresh random file each round, sent to both.
    await phase(`large uploads (${largeBytes / MiB} MiB, ${rounds} round(s))`, async () => {
      const file = path.join(tmp, 'upload.bin');
      for (let round = 0; round < rounds; round++) {
        writeRandomFile(file, largeBytes, `peers-nginx-upload-${result.startedAt}-${round}`);
        for (const p of order(round)) {
          const name = `large-${round}.bin`;
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

    // 4 KiB uploads: distinct random bodies (svc) / distinct names (nginx).
    await phase(`4 KiB uploads (${connections.join(' and ')} connections, ${durationMs / 1000} s windows)`, async () => {
      let cell = 0;
      for (let round = 0; round < rounds; round++) {
        for (const c of connections) {
          for (const p of order(round)) {
            let seq = 0;
            const prefix = `/dav/small-${cell++}/`;
            const next = p === 'svc'
              ? () => postRequest('/api/v1/blobs', 'application/octet-stream', randomBytes(SMALL))
              : () => bodyRequest('PUT', `${prefix}${seq++}.bin`, 'application/octet-stream', randomBytes(SMALL));
            const r = await loadRun(p, round, portOf(p), pidOf(p), c, warmupMs, durationMs, next, 201);
            result.smallUploads.push(r);
            progress(`  round ${round + 1} ${c} conns ${p}: ${f(r.load.requestsPerSecond)} req/s, server CPU ${pct(r.load.cpu.serverPercent)}, bench ${pct(r.load.cpu.benchPercent)}`);
            if (p === 'nginx') fs.rmSync(path.join(www, prefix), { recursive: true, force: true });
          }
        }
      }
    });

    const largeName = mib(largeBytes, 0);
    result.comparisons.push(compare('download-large', `Download of ${largeName}`, 'MB/s', result.largeDownloads.map((r) => ({ peer: r.peer, round: r.round, value: r.mbPerSecond }))));
    for (const c of connections) {
      result.comparisons.push(compare(`download-4k-${c}`, `4 KiB downloads, ${c} connections`, 'req/s', result.smallDownloads.filter((r) => r.connections === c).map((r) => ({ peer: r.peer, round: r.round, value: r.load.requestsPerSecond }))));
    }
    result.comparisons.push(compare('upload-large', `Upload of ${largeName}`, 'MB/s', result.largeUploads.map((r) => ({ peer: r.peer, round: r.round, value: r.mbPerSecond }))));
    for (const c of connections) {
      result.comparisons.push(compare(`upload-4k-${c}`, `4 KiB uploads, ${c} connections`, 'req/s', result.smallUploads.filter((r) => r.connections === c).map((r) => ({ peer: r.peer, round: r.round, value: r.load.requestsPerSecond }))));
    }
    result.comparisons = result.comparisons.filter((c) => c.ratios.length > 0);
  } catch (err) {
    result.errors.push({ phase: 'harness', message: err instanceof Error ? err.message : String(err) });
    progress(`FAILED: ${err instanceof Error ? err.stack : String(err)}`);
  } finally {
    if (svc) {
      await svc.stop();
      result.svc = { workers: svc.listeningLog?.workers, problems: svc.problems };
    }
    if (nginx) {
      result.nginxErrorLog = nginx.errorLog() || undefined;
      await nginx.stop();
    }
    fs.rmSync(tmp, { recursive: true, force: true });
    process.off('exit', emergency);
  }
  result.finishedAt = new Date().toISOString();
  result.targets = nginxPeersTargets(result);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Targets and report

export function nginxPeersTargets(r: NginxPeersResult): Target[] {
  const quickNote = r.mode === 'quick' ? ' (quick run: target is for 1 GiB)' : '';
  const big = mib(r.settings.largeBytes, 0);
  const rows: Array<{ key: string; name: string; min: number }> = [
    { key: 'download-large', name: `Download of ${big}${quickNote}`, min: 0.8 },
    ...r.settings.connections.map((c) => ({ key: `download-4k-${c}`, name: `4 KiB downloads, ${c} connections`, min: 1.0 })),
    { key: 'upload-large', name: `Upload of ${big}${quickNote} (svc hashes, chunks, dedups)`, min: 0.5 },
    ...r.settings.connections.map((c) => ({ key: `upload-4k-${c}`, name: `4 KiB uploads, ${c} connections (svc hashes, chunks, dedups)`, min: 0.5 })),
  ];
  return rows.map((row) => {
    const c = r.comparisons.find((x) => x.key === row.key);
    const value = c
      ? `${f(c.medianRatio, 2)}x (svc ${f(c.svcMedian)} / nginx ${f(c.nginxMedian)} ${c.unit}${c.ratios.length > 1 ? `; rounds ${c.ratios.map((x) => f(x, 2)).join(', ')}` : ''})`
      : r.skipped ? `skipped: ${r.skipped}` : 'n/a';
    return { name: `svc/nginx: ${row.name}`, value, target: `>= ${f(row.min, 1)}x nginx`, pass: c ? c.medianRatio >= row.min : undefined };
  });
}

const spread = (v: number[], digits = 0) => (v.length === 0 ? 'n/a' : v.length === 1 ? f(v[0], digits) : `${f(Math.min(...v), digits)}-${f(Math.max(...v), digits)}`);

export function renderNginxPeersSection(r: NginxPeersResult): string {
  const L: string[] = ['## svc against nginx (issue 7, first scenario)', ''];
  if (r.skipped) {
    L.push(`Skipped: ${r.skipped}`, '');
    return L.join('\n');
  }
  const s = r.settings;
  L.push(
    `nginx ${r.nginx?.version ?? '?'} (${r.nginx?.binary ?? '?'}), master + ${r.nginx?.workerProcesses ?? '?'} worker processes${r.nginx?.user ? ` (user ${r.nginx.user})` : ''}, sendfile and tcp_nopush on, access log off; svc with SVC_DURABILITY=relaxed, ${String(r.svc?.workers ?? '?')} workers. ` +
      `Durability: neither side fsyncs (svc relaxed trusts the page cache; nginx's WebDAV PUT writes a temp file and renames it, without fsync). Loopback only; data of both on ${s.dataDir ?? '?'}. ` +
      `${s.rounds} round(s), svc and nginx back to back in each, the order flipped every round; ratio = svc / nginx in the same round, the median of the rounds (range in brackets).`,
    '',
  );
  L.push('### Targets', '', ...renderTargets(r.targets));
  if (r.errors.length) L.push('### Errors', '', ...r.errors.map((e) => `- **${e.phase}**: ${e.message.replace(/\n/g, ' ')}`), '');
  L.push('| Measurement | svc (median; runs) | nginx (median; runs) | svc / nginx (median; range) |', '|---|---|---|---|');
  for (const c of r.comparisons) {
    L.push(`| ${c.name} | ${f(c.svcMedian)} ${c.unit} (${c.svc.map((x) => f(x)).join(', ')}) | ${f(c.nginxMedian)} ${c.unit} (${c.nginx.map((x) => f(x)).join(', ')}) | ${f(c.medianRatio, 2)}x (${spread(c.ratios, 2)}) |`);
  }
  L.push('');
  L.push('| Measurement | Peer | Server CPU (median) | Bench CPU | Other CPU | p50 / p99 latency |', '|---|---|---|---|---|---|');
  const cpuRows = (name: string, runs: Array<{ peer: Peer; cpu: PeerCpu; lat?: [number, number] }>) => {
    for (const p of ['svc', 'nginx'] as const) {
      const x = runs.filter((y) => y.peer === p);
      if (!x.length) continue;
      const lat = x[0].lat ? `${ms(median(x.map((y) => y.lat![0])))} / ${ms(median(x.map((y) => y.lat![1])))}` : '';
      L.push(`| ${name} | ${p} | ${pct(median(x.map((y) => y.cpu.serverPercent ?? NaN)))} | ${pct(median(x.map((y) => y.cpu.benchPercent)))} | ${pct(median(x.map((y) => y.cpu.otherPercent ?? NaN)))} | ${lat} |`);
    }
  };
  cpuRows(`Download of ${mib(s.largeBytes, 0)}`, r.largeDownloads);
  for (const c of s.connections) cpuRows(`4 KiB downloads, ${c} connections`, r.smallDownloads.filter((x) => x.connections === c).map((x) => ({ peer: x.peer, cpu: x.load.cpu as PeerCpu, lat: [x.load.latency.p50Ms, x.load.latency.p99Ms] })));
  cpuRows(`Upload of ${mib(s.largeBytes, 0)}`, r.largeUploads);
  for (const c of s.connections) cpuRows(`4 KiB uploads, ${c} connections`, r.smallUploads.filter((x) => x.connections === c).map((x) => ({ peer: x.peer, cpu: x.load.cpu as PeerCpu, lat: [x.load.latency.p50Ms, x.load.latency.p99Ms] })));
  L.push('');
  L.push(
    `Large transfers: one connection, the file streamed with Content-Length by node:http (uploads; a fresh random file each round, sent to both) or read over a raw socket with a 1 MiB buffer and discarded (downloads, after one untimed pass each); MB/s decimal. ` +
      `4 KiB: closed loop (bench/load.ts), ${f(s.warmupMs / 1000, 1)} s warm-up + ${f(s.durationMs / 1000, 1)} s measured, no pipelining; downloads of ${SMALL_OBJECTS} objects round-robin (the same bytes on both sides), uploads of distinct random bodies (svc POST /api/v1/blobs, nginx PUT /dav/<distinct name>). ` +
      `CPU: % of one core (${r.environment.cpus} CPUs = ${r.environment.cpus * 100}%); server = its process tree (nginx master and workers; svc's one process, all threads), for 4 KiB over the whole load call (warm-up included); bench = the single-threaded load generator; other = the rest of the host. Server and load generator share the host's CPUs.`,
    '',
  );
  if (r.svc?.problems.length) L.push(`svc warnings/errors logged: ${r.svc.problems.length}`, ...r.svc.problems.slice(0, 5).map((p) => `- \`${p.replace(/`/g, "'").slice(0, 300)}\``), '');
  if (r.nginxErrorLog) L.push('nginx error log (warn and above):', '', '```', r.nginxErrorLog.trim().slice(-1500), '```', '');
  return L.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Standalone

const USAGE = `usage: node dist/bench/peers-nginx.js [--quick]
  --quick   256 MiB instead of 1 GiB, 2 s load windows, 1 round instead of 2
`;

async function main(): Promise<void> {
  let quick = false;
  for (const a of process.argv.slice(2)) {
    if (a === '--quick') quick = true;
    else {
      process.stderr.write(`${a === '--help' || a === '-h' ? '' : `peers-nginx: unknown argument "${a}"\n`}${USAGE}`);
      process.exit(a === '--help' || a === '-h' ? 0 : 2);
    }
  }
  const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const progress = (msg: string) => process.stderr.write(`[peers-nginx ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      progress(`${sig}: stopping svc and nginx, removing the temp directory`);
      process.exit(130); // the scenario's 'exit' handler kills both and removes the directory
    });
  }
  const result = await runNginxPeers({ repo, quick, progress });
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
