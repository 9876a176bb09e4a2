// Builds native/sha256-pair.c into dist/native/sha256-pair.node (run by `npm run build`, after tsc).
// Optional: without a C compiler, Node's headers or an x86-64 CPU the service hashes with
// node:crypto instead (engine/cas/sha256-pair.ts), so a failed build is reported, never fatal.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const source = path.join(repo, 'native', 'sha256-pair.c');
const output = path.join(repo, 'dist', 'native', 'sha256-pair.node');
const headers = path.join(path.dirname(process.execPath), '..', 'include', 'node');

function skip(why: string): never {
  process.stderr.write(`native SHA-256 pair not built (${why}): node:crypto hashes instead\n`);
  process.exit(0);
}

if (process.arch !== 'x64') skip(`${process.arch} is not x86-64`);
if (!existsSync(path.join(headers, 'node_api.h'))) skip(`no Node-API headers in ${headers}`);
if (existsSync(output) && statSync(output).mtimeMs >= statSync(source).mtimeMs) process.exit(0);
mkdirSync(path.dirname(output), { recursive: true });
const cc = process.env.CC || 'cc';
const args = ['-O2', '-std=c11', '-D_DEFAULT_SOURCE', '-fPIC', '-shared', '-fvisibility=hidden', '-Wall', '-Werror', `-I${headers}`, '-o', output, source];
const run = spawnSync(cc, args, { encoding: 'utf8' });
// A failed build must not leave an earlier build of other source behind to be loaded.
if (run.error || run.status !== 0) rmSync(output, { force: true });
if (run.error) skip(`${cc}: ${run.error.message}`);
if (run.status !== 0) skip(`${cc} exited with ${run.status}: ${run.stderr.trim().split('\n').slice(0, 5).join(' / ')}`);
