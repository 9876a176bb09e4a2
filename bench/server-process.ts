import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { processCpuSeconds } from './cpu.js';

export interface ServerOptions {
  /** dist/server/main.js */
  entry: string;
  fsRoot: string;
  durability: 'strict' | 'relaxed';
  /** Milliseconds to wait for the listening line. */
  startTimeoutMs?: number;
  /** Variables set for this server on top of the bench's environment. */
  env?: NodeJS.ProcessEnv;
}

export interface ServerLogLine {
  level?: string;
  msg?: string;
  [k: string]: unknown;
}

/**
 * The real server as a child process: `node dist/server/main.js serve` with a free port and
 * its own data directory. Keeps the stderr log (JSON lines) for the report.
 */
/** The first stdout line of svc serving: its ports (`s3Port` null when the S3 listener is off). */
export interface ListeningLine {
  event: 'listening';
  port: number;
  modelPort?: number | null;
  s3Port?: number | null;
}

/** The port of a child that prints `{"event":"listening","port":N}` as its first stdout line. */
export async function listeningPort(child: ChildProcess, stderrTail: () => string, timeoutMs: number, what: string): Promise<number> {
  return (await listeningLine(child, stderrTail, timeoutMs, what)).port;
}

/**
 * The line of a child that prints `{"event":"listening","port":N,…}` as its first stdout line;
 * rejects when it exits first or says nothing within `timeoutMs`.
 */
export function listeningLine(child: ChildProcess, stderrTail: () => string, timeoutMs: number, what: string): Promise<ListeningLine> {
  return new Promise<ListeningLine>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${what} printed no listening line within ${timeoutMs} ms; stderr: ${stderrTail()}`)), timeoutMs);
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (text: string) => {
      out += text;
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      try {
        const line = JSON.parse(out.slice(0, nl)) as Partial<ListeningLine>;
        if (line.event === 'listening' && typeof line.port === 'number') {
          clearTimeout(timer);
          resolve(line as ListeningLine);
        }
      } catch {
        // keep waiting; reported on timeout
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited before listening (code ${code}, signal ${signal}); stderr: ${stderrTail()}`));
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

export class ServerProcess {
  readonly child: ChildProcess;
  port = 0;
  /** The S3 listener's port (0 when it is off). */
  s3Port = 0;
  /** The `listening` log line (host, port, fsRoot, durability, workers). */
  listeningLog: ServerLogLine | undefined;
  /** Log lines at level warn or error, and any stderr text that is not a JSON line. */
  readonly problems: string[] = [];
  private stderrTail = '';
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private stopRequested = false;
  private readonly exited: Promise<void>;

  private constructor(opts: ServerOptions) {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      SVC_HTTP_PORT: '0',
      SVC_S3_API_PORT: process.env.SVC_S3_API_PORT ?? '0',
      // The model runtime's port too: a second server (or one left over) must not collide on 8080.
      HTTP_PORT: process.env.HTTP_PORT ?? '0',
      SVC_HOST: '127.0.0.1',
      SVC_FS_ROOT: opts.fsRoot,
      SVC_DURABILITY: opts.durability,
      ...opts.env,
    };
    this.child = spawn(process.execPath, [opts.entry, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        if (!this.stopRequested && this.port !== 0) {
          this.problems.push(`[bench] the server exited on its own while the bench was running (code ${code}, signal ${signal})`);
        }
        resolve();
      });
    });
    let partial = '';
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-8192);
      partial += text;
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) this.onLogLine(line);
    });
  }

  private onLogLine(line: string): void {
    if (line.trim() === '') return;
    let parsed: ServerLogLine | undefined;
    try {
      parsed = JSON.parse(line) as ServerLogLine;
    } catch {
      parsed = undefined;
    }
    if (parsed && parsed.msg === 'listening') this.listeningLog = parsed;
    if (!parsed || parsed.level === 'warn' || parsed.level === 'error') {
      if (this.problems.length < 50) this.problems.push(line.length > 2000 ? `${line.slice(0, 2000)}…` : line);
    }
  }

  static async start(opts: ServerOptions): Promise<ServerProcess> {
    const server = new ServerProcess(opts);
    const timeoutMs = opts.startTimeoutMs ?? 30_000;
    try {
      const line = await listeningLine(server.child, () => server.stderrTail, timeoutMs, 'server');
      server.port = line.port;
      server.s3Port = line.s3Port ?? 0;
    } catch (err) {
      server.kill();
      throw err;
    }
    // Give the listening log line (stderr) a moment to arrive; it is informational only.
    for (let i = 0; i < 20 && !server.listeningLog; i++) await new Promise((r) => setTimeout(r, 10));
    return server;
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  /** Why the server is gone, for error messages. */
  describeExit(): string {
    if (!this.exitInfo) return 'server is running';
    return `server exited (code ${this.exitInfo.code}, signal ${this.exitInfo.signal}); stderr tail: ${this.stderrTail.slice(-2000)}`;
  }

  /** A /proc/<pid>/status field in bytes (VmRSS, VmHWM), or undefined once the process is gone. */
  memoryField(field: 'VmRSS' | 'VmHWM'): number | undefined {
    try {
      const status = readFileSync(`/proc/${this.pid}/status`, 'latin1');
      const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status);
      return m ? Number(m[1]) * 1024 : undefined;
    } catch {
      return undefined;
    }
  }

  /** User + system CPU seconds the server has used so far (all its threads). */
  cpuSeconds(): number | undefined {
    return processCpuSeconds(this.pid);
  }

  /** SIGTERM, then SIGKILL after `graceMs`. Returns what happened, for the report. */
  async stop(graceMs = 15_000): Promise<{ graceful: boolean; alreadyExited: boolean; code: number | null; signal: NodeJS.Signals | null }> {
    this.stopRequested = true;
    if (this.alive) {
      this.child.kill('SIGTERM');
      const timedOut = await Promise.race([this.exited.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), graceMs).unref())]);
      if (timedOut) {
        this.child.kill('SIGKILL');
        await this.exited;
        return { graceful: false, alreadyExited: false, code: this.exitInfo!.code, signal: this.exitInfo!.signal };
      }
      return { graceful: true, alreadyExited: false, code: this.exitInfo!.code, signal: this.exitInfo!.signal };
    }
    await this.exited;
    return { graceful: false, alreadyExited: true, code: this.exitInfo!.code, signal: this.exitInfo!.signal };
  }

  /** Synchronous last resort (process exit handlers). */
  kill(): void {
    this.stopRequested = true;
    if (this.alive) {
      try {
        this.child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

/** Samples a server's VmRSS every `intervalMs` until stopped; keeps the peak. */
export class RssSampler {
  peak = 0;
  samples = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly server: ServerProcess,
    private readonly intervalMs = 50,
  ) {}

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
  }

  sample(): void {
    const rss = this.server.memoryField('VmRSS');
    if (rss === undefined) return;
    this.samples++;
    if (rss > this.peak) this.peak = rss;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.sample();
  }
}
