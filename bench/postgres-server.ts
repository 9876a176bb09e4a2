/**
 * A throwaway PostgreSQL cluster from the system's binaries (Debian's `postgresql` package): initdb
 * into a fresh temporary directory, postgres on a free loopback port with its unix socket in that
 * directory, fast and unsafe settings, removed again by stop(). Shared by the tests
 * (test/helpers/postgres.ts) and the benchmarks so that there is one copy of the logic.
 *
 * initdb and postgres refuse to run as root: as root they run as Debian's `postgres` user (or a
 * dedicated `svc-pg` user created here when that is missing), with the directory owned by it.
 * postgres is exec'ed directly through setpriv (no intermediate process), so the child we hold is
 * the postmaster itself: SIGINT is a fast shutdown, and its exit means every backend has exited.
 * A guard process (startGuard) stops the cluster if this process dies without calling stop().
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export type PgServer = {
  /** URL of the database created at start (`svc_test`), superuser `postgres`, trust auth. */
  url: string;
  port: number;
  /** The temporary directory holding the data directory, the socket and the log. */
  dir: string;
  /** The postmaster's process id. */
  pid: number;
  stop(): Promise<void>;
  /** Creates a database and returns its URL. */
  createDatabase(name: string): Promise<string>;
};

export const POSTGRES_MISSING = 'PostgreSQL is not installed (apt-get install postgresql)';
const SUPERUSER = 'postgres';
const FIRST_DATABASE = 'svc_test';
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 30_000;

/** Directory of initdb/postgres: Debian's newest /usr/lib/postgresql/N/bin, else `pg_config --bindir`. */
export function findPostgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => /^\d+(\.\d+)?$/.test(v) && existsSync(path.join(root, v, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions.length > 0) return path.join(root, versions[0]!, 'bin');
  }
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (existsSync(path.join(dir, 'initdb')) && existsSync(path.join(dir, 'postgres'))) return dir;
  } catch {
    // no pg_config on PATH
  }
  return null;
}

type RunAs = { uid: number; gid: number } | null;

function idOf(user: string): { uid: number; gid: number } | null {
  try {
    const uid = Number(execFileSync('id', ['-u', user], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    const gid = Number(execFileSync('id', ['-g', user], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    return { uid, gid };
  } catch {
    return null;
  }
}

/** The non-root user to run the cluster as, or null when we are not root. */
function clusterUser(): RunAs {
  if (process.getuid?.() !== 0) return null;
  const existing = idOf('postgres') ?? idOf('svc-pg');
  if (existing) return existing;
  try {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'svc-pg'], { stdio: 'ignore' });
  } catch {
    // another process may have created it meanwhile; looked up below
  }
  const created = idOf('svc-pg');
  if (!created) throw new Error('running as root and could not create a non-root user for PostgreSQL (useradd svc-pg failed)');
  return created;
}

/** argv that runs `cmd` as `as` (setpriv execs it: no process in between). */
function asUser(as: RunAs, cmd: string, args: string[]): [string, string[]] {
  if (!as) return [cmd, args];
  return ['setpriv', [`--reuid=${as.uid}`, `--regid=${as.gid}`, '--init-groups', '--reset-env', '--', cmd, ...args]];
}

/** os.tmpdir(), unless the cluster's user could not traverse it (a TMPDIR under /root): then /tmp. */
function scratchParent(as: RunAs): string {
  const tmp = os.tmpdir();
  if (as && (statSync(tmp).mode & 0o001) === 0) return '/tmp';
  return tmp;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function logTail(logFile: string): string {
  try {
    return readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * A guard that outlives us: a shell reading a pipe from this process. When this process dies in
 * any way (a test worker killed by a signal runs no exit hook), the pipe closes, and the guard
 * takes the postmaster down (SIGQUIT, immediate) and removes the directory. It ignores the
 * terminal's signals so that a Ctrl-C does not stop it before its work; stop() kills it first.
 */
const GUARD_SCRIPT = `trap '' INT TERM HUP
cat >/dev/null
kill -QUIT "$1" 2>/dev/null
for i in $(seq 100); do kill -0 "$1" 2>/dev/null || break; grep -q '^[0-9]* ([^)]*) Z' /proc/$1/stat 2>/dev/null && break; sleep 0.1; done
rm -rf "$2"`;

function startGuard(postmasterPid: number, dir: string): ChildProcess {
  const guard = spawn('sh', ['-c', GUARD_SCRIPT, 'svc-pg-guard', String(postmasterPid), dir], { stdio: ['pipe', 'ignore', 'ignore'] });
  guard.on('error', () => {}); // best effort: without sh the cluster is still stopped by stop()
  guard.unref(); // the guard does not keep this process alive
  (guard.stdin as unknown as { unref?: () => void }).unref?.();
  return guard;
}

/** Starts a cluster, or says why it cannot (binaries missing). */
export async function startPostgres(): Promise<PgServer | { skip: string }> {
  const bin = findPostgresBinDir();
  if (!bin) return { skip: POSTGRES_MISSING };
  const as = clusterUser();
  const dir = mkdtempSync(path.join(scratchParent(as), 'svc-pg-'));
  try {
    if (as) chownSync(dir, as.uid, as.gid);
    const dataDir = path.join(dir, 'data');
    await run(...asUser(as, path.join(bin, 'initdb'), [
      '-D', dataDir, '-U', SUPERUSER, '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync', '--no-instructions',
    ]), { cwd: dir });
    // A free port can be taken by someone else before postgres binds it: try a few.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      try {
        const server = await launch(bin, as, dir, dataDir, port);
        await server.createDatabase(FIRST_DATABASE).catch(async (err) => {
          await server.stop();
          throw err;
        });
        return server;
      } catch (err) {
        if (attempt >= 3 || !(err instanceof PortTakenError)) throw err;
      }
    }
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

class PortTakenError extends Error {}

async function launch(bin: string, as: RunAs, dir: string, dataDir: string, port: number): Promise<PgServer> {
  const logFile = path.join(dir, `postgres-${port}.log`);
  const logFd = openSync(logFile, 'a');
  const settings = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: dir,
    // Throwaway data: durability costs time and buys nothing here.
    fsync: 'off',
    synchronous_commit: 'off',
    full_page_writes: 'off',
    shared_buffers: '16MB',
    max_connections: '128',
    // Statements per operation, counted by PostgreSQL itself (benches read pg_stat_statements), when the library is there.
    ...(existsSync(path.join(bin, '..', 'lib', 'pg_stat_statements.so')) ? { shared_preload_libraries: 'pg_stat_statements' } : {}),
  };
  const args = ['-D', dataDir, ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  const child = spawn(...asUser(as, path.join(bin, 'postgres'), args), { cwd: dir, stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);
  const guard = startGuard(child.pid!, dir);
  let exited = false;
  const exit = new Promise<void>((resolve) => child.once('exit', () => { exited = true; resolve(); }));

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited) {
      guard.kill('SIGKILL');
      const tail = logTail(logFile);
      if (/could not bind|Address already in use/.test(tail)) throw new PortTakenError(`port ${port} taken`);
      throw new Error(`postgres exited before accepting connections:\n${tail}`);
    }
    try {
      await run(path.join(bin, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port), '-U', SUPERUSER, '-d', 'postgres']);
      break;
    } catch {
      if (Date.now() > deadline) {
        guard.kill('SIGKILL');
        child.kill('SIGQUIT');
        await exit;
        throw new Error(`postgres did not accept connections within ${READY_TIMEOUT_MS} ms:\n${logTail(logFile)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      guard.kill('SIGKILL'); // the cluster is stopped here, in order; the guard must not race it
      if (!exited) {
        child.kill('SIGINT'); // fast shutdown: roll back sessions, checkpoint, exit
        const timer = setTimeout(() => child.kill('SIGQUIT'), STOP_TIMEOUT_MS);
        await exit;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    })();
    return stopping;
  };
  const urlOf = (db: string) => `postgres://${SUPERUSER}@127.0.0.1:${port}/${db}`;
  return {
    url: urlOf(FIRST_DATABASE),
    port,
    dir,
    pid: child.pid!,
    stop,
    async createDatabase(name: string): Promise<string> {
      if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`database name ${JSON.stringify(name)} is not a plain identifier`);
      await run(path.join(bin, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', SUPERUSER, name]);
      return urlOf(name);
    },
  };
}

/** Starts a cluster or throws the skip reason (for the benchmarks, where absence is an error). */
export async function requirePostgres(): Promise<PgServer> {
  const started = await startPostgres();
  if ('skip' in started) throw new Error(started.skip);
  return started;
}

