/**
 * A fresh fs server for a same-run A/B (bench/tenant-accounting.ts, bench/house-ab.ts): security
 * on, dev tokens signed with `secret`, and a tenant policy file, in a temporary directory removed
 * by `stop`; and the commit a built worktree was made from.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, expectStatus } from './json-call.js';
import { ServerProcess } from './server-process.js';

export interface PolicyServer {
  server: ServerProcess;
  /** A bearer token of `tenant` with every scope the benches use. */
  token(tenant: string): Promise<string>;
  stop(): Promise<void>;
}

/** `entry` (a built dist/server/main.js) on a fresh data directory named after `prefix`. */
export async function startPolicyServer(entry: string, prefix: string, policy: unknown, secret: string): Promise<PolicyServer> {
  const root = mkdtempSync(path.join(os.tmpdir(), `svc-bench-${prefix}-`));
  const policyFile = path.join(root, 'policy.json');
  writeFileSync(policyFile, JSON.stringify(policy));
  const server = await ServerProcess.start({
    entry, fsRoot: path.join(root, 'data'), durability: 'relaxed',
    env: { SVC_BLOB_BACKEND: 'fs', SVC_LOG_LEVEL: 'error', SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: secret, SVC_TENANT_POLICY_FILE: policyFile },
  });
  return {
    server,
    async token(tenant) {
      const t = expectStatus(await call(server.port, 'POST', '/dev/token', undefined, { org_id: tenant, sub: 'bench', ttl_seconds: 3600, scope: 'doc.* meta.* schema.* blob.*' }), 'POST /dev/token', 200);
      return t.json.access_token as string;
    },
    async stop() {
      await server.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The commit checked out in `dir`, or undefined when it is not a git worktree. */
export function commitOf(dir: string): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: dir, encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}
