// The `svc` process as an operator meets it: one server per port and per data directory (a
// second start fails with a clear message, and kill -9 never leaves the directory locked), every
// subcommand honours --help, the command installs under its own name, and the client fails fast
// when no server is there.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type S3rverProcess, startS3rverProcess } from './helpers/backends.js';
import { startPostgres } from './helpers/postgres.js';
import { startServer, tempRoot } from './helpers/server.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const MAIN = path.join(REPO, 'dist/server/main.js');
/** The same advisory locks the server takes, for another process's view of the data directory. */
const { tryLock } = createRequire(import.meta.url)('fs-native-extensions') as { tryLock(fd: number): boolean };

/** Whether another process could take the data directory's lock now (it is released at once). */
function lockFree(root: string): boolean {
  const fd = fs.openSync(path.join(root, 'svc.lock'), 'r+');
  try {
    return tryLock(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Runs `svc serve` to its exit (bounded): its status and stderr. */
function serveToExit(env: Record<string, string>): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [MAIN, 'serve'], { env: { ...process.env, SVC_LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    proc.stderr.on('data', (d) => (stderr += d));
    proc.stdout.on('data', (d) => (stdout += d));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, stdout });
    });
  });
}

/** A port nothing listens on (bound, then released). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('one server per port and per data directory', () => {
  it('a second server on the same port exits 1 naming the port; the first keeps serving', async () => {
    const first = await startServer();
    try {
      const second = await serveToExit({ SVC_HTTP_PORT: String(first.port), HTTP_PORT: '0', SVC_FS_ROOT: tempRoot() });
      expect(second.code).toBe(1);
      expect(second.stderr).toContain(`cannot listen on 127.0.0.1:${first.port} (SVC_HTTP_PORT)`);
      const modelClash = await serveToExit({ SVC_HTTP_PORT: '0', HTTP_PORT: String(first.modelPort), SVC_FS_ROOT: tempRoot() });
      expect(modelClash.code).toBe(1);
      expect(modelClash.stderr).toContain(`cannot listen on 127.0.0.1:${first.modelPort} (HTTP_PORT)`);
      expect((await fetch(`${first.url}/api/health/live`)).status).toBe(200);
    } finally {
      await first.stop();
    }
  });

  it('a second server on the same data directory exits 1 naming the holder, and touches none of its files', async () => {
    const first = await startServer();
    try {
      // A temporary block file of a running upload, which a second start's cleanup would remove.
      const tmp = path.join(first.root, 'blocks', '.tmp', 'in-flight');
      fs.writeFileSync(tmp, 'x');
      const second = await serveToExit({ SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_FS_ROOT: first.root });
      expect(second.code).toBe(1);
      expect(second.stderr).toContain(`the data directory ${first.root} is in use by process ${first.proc.pid}`);
      expect(second.stdout).not.toContain('listening');
      expect(fs.existsSync(tmp)).toBe(true);
    } finally {
      await first.stop();
    }
  });

  it('after kill -9 the data directory opens again at once', async () => {
    const root = tempRoot();
    try {
      const first = await startServer({}, root);
      await first.kill9();
      const second = await startServer({}, root);
      expect((await fetch(`${second.url}/api/health/live`)).status).toBe(200);
      await second.stop();
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
  it('the lock is an advisory lock on svc.lock naming its holder, taken by exactly one of several starts at once', async () => {
    const root = tempRoot();
    try {
      const first = await startServer({}, root);
      expect(lockFree(root)).toBe(false);
      expect(fs.readFileSync(path.join(root, 'svc.lock'), 'utf8')).toBe(`${first.proc.pid}\n`);
      await first.kill9();
      // The file stays behind; the kernel dropped the lock with the process.
      expect(lockFree(root)).toBe(true);
      const racers = [0, 1, 2].map(() => serveToExitOrListening(root));
      const outcomes = await Promise.all(racers.map((r) => r.outcome));
      expect(outcomes.filter((o) => o === 'listening')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'in use')).toHaveLength(2);
      for (const r of racers) r.proc.kill('SIGKILL');
      await Promise.all(racers.map((r) => r.exited));
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

/** Starts `svc serve` on `root` with free ports: whether it came up or was refused the directory. */
function serveToExitOrListening(root: string) {
  const proc = spawn(process.execPath, [MAIN, 'serve'], { env: { ...process.env, SVC_LOG_LEVEL: 'warn', SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_FS_ROOT: root }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const outcome = new Promise<'listening' | 'in use' | string>((resolve) => {
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => {
      stdout += d;
      if (stdout.includes('"listening"')) resolve('listening');
    });
    proc.stderr.on('data', (d) => (stderr += d));
    proc.once('exit', (code) => resolve(code === 1 && stderr.includes(`the data directory ${root} is in use by process`) ? 'in use' : `exit ${code}: ${stderr}`));
  });
  return { proc, exited, outcome };
}

// A configuration that cannot work ends the start with exit status 2 and one line naming the
// variable and the cause: real s3rver, real closed ports, no mocks.
describe('a clean stop', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal}: the listeners close, the process exits 0, and its last log line says it stopped`, async () => {
      const server = await startServer({ SVC_LOG_LEVEL: 'info' });
      const exited = new Promise<number | null>((resolve) => server.proc.once('exit', (code) => resolve(code)));
      server.proc.kill(signal);
      expect(await exited).toBe(0);
      await server.stop();
      const lines = server.stderr().trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.some((line) => line.msg === 'listening')).toBe(true);
      expect(lines.at(-1)).toEqual({ time: expect.any(String), level: 'info', msg: 'stopped', signal, ms: expect.any(Number) });
      expect(lines.filter((line) => line.msg === 'stopped')).toHaveLength(1);
      // Closed: nothing answers on its port any more.
      await expect(fetch(`${server.url}/api/health/ready`)).rejects.toThrow();
    });
  }
});

describe('a configuration that cannot work', () => {
  let s3: S3rverProcess;
  let endpoint: string;
  const s3Dir = tempRoot('svc-test-s3-');
  const credentials = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' };

  beforeAll(async () => {
    s3 = await startS3rverProcess(path.join(s3Dir, 's3'));
    endpoint = `http://127.0.0.1:${s3.port}`;
    const client = new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
    await client.send(new CreateBucketCommand({ Bucket: 'present' }));
    client.destroy();
  });
  afterAll(async () => {
    await s3?.close();
    fs.rmSync(s3Dir, { recursive: true, force: true });
  });

  /** `svc serve` on a fresh directory with `env`: exit 2, nothing on stdout, exactly `line` on stderr (one line, no stack frame). */
  async function refused(env: Record<string, string>, line: string): Promise<void> {
    const root = tempRoot();
    try {
      const outcome = await serveToExit({ SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_FS_ROOT: root, ...env });
      expect(outcome).toEqual({ code: 2, stdout: '', stderr: `${line}\n` });
      expect(outcome.stderr).not.toMatch(/^\s+at /m);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  }

  it('s3 with a bucket that does not exist: SVC_S3_BUCKET', async () => {
    await refused({ SVC_BLOB_BACKEND: 's3', SVC_S3_ENDPOINT: endpoint, SVC_S3_BUCKET: 'missing', ...credentials },
      `svc: SVC_S3_BUCKET: the bucket "missing" does not exist at ${endpoint} (404 to HeadBucket)`);
  });

  it('pg-s3 with the same missing bucket: SVC_S3_BUCKET', async () => {
    const port = await freePort();
    await refused({ SVC_BLOB_BACKEND: 'pg-s3', SVC_PG_URL: `postgres://postgres@127.0.0.1:${port}/svc`, SVC_S3_ENDPOINT: endpoint, SVC_S3_BUCKET: 'missing', ...credentials },
      `svc: SVC_S3_BUCKET: the bucket "missing" does not exist at ${endpoint} (404 to HeadBucket)`);
  });

  it('pg-s3 with a PostgreSQL that refuses connections: SVC_PG_URL, without its password', async () => {
    const port = await freePort();
    await refused({ SVC_BLOB_BACKEND: 'pg-s3', SVC_PG_URL: `postgres://postgres:secret@127.0.0.1:${port}/svc`, SVC_S3_ENDPOINT: endpoint, SVC_S3_BUCKET: 'present', ...credentials },
      `svc: SVC_PG_URL: cannot connect to 127.0.0.1:${port}: connection refused`);
  });

  it('pg-s3 with a database or a role PostgreSQL does not have: SVC_PG_URL', async (ctx) => {
    const pg = await startPostgres();
    if ('skip' in pg) return ctx.skip(pg.skip);
    try {
      const port = new URL(pg.url).port;
      const env = { SVC_BLOB_BACKEND: 'pg-s3', SVC_S3_ENDPOINT: endpoint, SVC_S3_BUCKET: 'present', ...credentials };
      await refused({ ...env, SVC_PG_URL: `postgres://postgres@127.0.0.1:${port}/nosuchdb` }, `svc: SVC_PG_URL: the database "nosuchdb" does not exist at 127.0.0.1:${port}`);
      await refused({ ...env, SVC_PG_URL: `postgres://nobody:secret@127.0.0.1:${port}/svc_test` }, `svc: SVC_PG_URL: PostgreSQL at 127.0.0.1:${port} refused the login: role "nobody" does not exist`);
    } finally {
      await pg.stop();
    }
  });

  it('an S3 endpoint that refuses connections: SVC_S3_ENDPOINT (s3 and pg-s3)', async () => {
    const port = await freePort();
    const line = `svc: SVC_S3_ENDPOINT: cannot connect to 127.0.0.1:${port}: connection refused`;
    await refused({ SVC_BLOB_BACKEND: 's3', SVC_S3_ENDPOINT: `http://127.0.0.1:${port}`, SVC_S3_BUCKET: 'present', ...credentials }, line);
    await refused({ SVC_BLOB_BACKEND: 'pg-s3', SVC_PG_URL: 'postgres://postgres@127.0.0.1:1/svc', SVC_S3_ENDPOINT: `http://127.0.0.1:${port}`, SVC_S3_BUCKET: 'present', ...credentials }, line);
  });

  it('credentials the S3 server does not know: AWS_ACCESS_KEY_ID', async () => {
    // s3rver checks the access key id (it does not check version 4 signatures); radosgw checks both.
    await refused({ SVC_BLOB_BACKEND: 's3', SVC_S3_ENDPOINT: endpoint, SVC_S3_BUCKET: 'present', AWS_ACCESS_KEY_ID: 'NOBODY', AWS_SECRET_ACCESS_KEY: 'wrong' },
      `svc: AWS_ACCESS_KEY_ID: the S3 server at ${endpoint} refused access to the bucket "present" with these credentials (403 to HeadBucket)`);
  });

  it('an unknown backend: SVC_BLOB_BACKEND', async () => {
    await refused({ SVC_BLOB_BACKEND: 'nfs' }, 'svc: invalid configuration: SVC_BLOB_BACKEND: "nfs" must be one of fs, pg-s3, s3');
  });
});

describe('the command line', () => {
  it('every subcommand honours --help and -h: its usage on stdout, exit 0, no server started', async () => {
    const env = { ...process.env, SVC_HTTP_PORT: '1', SVC_FS_ROOT: '/nonexistent/svc' };
    const root = tempRoot();
    for (const command of ['serve', 'put', 'get', 'stat', 'ls', 'gc', 'models', 'catalog']) {
      for (const args of [[command, '--help'], [command, '-h'], ['help', command]]) {
        const { stdout } = await run(process.execPath, [MAIN, ...args], { env, timeout: 10_000 });
        expect([args, stdout.includes(`svc ${command}`) && /Usage/.test(stdout)]).toEqual([args, true]);
      }
    }
    // A client command's help is its own: `svc get --help` does not describe put.
    const { stdout: getHelp } = await run(process.execPath, [MAIN, 'get', '--help'], { env, timeout: 10_000 });
    expect(getHelp).not.toContain('svc put');
    // After `--`, --help is an operand: a file of that name.
    const operand = await run(process.execPath, [MAIN, 'put', '--', '--help'], { env, cwd: root, timeout: 10_000 }).catch((e) => e);
    expect(operand.code).toBe(1);
    expect(operand.stderr).toContain('cannot read --help');
    const bad = await run(process.execPath, [MAIN, 'serve', '--port', '1'], { timeout: 10_000 }).catch((e) => e);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("svc serve: Unknown option '--port': the server is configured by environment variables only (svc serve --help)\n");
    // A bare `svc` asks which command instead of starting a server.
    try {
      const bare = await run(process.execPath, [MAIN], { env: { ...process.env, SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_FS_ROOT: root }, timeout: 10_000 }).catch((e) => e);
      expect(bare.code).toBe(2);
      expect(bare.stderr).toMatch(/^svc: which command\?/);
      expect(fs.readdirSync(root)).toEqual([]);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('installs under its own name from the checkout, and no page tells a user to run npx svc', async () => {
    const prefix = tempRoot('svc-prefix-');
    try {
      await run('npm', ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', REPO], { timeout: 60_000 });
      const { stdout } = await run(path.join(prefix, 'bin', 'svc'), ['--version'], { cwd: prefix });
      const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8'));
      expect(stdout.trim()).toBe(pkg.version);
    } finally {
      fs.rmSync(prefix, { recursive: true, force: true });
    }
    const pages = ['README.md', ...fs.readdirSync(path.join(REPO, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    const helps: [string, string][] = [];
    for (const args of [['--help'], ...['serve', 'put', 'get', 'stat', 'ls', 'gc'].map((c) => [c, '--help'])]) {
      helps.push([`svc ${args.join(' ')}`, (await run(process.execPath, [MAIN, ...args])).stdout]);
    }
    // npx and npm exec fetch the public package of that name anywhere outside the checkout.
    for (const [name, text] of [...pages.map((p): [string, string] => [p, fs.readFileSync(path.join(REPO, p), 'utf8')]), ...helps]) {
      expect([name, /\b(npx|npm exec|npm x)\s+(--\s+)?svc\b/.test(text)]).toEqual([name, false]);
    }
  });

  it('a client pointed at no server fails at once; one pointed at the model port is told so', async () => {
    const port = await freePort();
    const started = Date.now();
    const refused = await run(process.execPath, [MAIN, 'ls', '--server', `http://127.0.0.1:${port}`]).catch((e) => e);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`no server at 127.0.0.1:${port} (connection refused)`);
    expect(Date.now() - started).toBeLessThan(10_000);
    const server = await startServer();
    try {
      const wrong = await run(process.execPath, [MAIN, 'ls', '--server', server.modelUrl]).catch((e) => e);
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain("model runtime's port");
      expect(wrong.stderr).toContain('SVC_HTTP_PORT');
    } finally {
      await server.stop();
    }
  });
});
