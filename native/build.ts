// Builds the Node-API addons in native/ into dist/native/*.node (run by `npm run build`, after
// tsc). Optional: without a C compiler or Node's headers the service uses JavaScript instead
// (engine/cas/sha256-pair.ts, engine/cas/shared-copy.ts), so a failed build is reported, never fatal.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { publishStaged, stagingName } from './publish.js';

interface Addon {
  name: string;
  /** What runs instead when it is not built. */
  fallback: string;
  /** Why it cannot be built on this machine, if so. */
  unsupported?: string;
}

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const headers = path.join(path.dirname(process.execPath), '..', 'include', 'node');
/** Our own headers, shared by the addons: a change to one rebuilds them all. */
const headerFiles = readdirSync(path.join(repo, 'native')).filter((f) => f.endsWith('.h')).map((f) => path.join(repo, 'native', f));
const addons: Addon[] = [
  { name: 'sha256-pair', fallback: 'node:crypto hashes instead', unsupported: process.arch === 'x64' ? undefined : `${process.arch} is not x86-64` },
  { name: 'shared-copy', fallback: 'TypedArray.set copies instead' },
];

function build(addon: Addon): void {
  const source = path.join(repo, 'native', `${addon.name}.c`);
  const output = path.join(repo, 'dist', 'native', `${addon.name}.node`);
  const skip = (why: string): void => void process.stderr.write(`native ${addon.name} not built (${why}): ${addon.fallback}\n`);
  if (addon.unsupported) return skip(addon.unsupported);
  if (!existsSync(path.join(headers, 'node_api.h'))) return skip(`no Node-API headers in ${headers}`);
  const inputs = [source, ...headerFiles];
  if (existsSync(output) && inputs.every((f) => statSync(output).mtimeMs >= statSync(f).mtimeMs)) return;
  mkdirSync(path.dirname(output), { recursive: true });
  const cc = process.env.CC || 'cc';
  // Compiled beside the output and renamed over it: a running server has the old one mapped.
  const staged = stagingName(output);
  const args = ['-O2', '-std=c11', '-D_DEFAULT_SOURCE', '-fPIC', '-shared', '-fvisibility=hidden', '-Wall', '-Werror', `-I${headers}`, '-o', staged, source];
  const run = spawnSync(cc, args, { encoding: 'utf8' });
  if (run.error || run.status !== 0) {
    rmSync(staged, { force: true });
    // A failed build must not leave an earlier build of other source behind to be loaded. Unlinked,
    // not truncated: a running server keeps its mapping.
    rmSync(output, { force: true });
    if (run.error) return skip(`${cc}: ${run.error.message}`);
    return skip(`${cc} exited with ${run.status}: ${run.stderr.trim().split('\n').slice(0, 5).join(' / ')}`);
  }
  publishStaged(staged, output);
}

for (const addon of addons) build(addon);
