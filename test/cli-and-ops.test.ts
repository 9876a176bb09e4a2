import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { VARIABLES } from '../dist/engine/base/config.js';
import { startServer, tempRoot } from './helpers/server.js';
import { seededBytes, upload } from './helpers/http.js';
import { syntheticPdf } from './helpers/pdf.js';

const run = promisify(execFile);
const SVC = fileURLToPath(new URL('../bin/svc.js', import.meta.url));

describe('svc command', () => {
  it('--help lists every variable with its default', async () => {
    const { stdout } = await run(process.execPath, [SVC, '--help']);
    expect(stdout).toContain('svc serve');
    for (const v of VARIABLES) expect(stdout).toContain(v.name);
  });

  it('refuses an invalid configuration naming the variable', async () => {
    const root = tempRoot();
    const err = await run(process.execPath, [SVC, 'serve'], { env: { ...process.env, SVC_DURABILITY: 'maybe', SVC_FS_ROOT: root } }).catch((e) => e);
    fs.rmSync(root, { recursive: true, force: true });
    expect(err.code).toBe(2);
    expect(err.stderr).toContain('SVC_DURABILITY');
  });

  it('refuses an unknown command', async () => {
    const err = await run(process.execPath, [SVC, 'frobnicate']).catch((e) => e);
    expect(err.code).toBe(2);
  });
});

describe('readiness', () => {
  it('is 503 not_ready naming the failed check when the block store is gone', async () => {
    const server = await startServer({ SVC_DURABILITY: 'relaxed' });
    try {
      fs.rmSync(path.join(server.root, 'blocks'), { recursive: true, force: true });
      const res = await fetch(`${server.url}/api/health/ready`);
      expect(res.status).toBe(503);
      const body = (await res.json()) as any;
      expect(body.status).toBe('not_ready');
      const failed = body.checks.find((c: any) => c.name === 'blockStore');
      expect(failed).toMatchObject({ status: 'failed', detail: expect.any(String) });
      expect((await fetch(`${server.url}/api/health/live`)).status).toBe(200);
      // An upload now fails cleanly with the envelope and leaks nothing internal.
      const up = await upload(server.url, seededBytes(100_000, 77));
      expect(up.res.status).toBe(500);
      expect(up.json).toEqual({ error: 'ingest_failed', message: expect.any(String) });
      expect(up.json.message).not.toContain('ENOENT');
    } finally {
      await server.stop();
    }
  });
});

describe('PDF incremental updates over HTTP', () => {
  it('a revision shares every block of the previous one', async () => {
    const server = await startServer({ SVC_DURABILITY: 'relaxed' });
    try {
      const rev1 = syntheticPdf(500, 41);
      const update = syntheticPdf(2, 42, 501, false);
      const rev2 = Buffer.concat([rev1, update]);
      const first = await upload(server.url, rev1, { 'Content-Type': 'application/pdf' });
      const second = await upload(server.url, rev2, { 'Content-Type': 'application/pdf' });
      expect(first.json.blob.blockCount).toBeGreaterThan(3);
      expect(second.json.duplicateBlocks).toBe(first.json.blob.blockCount);
      expect(second.json.freshBlocks).toBe(1);
    } finally {
      await server.stop();
    }
  });
});
