/**
 * The machine's limits (issue 7), measured in the same run as the scenarios they bound:
 *
 * - Hashing: `openssl dgst -sha256 <file>` (the openssl command line, a separate process; wall
 *   time of the whole command, file reads from the page cache and process start included) and
 *   node:crypto SHA-256 on this thread (bench/large.ts measureSha256: 1 MiB updates, hashing time
 *   only), over the same bytes: the blob scenario's body file. Alternating node / openssl, a few
 *   rounds each; both digests must agree.
 * - Disk: `dd if=/dev/zero of=<dir>/dd.bin bs=1M count=<N>` with `conv=fdatasync` (the bytes are
 *   on the device, or at least acknowledged by it, when dd exits) and without (page cache only),
 *   in `dir`, the directory the server's data lives in. MB/s from dd's own report (LC_ALL=C
 *   stderr: "<bytes> bytes (...) copied, <seconds> s, ..."), wall time kept next to it.
 *
 * Tools that are not installed are skipped with a message saying how to install them.
 * `runLimits` and `renderLimitsSection` are for bench/run.ts.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fsDescription } from './host.js';
import { type ShaResult, measureSha256 } from './large.js';
import { f, median, mib } from './report.js';

const MiB = 1024 * 1024;
export const OPENSSL_INSTALL_HINT = 'openssl not installed: apt-get install openssl';
export const DD_INSTALL_HINT = 'dd not installed: apt-get install coreutils';

export interface LimitsOptions {
  /** The bytes to hash (the blob scenario's body file). */
  file: string;
  /** A directory on the disk the server writes to (dd's output file goes there, and is removed). */
  diskDir: string;
  /** dd's size in MiB (bs=1M count=<ddMiB>). */
  ddMiB: number;
  /** Rounds of each hash and each dd variant (default 3 for hashing, 2 for dd). */
  hashRounds?: number;
  ddRounds?: number;
  progress?: (msg: string) => void;
}

export interface OpensslRun {
  bytes: number;
  /** Wall time of the command (process start and file reads included). */
  seconds: number;
  mbPerSecond: number;
  hex: string;
}

export interface DdRun {
  variant: 'fdatasync' | 'page cache';
  round: number;
  command: string;
  bytes: number;
  /** dd's own figure (its stderr), undefined when it could not be parsed. */
  ddSeconds?: number;
  /** Wall time of the dd process, measured here. */
  wallSeconds: number;
  /** From ddSeconds when parsed, else from wallSeconds. */
  mbPerSecond: number;
  ddSummary: string;
}

export interface LimitsResult {
  startedAt: string;
  finishedAt?: string;
  file: string;
  bytes: number;
  openssl?: { binary: string; version: string; command: string; runs: OpensslRun[]; medianMbPerSecond: number };
  /** `openssl speed -evp sha256 -bytes 1048576 -seconds 1`: the hashing alone, in memory (no file, no 8 KiB reads). */
  opensslSpeed?: { command: string; mbPerSecond: number };
  /** Why openssl did not run (not installed). */
  opensslSkipped?: string;
  nodeCrypto: { openssl: string; runs: ShaResult[]; medianMbPerSecond: number };
  /** Both tools produced the same digest (undefined when openssl did not run). */
  digestsAgree?: boolean;
  disk: {
    dir: string;
    fsType: string;
    runs: DdRun[];
    fdatasyncMedianMbPerSecond?: number;
    pageCacheMedianMbPerSecond?: number;
    skipped?: string;
  };
  /** svc's figures of the same run, filled in by bench/run.ts after the scenarios, shown as ratios. */
  svcFigures?: Array<{ name: string; mbPerSecond: number; durability: 'strict' | 'relaxed' }>;
  errors: Array<{ phase: string; message: string }>;
}

/** `name` on PATH, or undefined. */
function which(name: string): string | undefined {
  try {
    const p = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return p || undefined;
  } catch {
    return undefined;
  }
}

function opensslDgst(binary: string, file: string, bytes: number): OpensslRun {
  const started = performance.now();
  const r = spawnSync(binary, ['dgst', '-sha256', '-r', file], { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' } });
  const seconds = (performance.now() - started) / 1000;
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`openssl dgst exited with ${r.status}: ${r.stderr.trim().slice(0, 300)}`);
  // -r: "<hex> *<file>"
  const hex = /^([0-9a-f]{64})/.exec(r.stdout.trim())?.[1];
  if (!hex) throw new Error(`could not read openssl's digest from "${r.stdout.trim().slice(0, 200)}"`);
  return { bytes, seconds, mbPerSecond: bytes / seconds / 1e6, hex };
}

/** dd's summary line: "268435456 bytes (268 MB, 256 MiB) copied, 0.123 s, 2.2 GB/s". */
export function parseDdSummary(stderr: string): { bytes: number; seconds: number; line: string } | undefined {
  const line = stderr.split('\n').find((l) => / copied, /.test(l));
  const m = line && /^(\d+) bytes\b.* copied, ([\d.]+(?:e[-+]?\d+)?) s\b/.exec(line.trim());
  if (!line || !m) return undefined;
  return { bytes: Number(m[1]), seconds: Number(m[2]), line: line.trim() };
}

function runDd(binary: string, variant: DdRun['variant'], round: number, out: string, count: number): DdRun {
  const args = [`if=/dev/zero`, `of=${out}`, 'bs=1M', `count=${count}`, ...(variant === 'fdatasync' ? ['conv=fdatasync'] : [])];
  const started = performance.now();
  const r = spawnSync(binary, args, { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' } });
  const wallSeconds = (performance.now() - started) / 1000;
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`dd ${args.join(' ')} exited with ${r.status}: ${r.stderr.trim().slice(0, 300)}`);
  const parsed = parseDdSummary(r.stderr);
  const bytes = parsed?.bytes ?? count * MiB;
  const seconds = parsed?.seconds && parsed.seconds > 0 ? parsed.seconds : wallSeconds;
  return { variant, round, command: `dd ${args.join(' ')}`, bytes, ddSeconds: parsed?.seconds, wallSeconds, mbPerSecond: bytes / seconds / 1e6, ddSummary: parsed?.line ?? r.stderr.trim().split('\n').pop() ?? '' };
}

export async function runLimits(opts: LimitsOptions): Promise<LimitsResult> {
  const progress = opts.progress ?? (() => {});
  const hashRounds = opts.hashRounds ?? 3;
  const ddRounds = opts.ddRounds ?? 2;
  const bytes = fs.statSync(opts.file).size;
  const result: LimitsResult = {
    startedAt: new Date().toISOString(),
    file: opts.file,
    bytes,
    nodeCrypto: { openssl: process.versions.openssl ?? 'unknown', runs: [], medianMbPerSecond: NaN },
    disk: { dir: opts.diskDir, fsType: fsDescription(opts.diskDir), runs: [] },
    errors: [],
  };
  const step = (name: string, fn: () => void) => {
    try {
      fn();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      result.errors.push({ phase: name, message });
      progress(`  ${name} FAILED: ${message}`);
    }
  };

  // Hashing: node, openssl, node, openssl, ... over the same file.
  const opensslBinary = which('openssl');
  if (!opensslBinary) {
    result.opensslSkipped = OPENSSL_INSTALL_HINT;
    progress(`  ${OPENSSL_INSTALL_HINT}`);
  }
  const opensslRuns: OpensslRun[] = [];
  for (let round = 0; round < hashRounds; round++) {
    step(`node:crypto SHA-256, round ${round + 1}`, () => {
      result.nodeCrypto.runs.push(measureSha256(opts.file));
    });
    if (opensslBinary) step(`openssl dgst -sha256, round ${round + 1}`, () => {
      opensslRuns.push(opensslDgst(opensslBinary, opts.file, bytes));
    });
  }
  if (opensslBinary) step('openssl speed -evp sha256', () => {
    const args = ['speed', '-evp', 'sha256', '-bytes', String(MiB), '-seconds', '1'];
    const r = spawnSync(opensslBinary, args, { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' } });
    if (r.error) throw r.error;
    // "sha256   2020605.95k": thousands of bytes per second at the one block size asked for.
    const k = /^sha256\s+([\d.]+)k\s*$/im.exec(r.stdout ?? '')?.[1];
    if (r.status !== 0 || !k) throw new Error(`openssl ${args.join(' ')} exited with ${r.status}; could not read its figure from "${(r.stdout ?? '').trim().slice(-200)}"`);
    result.opensslSpeed = { command: `openssl ${args.join(' ')}`, mbPerSecond: Number(k) / 1000 };
  });
  result.nodeCrypto.medianMbPerSecond = median(result.nodeCrypto.runs.map((r) => r.mbPerSecond));
  if (opensslBinary) {
    const v = spawnSync(opensslBinary, ['version'], { encoding: 'utf8' });
    result.openssl = {
      binary: opensslBinary,
      version: (v.stdout ?? '').trim().replace(/\s*\(Library: .*\)$/, '') || 'unknown',
      command: `openssl dgst -sha256 -r ${path.basename(opts.file)}`,
      runs: opensslRuns,
      medianMbPerSecond: median(opensslRuns.map((r) => r.mbPerSecond)),
    };
    const hexes = new Set([...opensslRuns.map((r) => r.hex), ...result.nodeCrypto.runs.map((r) => r.hex)]);
    if (opensslRuns.length > 0 && result.nodeCrypto.runs.length > 0) result.digestsAgree = hexes.size === 1;
    if (result.digestsAgree === false) result.errors.push({ phase: 'SHA-256 digests', message: `openssl and node:crypto disagree: ${[...hexes].join(', ')}` });
  }
  progress(`  SHA-256 of ${mib(bytes, 0)}: node:crypto ${f(result.nodeCrypto.medianMbPerSecond)} MB/s, openssl dgst ${result.openssl ? `${f(result.openssl.medianMbPerSecond)} MB/s` : 'skipped'}, openssl speed ${f(result.opensslSpeed?.mbPerSecond)} MB/s`);

  // Disk: with fdatasync, then page cache only (its dirty pages are dropped by the unlink before the next round).
  const ddBinary = which('dd');
  if (!ddBinary) {
    result.disk.skipped = DD_INSTALL_HINT;
    progress(`  ${DD_INSTALL_HINT}`);
  } else {
    const out = path.join(opts.diskDir, `dd-${process.pid}.bin`);
    try {
      for (let round = 0; round < ddRounds; round++) {
        for (const variant of ['fdatasync', 'page cache'] as const) {
          step(`dd (${variant}), round ${round + 1}`, () => {
            result.disk.runs.push(runDd(ddBinary, variant, round, out, opts.ddMiB));
          });
          fs.rmSync(out, { force: true });
        }
      }
    } finally {
      fs.rmSync(out, { force: true });
    }
    const of = (v: DdRun['variant']) => result.disk.runs.filter((r) => r.variant === v).map((r) => r.mbPerSecond);
    if (of('fdatasync').length) result.disk.fdatasyncMedianMbPerSecond = median(of('fdatasync'));
    if (of('page cache').length) result.disk.pageCacheMedianMbPerSecond = median(of('page cache'));
    progress(`  dd of ${opts.ddMiB} MiB: fdatasync ${f(result.disk.fdatasyncMedianMbPerSecond)} MB/s, page cache ${f(result.disk.pageCacheMedianMbPerSecond)} MB/s`);
  }
  result.finishedAt = new Date().toISOString();
  return result;
}

const range = (v: number[]) => (v.length === 0 ? 'n/a' : v.map((x) => f(x)).join(', '));

export function renderLimitsSection(r: LimitsResult): string {
  const L: string[] = ['## Machine limits (issue 7): hashing and disk on this host, same run', ''];
  const node = r.nodeCrypto;
  const ossl = r.openssl;
  L.push('| Limit | Median | Runs (MB/s) | How |', '|---|---|---|---|');
  L.push(`| SHA-256, node:crypto (one thread, 1 MiB updates) | ${f(node.medianMbPerSecond)} MB/s | ${range(node.runs.map((x) => x.mbPerSecond))} | hashing time only (file reads excluded), OpenSSL ${node.openssl} inside Node |`);
  if (ossl) {
    L.push(`| SHA-256, \`openssl dgst -sha256\` | ${f(ossl.medianMbPerSecond)} MB/s (${f(ossl.medianMbPerSecond / node.medianMbPerSecond, 2)}x node:crypto) | ${range(ossl.runs.map((x) => x.mbPerSecond))} | wall time of the command (process start, reads from the page cache included); ${ossl.version} |`);
  } else {
    L.push(`| SHA-256, \`openssl dgst -sha256\` | skipped | | ${r.opensslSkipped ?? 'not run'} |`);
  }
  if (r.opensslSpeed) L.push(`| SHA-256, \`openssl speed -evp sha256 -bytes 1048576\` | ${f(r.opensslSpeed.mbPerSecond)} MB/s (${f(r.opensslSpeed.mbPerSecond / node.medianMbPerSecond, 2)}x node:crypto) | one 1 s run | the hash alone on 1 MiB blocks in memory (no file, no process start): the gap to \`openssl dgst\` is the command's 8 KiB reads and start-up |`);
  const d = r.disk;
  const ddRuns = (v: DdRun['variant']) => d.runs.filter((x) => x.variant === v);
  if (d.skipped) L.push(`| Disk write, dd | skipped | | ${d.skipped} |`);
  else {
    const mibs = d.runs[0] ? mib(d.runs[0].bytes, 0) : '?';
    L.push(`| Disk write, \`dd bs=1M conv=fdatasync\` (${mibs}) | ${f(d.fdatasyncMedianMbPerSecond)} MB/s | ${range(ddRuns('fdatasync').map((x) => x.mbPerSecond))} | dd's own figure; fdatasync before dd exits, so the device acknowledged every byte (a virtual disk may acknowledge from the host's cache) |`);
    L.push(`| Disk write, \`dd bs=1M\` without sync (${mibs}) | ${f(d.pageCacheMedianMbPerSecond)} MB/s | ${range(ddRuns('page cache').map((x) => x.mbPerSecond))} | dd's own figure; page cache only (what SVC_DURABILITY=relaxed relies on) |`);
  }
  L.push('');
  L.push(
    `Hashing over ${mib(r.bytes, 0)}: the blob scenario's body file, node:crypto and openssl alternating (${node.runs.length} and ${ossl?.runs.length ?? 0} runs)${r.digestsAgree === undefined ? '' : r.digestsAgree ? ', identical digests' : ', **digests differ**'}. ` +
      `Disk: in ${d.dir} (${d.fsType}), the directory the server's data directory is in; fdatasync first, then page cache, the file removed after each run. MB/s decimal.`,
    '',
  );
  if (r.svcFigures?.length) {
    L.push('| svc figure (same run) | MB/s | vs openssl SHA-256 | vs node:crypto SHA-256 | vs dd, same durability |', '|---|---|---|---|---|');
    for (const s of r.svcFigures) {
      const disk = s.durability === 'strict' ? d.fdatasyncMedianMbPerSecond : d.pageCacheMedianMbPerSecond;
      const ratio = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? 'n/a' : `${f(s.mbPerSecond / x, 2)}x`);
      L.push(`| ${s.name} | ${f(s.mbPerSecond)} | ${ratio(ossl?.medianMbPerSecond)} | ${ratio(node.medianMbPerSecond)} | ${ratio(disk)} (${s.durability === 'strict' ? 'fdatasync' : 'page cache'}) |`);
    }
    L.push('');
  }
  if (r.errors.length) L.push(...r.errors.map((e) => `- **${e.phase}**: ${e.message.replace(/\n/g, ' ')}`), '');
  return L.join('\n');
}
