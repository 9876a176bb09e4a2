// The README's first screen works in order on a fresh clone: `npm ci && npm start`, the ready
// check it names, then the first upload and download, as written.
//
// The clone is this checkout's tracked files as they are in the work tree (what a commit of it
// would hold), copied into a temporary directory. `npm ci` there is replaced by what it leaves
// behind: node_modules linked to this checkout's (installing is minutes and needs the registry)
// and `npm run prepare` (the build npm ci runs). `npm start` then runs as written, with the
// documented port variables set to 0 (free ports; the server logs the ones it took), and the
// README's ready command and upload block run with 8081 replaced by the blob port.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempRoot } from './helpers/server.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const README = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8');

/** The ```sh blocks of the README's first screen (before its first `## ` heading), in order. */
function firstScreenBlocks(): string[] {
  const screen = README.slice(0, README.indexOf('\n## '));
  return [...screen.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!.trim());
}

describe('README first screen', () => {
  it('names the two commands, the ready check and a first upload, in that order', () => {
    const blocks = firstScreenBlocks();
    expect(blocks[0]).toBe('npm ci && npm start');
    expect(blocks[2]).toBe('npm ci && npm test');
    expect(blocks[1]).toMatch(/curl .*\/api\/v1\/blobs/);
    expect(README.slice(0, README.indexOf('\n## '))).toMatch(/ready when `curl -s localhost:8081\/api\/health\/ready` says `\{"status":"ready",…\}`/);
  });

  it('runs as written in a fresh clone: npm start, ready, upload, download', async () => {
    const blocks = firstScreenBlocks();
    const [, ready, said] = /ready when `(curl [^`]+)` says `([^`…]+)[^`]*`/.exec(README)!;
    const clone = tempRoot('svc-readme-');
    const { stdout: files } = await run('git', ['ls-files', '-z'], { cwd: REPO });
    for (const file of files.split('\0').filter(Boolean)) {
      const from = path.join(REPO, file);
      if (!fs.existsSync(from)) continue; // deleted in the work tree
      fs.mkdirSync(path.dirname(path.join(clone, file)), { recursive: true });
      fs.cpSync(from, path.join(clone, file));
    }
    // What `npm ci` leaves: the packages, then its prepare script (the build).
    fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(clone, 'node_modules'));
    await run('npm', ['run', 'prepare'], { cwd: clone, timeout: 120_000 });

    const start = blocks[0]!.replace(/^npm ci && /, '');
    const proc = spawn('bash', ['-c', start], {
      cwd: clone,
      detached: true, // its own process group: npm, the shell and node stop together
      env: { ...process.env, SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_S3_API_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    proc.stdout!.on('data', (d) => (out += d));
    proc.stderr!.on('data', (d) => (err += d));
    try {
      const port = await new Promise<number>((resolve, reject) => {
        const timer = setInterval(() => {
          const line = out.split('\n').find((l) => l.includes('"event":"listening"'));
          if (line) {
            clearInterval(timer);
            resolve((JSON.parse(line) as { port: number }).port);
          }
        }, 100);
        proc.once('exit', (code) => { clearInterval(timer); reject(new Error(`npm start exited ${code}: ${err}\n${out}`)); });
      });
      const local = (cmd: string) => cmd.replaceAll('localhost:8081', `localhost:${port}`);
      // The ready check, as the README says it, until it says what the README says.
      let answer = '';
      for (let i = 0; i < 100 && !answer.startsWith(said!); i++) {
        answer = (await run('bash', ['-c', local(ready!)], { cwd: clone }).catch(() => ({ stdout: '' }))).stdout;
        if (!answer.startsWith(said!)) await new Promise((r) => setTimeout(r, 100));
      }
      expect(answer.slice(0, said!.length)).toBe(said);

      const upload = await run('bash', ['-c', `set -euo pipefail\n${local(blocks[1]!)}`], { cwd: clone });
      const lines = upload.stdout.trim().split('\n');
      const stored = JSON.parse(lines[0]!) as { blob: { id: string; size: number } };
      expect([stored.blob.size, lines.at(-1)]).toEqual([11, 'Hello, svc']);
      expect(stored.blob.id).toMatch(/^sha-256:[0-9a-f]{64}:11$/);
      // The data directory is the clone's ./data, as the README says.
      expect(fs.existsSync(path.join(clone, 'data', 'svc.lock'))).toBe(true);
    } finally {
      const exited = new Promise<number | null>((resolve) => {
        if (proc.exitCode !== null) resolve(proc.exitCode);
        else proc.once('exit', (code) => resolve(code));
      });
      try { process.kill(-proc.pid!, 'SIGINT'); } catch { /* already gone */ }
      await exited;
      fs.rmSync(clone, { recursive: true, force: true });
    }
  }, 240_000);
});
