// Real S3-protocol servers for tests and benches (issue 19): s3rver (npm, in this process; quick,
// but it ignores write preconditions) and Ceph's radosgw on a single-node cluster started by
// scripts/ceph/start.sh (a production S3 implementation; needs Debian's Ceph packages).
/// <reference path="./s3rver.d.ts" />

import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';

export interface S3Endpoint {
  kind: 's3rver' | 'radosgw';
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Where the server keeps object bytes, for reports. */
  storage: string;
  stop(): Promise<void>;
}

export interface S3Skip {
  skip: string;
}

const REGION = 'us-east-1';

/** A client for `server` with path-style addressing (neither server has virtual-host DNS). */
export function s3ClientFor(server: S3Endpoint): S3Client {
  return new S3Client({
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });
}

/** s3rver on a free loopback port, its objects as files under `directory` (default: a new temp dir). */
export async function startS3rver(options: { directory?: string } = {}): Promise<S3Endpoint> {
  const directory = options.directory ?? mkdtempSync(join(tmpdir(), 'svc-s3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory });
  const { port } = (await server.run()) as { port: number };
  return {
    kind: 's3rver',
    endpoint: `http://127.0.0.1:${port}`,
    region: REGION,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    storage: `files under ${directory}`,
    async stop() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

interface CephStart {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  pids: Record<string, number>;
  dir: string;
}

const REQUIRED_BINARIES = ['ceph-mon', 'ceph-mgr', 'ceph-osd', 'radosgw', 'radosgw-admin', 'ceph-authtool', 'monmaptool'];
const START_TIMEOUT_MS = 90_000;
/** stop.sh takes at most 30 s by its own clock; the rest is for a busy machine. */
const STOP_TIMEOUT_MS = 45_000;

/**
 * radosgw on a fresh single-node Ceph cluster in a temp dir, or `{ skip }` saying why it could
 * not start (Ceph not installed, not Linux, a daemon that failed): a test skips with that
 * reason rather than failing where Ceph cannot run. Object bytes live in the OSD's memory
 * (memstore), `memstoreBytes` of capacity (default 2 GiB).
 */
export async function startRadosgw(options: { memstoreBytes?: number } = {}): Promise<S3Endpoint | S3Skip> {
  if (process.platform !== 'linux') return { skip: `radosgw: Ceph runs on Linux only (here ${process.platform})` };
  const missing = REQUIRED_BINARIES.filter((name) => !onPath(name));
  if (missing.length > 0) {
    return { skip: `radosgw: ${missing.join(', ')} not installed (apt-get install ceph-mon ceph-mgr ceph-osd radosgw ceph-common)` };
  }
  const scripts = cephScriptsDir();
  const dir = mkdtempSync(join(tmpdir(), 'svc-ceph-'));
  const env = { ...process.env, CEPH_MEMSTORE_BYTES: String(options.memstoreBytes ?? 2 * 1024 ** 3) };
  const started = await run(join(scripts, 'start.sh'), [dir], env, START_TIMEOUT_MS);
  const line = started.stdout.trim().split('\n').at(-1) ?? '';
  if (!started.ok || !line.startsWith('{')) {
    // start.sh stops what it started when it fails; stop.sh again in case it was killed by the timeout.
    await run(join(scripts, 'stop.sh'), [dir], env, STOP_TIMEOUT_MS);
    const reason = `radosgw: scripts/ceph/start.sh failed (${started.error}): ${tail(started.stderr)}${logTail(dir)}`;
    rmSync(dir, { recursive: true, force: true });
    return { skip: reason };
  }
  const cluster = JSON.parse(line) as CephStart;
  return {
    kind: 'radosgw',
    endpoint: cluster.endpoint,
    region: REGION,
    accessKeyId: cluster.accessKeyId,
    secretAccessKey: cluster.secretAccessKey,
    storage: `memory of ceph-osd pid ${cluster.pids.osd} (memstore)`,
    async stop() {
      await run(join(scripts, 'stop.sh'), [dir], env, STOP_TIMEOUT_MS);
      // stop.sh kills by pid; make sure, since a daemon left behind would hold memory and ports.
      const alive = Object.values(cluster.pids).filter((pid) => isDaemonOf(pid, cluster.dir));
      for (const pid of alive) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      if (alive.length > 0) throw new Error(`radosgw: stop.sh left pids ${alive.join(', ')} running (killed)`);
    },
  };
}

/**
 * Whether `pid` runs a daemon of the cluster in `dir` (started with `-c <dir>/ceph.conf`: a pid
 * the system gave to another process since is not one); a zombie (exited, not yet reaped by its
 * parent, often pid 1) does not run.
 */
function isDaemonOf(pid: number, dir: string): boolean {
  try {
    const state = /\) (\S)/.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1];
    return state !== 'Z' && state !== 'X' && readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(`${dir}/ceph.conf`);
  } catch {
    return false;
  }
}

function onPath(name: string): boolean {
  return (process.env.PATH ?? '').split(':').some((entry) => entry !== '' && existsSync(join(entry, name)));
}

/** scripts/ceph of the repository, found upwards from this file (test/helpers or dist/test/helpers). */
function cephScriptsDir(): string {
  let at = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(at, 'scripts', 'ceph');
    if (existsSync(join(candidate, 'start.sh'))) return candidate;
    const parent = dirname(at);
    if (parent === at) throw new Error('scripts/ceph/start.sh not found above ' + fileURLToPath(import.meta.url));
    at = parent;
  }
}

interface RunResult {
  ok: boolean;
  error: string;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: NodeJS.ProcessEnv, timeout: number): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(file, args, { env, timeout, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
      const reason = error ? (error.killed ? `timed out after ${timeout} ms` : `exit ${error.code ?? error.message}`) : '';
      resolve({ ok: !error, error: reason, stdout, stderr });
    });
  });
}

function tail(text: string, lines = 8): string {
  return text.trim().split('\n').slice(-lines).join(' | ');
}

/** The last lines of the daemons' output and logs, for a skip reason that says what went wrong. */
function logTail(dir: string): string {
  const names = ['rgw.x.out', 'osd.0.out', 'mgr.x.out', 'mon.a.out', 'osd-mkfs.log', 'client.rgw.x.log', 'osd.0.log', 'mon.a.log'];
  const logs = names
    .map((name) => join(dir, 'log', name))
    .filter((file) => existsSync(file) && readFileSync(file, 'utf8').trim() !== '')
    .slice(0, 3);
  return logs.map((file) => ` [${file.split('/').at(-1)}: ${tail(readFileSync(file, 'utf8'), 3)}]`).join('');
}
