import { execFileSync } from 'node:child_process';
import os from 'node:os';
import type { CpuReport } from './cpu.js';
import type { DedupResult } from './dedup.js';
import type { LargeDownloadResult, LargeUploadResult, ShaResult } from './large.js';
import type { LoadResult } from './load.js';

export interface Target {
  name: string;
  /** Measured value as shown. */
  value: string;
  /** Requirement as shown. */
  target: string;
  /** undefined: not measured (phase failed). */
  pass: boolean | undefined;
}

export interface DownloadLoad extends LoadResult {
  label: string;
  blobs: number;
}

export interface Results {
  tool: 'svc-bench';
  startedAt: string;
  finishedAt?: string;
  mode: 'full' | 'quick';
  durability: 'strict' | 'relaxed';
  bodyBytes: number;
  loadSeconds: { uploads: number; downloads: number; warmup: number };
  environment: {
    cpuModel: string;
    cpus: number;
    memoryBytes: number;
    os: string;
    node: string;
    gitCommit?: string;
    gitDirty?: boolean;
    loadAverageAtStart: number[];
    loadGenerator: string;
  };
  server: {
    workers?: unknown;
    baselineRssBytes?: number;
    problems: string[];
    exit?: { graceful: boolean; alreadyExited: boolean; code: number | null; signal: string | null };
  };
  sha256?: ShaResult;
  /** The median of the ingest rounds, with every round's figures. */
  ingest?: LargeUploadResult & { ratioToSha256?: number; idMatchesSha256?: boolean; rounds: IngestRound[] };
  download?: LargeDownloadResult & { passesMbPerSecond: number[] };
  smallUploads?: LoadResult & { bodyBytes4k: number };
  smallDownloads?: DownloadLoad[];
  dedup?: DedupResult;
  errors: Array<{ phase: string; message: string }>;
  targets: Target[];
}

export interface IngestRound {
  mbPerSecond: number;
  seconds: number;
  serverPercent?: number;
  rssGrowthBytes: number;
}

const MiB = 1024 * 1024;

// Formatters shared by every report section ('n/a' for a missing or non-finite value).
export const f = (n: number | undefined, digits = 0) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }));
export const mib = (n: number | undefined, digits = 1) => (n === undefined ? 'n/a' : `${f(n / MiB, digits)} MiB`);
export const mbs = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : `${f(n)} MB/s`);
export const pct = (n: number | undefined, digits = 0) => (n === undefined || !Number.isFinite(n) ? 'n/a' : `${f(n, digits)}%`);
export const cpuText = (c: CpuReport) =>
  `server ${pct(c.serverPercent)}, bench ${pct(c.benchPercent)}, other processes ${pct(c.otherPercent)}${c.stealPercent ? ` (steal ${pct(c.stealPercent)})` : ''}`;
export const ms = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n < 10 ? `${f(n, 2)} ms` : `${f(n, 1)} ms`);
export const us = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n < 100 ? `${f(n, 1)} µs` : `${f(n)} µs`);
/** The median; NaN for no values. */
export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const ingestRoundsText = (i: { rounds: IngestRound[] }) => i.rounds.map((x) => f(x.mbPerSecond)).join(', ') + ' MB/s';
/** The ingest target's memory figure: the largest growth of any round. */
const largestRssGrowth = (i: { rounds: IngestRound[] }) => Math.max(...i.rounds.map((x) => x.rssGrowthBytes));

export const mark = (pass: boolean | undefined) => (pass === undefined ? 'NOT MEASURED' : pass ? 'PASS' : 'FAIL');

export function evaluateTargets(r: Results): Target[] {
  const targets: Target[] = [];
  const ratio = r.ingest?.ratioToSha256;
  targets.push({
    name: `Ingest of ${mib(r.bodyBytes, 0)} vs same-run SHA-256 (median of ${r.ingest?.rounds.length ?? 0})`,
    value: ratio === undefined ? 'n/a' : `${f(ratio, 2)}x (${mbs(r.ingest!.mbPerSecond)} / ${mbs(r.sha256!.mbPerSecond)}; rounds ${ingestRoundsText(r.ingest!)})`,
    target: '>= 0.35x',
    pass: ratio === undefined ? undefined : ratio >= 0.35,
  });
  targets.push({
    name: `Download of ${mib(r.bodyBytes, 0)} (median of 3)`,
    value: r.download ? `${f(r.download.mbPerSecond / 1000, 2)} GB/s` : 'n/a',
    target: '>= 1 GB/s',
    pass: r.download ? r.download.mbPerSecond >= 1000 : undefined,
  });
  const best = r.smallDownloads?.length ? r.smallDownloads.reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a)) : undefined;
  targets.push({
    name: '4 KiB downloads',
    value: best ? `${f(best.requestsPerSecond)} req/s (${best.label})` : 'n/a',
    target: '>= 50,000 req/s',
    pass: best ? best.requestsPerSecond >= 50_000 && best.errors === 0 : undefined,
  });
  const growth = r.ingest ? largestRssGrowth(r.ingest) : undefined;
  targets.push({
    name: `Server RSS growth during the ${mib(r.bodyBytes, 0)} uploads (largest)`,
    value: mib(growth),
    target: '< 64 MiB',
    pass: growth === undefined ? undefined : growth < 64 * MiB,
  });
  const later = r.dedup?.revisions.filter((v) => v.revision > 1);
  if (later && later.length > 0) {
    const worst = later.reduce((a, b) => (b.newPercent > a.newPercent ? b : a));
    targets.push({
      name: `PDF revisions 2..${later[later.length - 1].revision}: new block bytes`,
      value: `worst ${pct(worst.newPercent, 2)} (revision ${worst.revision})`,
      target: '< 5% each',
      pass: later.every((v) => v.newPercent < 5),
    });
  } else {
    targets.push({ name: 'PDF revisions: new block bytes', value: 'n/a', target: '< 5% each', pass: undefined });
  }
  return targets;
}

/** A report's title and its run, host and code lines, then `details` (more `- ` lines). */
export function renderHeader(r: Results, title: string, run: string, details: string[] = []): string[] {
  const e = r.environment;
  return [
    `# ${title}`,
    '',
    `- Run: ${run}`,
    `- Host: ${e.cpuModel}, ${e.cpus} CPU(s), ${mib(e.memoryBytes, 0)} RAM, ${e.os}, Node ${e.node}; load average at start ${e.loadAverageAtStart.join(' / ')}`,
    `- Code: ${e.gitCommit ? `\`${e.gitCommit.slice(0, 12)}\`${e.gitDirty ? ' (working tree has uncommitted changes)' : ''}` : 'unknown'}; server workers: ${r.server.workers ?? 'unknown'}`,
    ...details,
    '',
  ];
}

/** The check / result / target / verdict table (no heading). */
export function renderTargets(targets: Target[]): string[] {
  return ['| Check | Result | Target | Verdict |', '|---|---|---|---|', ...targets.map((t) => `| ${t.name} | ${t.value} | ${t.target} | ${mark(t.pass)} |`), ''];
}

/** The `## Errors` section, or nothing when the run had none. */
export function renderErrors(r: Results): string[] {
  if (r.errors.length === 0) return [];
  return ['## Errors', '', ...r.errors.map((err) => `- **${err.phase}**: ${err.message.replace(/\n/g, ' ')}`), ''];
}

/** The `## Server` section: how it shut down and what it logged at warn/error. */
export function renderServer(r: Results): string[] {
  const exit = r.server.exit;
  let shutdown = 'n/a';
  if (exit?.alreadyExited) shutdown = `the server had already exited before the bench stopped it (code ${exit.code}, signal ${exit.signal})`;
  else if (exit && !exit.graceful) shutdown = `did not exit within 15 s of SIGTERM; killed with SIGKILL (code ${exit.code}, signal ${exit.signal})`;
  else if (exit?.signal === 'SIGTERM') shutdown = 'SIGTERM killed it outright (no SIGTERM handler installed any more: had it already received a SIGTERM from elsewhere?)';
  else if (exit) shutdown = `exited after SIGTERM (code ${exit.code}, signal ${exit.signal})`;
  const L = ['## Server', '', `- Shutdown: ${shutdown}`, `- Warnings/errors logged: ${r.server.problems.length === 0 ? 'none' : r.server.problems.length}`];
  for (const p of r.server.problems.slice(0, 10)) L.push(`  - \`${p.replace(/`/g, "'").slice(0, 500)}\``);
  L.push('');
  return L;
}

export function renderMarkdown(r: Results): string {
  const title = `svc end-to-end benchmark (${r.mode === 'quick' ? 'quick run, --quick' : 'full run'}; SVC_DURABILITY=${r.durability})`;
  const run = `${r.startedAt}; durability \`${r.durability}\`; large body ${mib(r.bodyBytes, 0)}; load phases ${r.loadSeconds.uploads} s (uploads) / ${r.loadSeconds.downloads} s (downloads) after ${r.loadSeconds.warmup} s warm-up`;
  const L = renderHeader(r, title, run, [
    `- Load generator: ${r.environment.loadGenerator}; server and load generator share the host's CPUs`,
    '- MB/s and GB/s are decimal (10^6, 10^9 bytes per second); sizes are binary (KiB, MiB, GiB)',
  ]);
  L.push('## Targets', '', ...renderTargets(r.targets));
  L.push(...renderErrors(r));

  L.push('## Large blob');
  L.push('');
  L.push('| Measurement | Result | Notes |');
  L.push('|---|---|---|');
  if (r.sha256) L.push(`| SHA-256 (node:crypto, one core, 1 MiB updates) | ${mbs(r.sha256.mbPerSecond)} | ${mib(r.sha256.bytes, 0)} hashed in ${f(r.sha256.seconds, 2)} s of hashing time (file reads excluded); CPU: bench ${pct(r.sha256.cpu.benchPercent)}, other processes ${pct(r.sha256.cpu.otherPercent)} |`);
  if (r.ingest) {
    const i = r.ingest;
    L.push(`| Ingest (POST, Content-Length, streamed from a file; median of ${i.rounds.length} rounds, each into an empty data directory) | ${mbs(i.mbPerSecond)} (${f(i.ratioToSha256, 2)}x SHA-256) | rounds ${ingestRoundsText(i)} (server CPU ${i.rounds.map((x) => pct(x.serverPercent)).join(', ')}); the median round: ${f(i.seconds, 2)} s to the 201; ${f(i.tailSeconds * 1000)} ms of it after the last byte was sent; server-reported ${f(i.response.durationSeconds, 2)} s; ${f(i.response.blob.blockCount)} blocks (${i.response.freshBlocks} fresh, ${i.response.duplicateBlocks} duplicate), chunker \`${i.response.blob.chunker}\`; id ${i.idMatchesSha256 ? 'matches' : 'DOES NOT match'} the bench's SHA-256 |`);
    L.push(`| Server RSS during ingest (VmRSS every 50 ms) | +${mib(largestRssGrowth(i))} peak growth (largest round) | the median round: baseline ${mib(i.rss.baselineBytes)}, peak ${mib(i.rss.peakBytes)} over ${i.rss.samples} samples; VmHWM after upload ${mib(i.rss.hwmAfterBytes)} |`);
    L.push(`| CPU during ingest (% of one core) | ${cpuText(i.cpu)} | |`);
  }
  if (r.download) {
    const d = r.download;
    L.push(`| Download (GET, bytes counted and discarded; median of 3 passes) | ${mbs(d.mbPerSecond)} (${f(d.mbPerSecond / 1000, 2)} GB/s) | passes ${d.passesMbPerSecond.map((v) => f(v)).join(', ')} MB/s; median pass ${mib(d.bytes, 0)} in ${f(d.seconds, 2)} s; CPU: ${cpuText(d.cpu)} |`);
  }
  L.push('');

  L.push('## 4 KiB requests');
  L.push('');
  L.push('| Scenario | Connections x pipeline | Requests/s | p50 | p90 | p99 | max | Errors | Server CPU | Bench CPU | Other CPU |');
  L.push('|---|---|---|---|---|---|---|---|---|---|---|');
  const row = (name: string, x: LoadResult) =>
    `| ${name} | ${x.connections} x ${x.pipeline} | ${f(x.requestsPerSecond)} | ${ms(x.latency.p50Ms)} | ${ms(x.latency.p90Ms)} | ${ms(x.latency.p99Ms)} | ${ms(x.latency.maxMs)} | ${x.errors}${x.firstError ? ` (${x.firstError.replace(/\|/g, '/').slice(0, 120)})` : ''} | ${pct(x.cpu.serverPercent)} | ${pct(x.cpu.benchPercent)} | ${pct(x.cpu.otherPercent)} |`;
  if (r.smallUploads) L.push(row(`Upload distinct random 4 KiB bodies (${f(r.smallUploads.requests)} in ${f(r.smallUploads.durationSeconds, 1)} s)`, r.smallUploads));
  for (const d of r.smallDownloads ?? []) L.push(row(`Download ${d.label} (${d.blobs} blobs round-robin, ${f(d.requests)} in ${f(d.durationSeconds, 1)} s)`, d));
  L.push('');
  L.push(`CPU is % of one core over the measured window (${r.environment.cpus} CPUs = ${r.environment.cpus * 100}%): server = all its threads (/proc/<pid>/stat), bench = the load generator (process.cpuUsage), other = the rest of the host's busy time (/proc/stat), i.e. other processes competing for the CPUs. A bench CPU near 100% would mean the single-threaded load generator, not the server, is the limit. Latency is from handing the request to the socket to the last response byte; with pipelining it includes waiting behind earlier requests on the same connection.`);
  L.push('');

  if (r.dedup) {
    L.push('## Dedup: synthetic PDF series (Content-Type application/pdf)');
    L.push('');
    L.push('| Revision | Size | Appended | Blocks | Fresh / duplicate (201) | New vs previous revision | New bytes | % of size stored as new | Upload |');
    L.push('|---|---|---|---|---|---|---|---|---|');
    for (const v of r.dedup.revisions) {
      L.push(`| ${v.revision} | ${mib(v.bytes, 2)} | ${v.revision === 1 ? '(whole file)' : `${f(v.appendedBytes / 1024, 1)} KiB`} | ${v.blockCount} | ${v.freshBlocks} / ${v.duplicateBlocks} | ${v.newBlocks} | ${v.newBlockBytes < MiB ? `${f(v.newBlockBytes / 1024, 1)} KiB` : mib(v.newBlockBytes, 2)} | ${pct(v.newPercent, 2)}${v.revision === 1 ? ' (baseline)' : ''} | ${mbs(v.mbPerSecond)} |`);
    }
    L.push('');
    L.push(`Chunker: \`${r.dedup.revisions[0]?.chunker ?? 'n/a'}\`. Revision 1 has ~3000 stream objects of 5-40 KiB random payload; each later revision appends an incremental update (2-4 new objects, one replaced object, page tree, xref, trailer, \`%%EOF\`).`);
    L.push('');
  }

  L.push(...renderServer(r));
  return L.join('\n');
}

/** What machine and code a run measured (machine info in every results file). */
export function machineEnvironment(repo: string) {
  return {
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    cpus: os.availableParallelism(),
    memoryBytes: os.totalmem(),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    gitCommit: gitOutput(repo, ['rev-parse', 'HEAD']),
    gitDirty: (gitOutput(repo, ['status', '--porcelain']) ?? '') !== '',
    loadAverageAtStart: os.loadavg().map((v) => Math.round(v * 100) / 100),
  };
}

/** `git args` in `repo`, trimmed; undefined when git fails (no checkout). */
export function gitOutput(repo: string, args: string[]): string | undefined {
  try {
    return execFileSync('git', args, { cwd: repo, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}
