import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { backendEnv } from './backends.js';

const MAIN = fileURLToPath(new URL('../../dist/server/main.js', import.meta.url));

export interface TestServer {
  url: string;
  port: number;
  /** The model runtime listener. */
  modelUrl: string;
  modelPort: number;
  /** The S3 listener (SVC_S3_API_PORT: 0 here; null when a test turns it off). */
  s3Url: string;
  s3Port: number | null;
  root: string;
  proc: ChildProcess;
  stderr: () => string;
  /** SIGTERM and wait. */
  stop(): Promise<void>;
  /** SIGKILL and wait: the crash case. */
  kill9(): Promise<void>;
  /** Peak resident memory of the server process, in bytes, from /proc. */
  rss(): number;
}

export function tempRoot(prefix = 'svc-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * Starts `svc serve` as a real process on a free port with its own data directory. A directory
 * made here is removed by stop(); one passed in belongs to the caller.
 */
export async function startServer(env: Record<string, string> = {}, given?: string): Promise<TestServer> {
  const root = given ?? tempRoot();
  const backend = await backendEnv(root);
  const proc = spawn(process.execPath, [MAIN, 'serve'], {
    env: { ...process.env, SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_S3_API_PORT: '0', SVC_FS_ROOT: root, SVC_LOG_LEVEL: 'warn', ...backend, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (d) => (err += d));
  const { port, modelPort, s3Port } = await new Promise<{ port: number; modelPort: number; s3Port: number | null }>((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d;
      const line = out.split('\n').find((l) => l.includes('"listening"'));
      if (line) {
        proc.stdout!.off('data', onData);
        resolve(JSON.parse(line));
      }
    };
    proc.stdout!.on('data', onData);
    proc.once('exit', (code) => reject(new Error(`server exited with ${code}: ${err}`)));
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    modelUrl: `http://127.0.0.1:${modelPort}`,
    modelPort,
    s3Url: `http://127.0.0.1:${s3Port}`,
    s3Port,
    root,
    proc,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      await exited;
      if (!given) fs.rmSync(root, { recursive: true, force: true });
    },
    async kill9() {
      proc.kill('SIGKILL');
      await exited;
    },
    rss() {
      const status = fs.readFileSync(`/proc/${proc.pid}/status`, 'utf8');
      return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
    },
  };
}
