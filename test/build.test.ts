// Building and starting beside running servers, as a user does who tries several nodes from one
// checkout: `npm start` does not compile dist/ again when it is fresh, a build renames what it changes
// into place (never truncating a file a running server has mapped), and a second server on a port in
// use says so at once.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { publishBytes } from '../dist/native/publish.js';
import { modelFetch } from './helpers/openapi.js';
import { tempRoot } from './helpers/server.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const UWS_ADDON = path.join(REPO, `dist/native/uws-${process.versions.modules}.node`);

interface NpmRun {
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** `npm <args>` in the checkout, in a process group of its own (npm, its shell and the server). */
function npm(args: string[], env: Record<string, string> = {}): NpmRun {
  const proc = spawn('npm', args, { cwd: REPO, detached: true, env: { ...process.env, SVC_LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout!.on('data', (d) => (stdout += d));
  proc.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, stdout: () => stdout, stderr: () => stderr, exited };
}

const started: NpmRun[] = [];
const roots: string[] = [];
afterEach(async () => {
  for (const run of started.splice(0)) {
    if (run.proc.exitCode === null) {
      try {
        process.kill(-run.proc.pid!, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    await run.exited;
  }
  for (const root of roots.splice(0)) fs.rmSync(root, { recursive: true, force: true });
});

function dataRoot(): string {
  const root = tempRoot();
  roots.push(root);
  return root;
}

/** `npm start` with its own data directory and free ports: resolves with its ports once it listens. */
async function npmStart(env: Record<string, string> = {}): Promise<{ run: NpmRun; port: number; modelPort: number }> {
  const run = npm(['start'], { SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_FS_ROOT: dataRoot(), ...env });
  started.push(run);
  const ports = await new Promise<{ port: number; modelPort: number }>((resolve, reject) => {
    const look = () => {
      const line = run.stdout().split('\n').find((l) => l.startsWith('{') && l.includes('"listening"'));
      if (line) resolve(JSON.parse(line));
    };
    run.proc.stdout!.on('data', look);
    void run.exited.then((code) => reject(new Error(`npm start exited with ${code}: ${run.stderr()}`)));
  });
  return { run, ...ports };
}

/** A blob through the server and back: the native addons (hashing, copies) and uWS all take part. */
async function roundTrip(port: number): Promise<void> {
  const body = Buffer.alloc(3 << 20, 7);
  body.write(`round trip ${Date.now()}`);
  const put = await fetch(`http://127.0.0.1:${port}/api/v1/blobs`, { method: 'POST', body });
  expect(put.status).toBe(201);
  const { blob } = (await put.json()) as { blob: { id: string } };
  const get = await fetch(`http://127.0.0.1:${port}/api/v1/blobs/${blob.id}`);
  expect(get.status).toBe(200);
  expect(Buffer.from(await get.arrayBuffer()).equals(body)).toBe(true);
}

describe('builds and starts beside a running server', () => {
  it('npm run build and a second npm start leave the first server serving; a build rewrites only what changed, by rename', async () => {
    // The first server maps an addon that differs from what a build makes (one byte appended, which
    // the loader ignores): the build must replace it, and a replacement in place would crash the server.
    const canonical = npm(['run', 'build']);
    expect(await canonical.exited, canonical.stderr()).toBe(0);
    const built = fs.readFileSync(UWS_ADDON);
    const staged = `${UWS_ADDON}.test.tmp`;
    fs.writeFileSync(staged, Buffer.concat([built, Buffer.from([0])]));
    fs.renameSync(staged, UWS_ADDON);
    const mappedInode = fs.statSync(UWS_ADDON).ino;
    const first = await npmStart();
    expect(fs.readFileSync(`/proc/${await serverPid(first.run)}/maps`, 'utf8')).toContain(UWS_ADDON);

    const untouched = path.join(REPO, 'dist/server/main.js');
    const untouchedInode = fs.statSync(untouched).ino;
    const build = npm(['run', 'build']);
    expect(await build.exited, build.stderr()).toBe(0);
    await roundTrip(first.port);
    expect(fs.statSync(UWS_ADDON).ino).not.toBe(mappedInode);
    expect(fs.readFileSync(UWS_ADDON).equals(built)).toBe(true);
    expect(fs.statSync(untouched).ino).toBe(untouchedInode);

    const second = await npmStart();
    await roundTrip(second.port);
    await roundTrip(first.port);
    expect((await modelFetch(`http://127.0.0.1:${first.modelPort}/health`)).status).toBe(200);
  });

  it('npm start on a fresh build does not compile', async () => {
    const before = fs.statSync(path.join(REPO, 'dist/.build-stamp')).mtimeMs;
    const server = await npmStart();
    expect(fs.statSync(path.join(REPO, 'dist/.build-stamp')).mtimeMs).toBe(before);
    expect(server.run.stdout()).not.toContain('tsc');
    await roundTrip(server.port);
  });

  it('a second server on a port in use fails with a clear message within seconds', async () => {
    const first = await npmStart();
    for (const [variable, port] of [['SVC_HTTP_PORT', first.port], ['HTTP_PORT', first.modelPort]] as const) {
      const began = Date.now();
      const clash = npm(['start'], { SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_FS_ROOT: dataRoot(), [variable]: String(port) });
      started.push(clash);
      expect(await clash.exited).toBe(1);
      expect(clash.stderr()).toContain(`svc: cannot listen on 127.0.0.1:${port} (${variable}): the port is in use or not available`);
      // npm's own start is most of it; opening the stores first took 20 s where a model had to load.
      expect(Date.now() - began).toBeLessThan(10_000);
    }
    await roundTrip(first.port);
  });
});

describe('publishing a build output', () => {
  it('renames a changed file into place: a reader of the old one keeps reading it whole', () => {
    const dir = tempRoot('svc-publish-');
    try {
      const target = path.join(dir, 'addon.node');
      fs.writeFileSync(target, 'old bytes');
      const reader = fs.openSync(target, 'r');
      const inode = fs.statSync(target).ino;
      publishBytes(target, Buffer.from('new bytes, longer'));
      expect(fs.readFileSync(target, 'utf8')).toBe('new bytes, longer');
      expect(fs.statSync(target).ino).not.toBe(inode);
      const old = Buffer.alloc(64);
      expect(old.toString('utf8', 0, fs.readSync(reader, old, 0, 64, 0))).toBe('old bytes');
      fs.closeSync(reader);
      const same = fs.statSync(target).ino;
      publishBytes(target, Buffer.from('new bytes, longer'));
      expect(fs.statSync(target).ino).toBe(same);
      expect(fs.readdirSync(dir)).toEqual(['addon.node']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** The pid of the node process under `npm start` (npm, then sh -c 'node dist/server/main.js serve', then node). */
async function serverPid(run: NpmRun): Promise<number> {
  const children = (pid: number): number[] => {
    const tasks = fs.readdirSync(`/proc/${pid}/task`);
    return tasks.flatMap((t) => fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
  };
  const pending = [run.proc.pid!];
  while (pending.length) {
    const pid = pending.shift()!;
    const [program, main] = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (path.basename(program!) === 'node' && main === 'dist/server/main.js') return pid;
    pending.push(...children(pid));
  }
  throw new Error('no server process under npm start');
}
