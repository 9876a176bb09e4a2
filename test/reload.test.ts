// `svc reload` (docs/security.md, "Tenant policy and budgets"): SIGHUP to the server that holds
// the data directory, found by the pid in its svc.lock, and to nothing else: the server started
// under a wrapper process as `npm start` starts it (a shell between), the wrapper untouched; a
// stale pid in the lock file (its process alive but not holding the file) is not signalled.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { tempRoot } from './helpers/server.js';

const run = promisify(execFile);
const SVC = fileURLToPath(new URL('../bin/svc.js', import.meta.url));
const MAIN = fileURLToPath(new URL('../dist/server/main.js', import.meta.url));

async function reload(root: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, SVC_FS_ROOT: root };
  return run(process.execPath, [SVC, 'reload'], { env }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}

async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 20_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('svc reload', () => {
  const roots: string[] = [];
  afterAll(() => {
    for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
  });

  it('signals the server of SVC_FS_ROOT alone, not the shell that started it', async () => {
    const root = tempRoot('svc-reload-');
    roots.push(root);
    const policyFile = path.join(root, 'policy.json');
    fs.writeFileSync(policyFile, JSON.stringify({ default: { requestsPerMinute: 6000 } }));
    // A shell that waits for the server, as npm's `sh -c` does: SIGHUP would end it.
    const wrapper = spawn('sh', ['-c', `"${process.execPath}" "${MAIN}" serve; echo "wrapper: server ended $?"`], {
      env: { ...process.env, SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_FS_ROOT: root, SVC_LOG_LEVEL: 'info', SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 'reload-test-secret-0123456789abcdef', SVC_TENANT_POLICY_FILE: policyFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    wrapper.stdout!.on('data', (d) => (out += d));
    wrapper.stderr!.on('data', (d) => (err += d));
    let wrapperExited = false;
    wrapper.once('exit', () => (wrapperExited = true));
    try {
      await until(() => out.includes('"listening"'), 'the server to listen');
      const serverPid = Number(fs.readFileSync(path.join(root, 'svc.lock'), 'utf8').trim());
      expect(serverPid).not.toBe(wrapper.pid);

      fs.writeFileSync(policyFile, JSON.stringify({ default: { requestsPerMinute: 6000 }, tenants: { acme: { maxObjectBytes: 1000 } } }));
      const done = await reload(root);
      expect(done).toMatchObject({ code: 0, stdout: `svc reload: sent SIGHUP to process ${serverPid} (the server of ${root})\n` });
      await until(() => err.includes('tenant policy reloaded'), 'the reload in the log');
      expect(err).toContain('"tenants":1');
      // Both still run: the signal went to the server alone.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(wrapperExited).toBe(false);
      expect(() => process.kill(serverPid, 0)).not.toThrow();
      expect(out).not.toContain('wrapper: server ended');
    } finally {
      wrapper.kill('SIGTERM');
      const serverPid = Number(fs.readFileSync(path.join(root, 'svc.lock'), 'utf8').trim());
      try {
        process.kill(serverPid, 'SIGTERM');
      } catch {
        // already gone
      }
      await until(() => wrapperExited, 'the wrapper to end');
    }
  });

  it('with no server holding the directory it signals nothing and exits 1', async () => {
    const root = tempRoot('svc-reload-');
    roots.push(root);
    expect((await reload(root)).code).toBe(1);
    // A stale pid that names a live process not holding the lock file (this test's own).
    fs.writeFileSync(path.join(root, 'svc.lock'), `${process.pid}\n`);
    const stale = await reload(root);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toContain(`no running svc server holds the data directory ${root}`);
  });
});
