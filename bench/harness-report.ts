/**
 * The generated part of docs/performance.md (issue 7): after a full `npm run bench`, the block
 * between `<!-- bench:begin -->` and `<!-- bench:end -->` is rewritten with the run's machine,
 * versions, durability of each side, every peer comparison (absolute figures and ratios, median
 * [min–max] over the rounds, target, verdict), the machine limits, svc's resumable uploads against
 * tus and the SVG charts (written to docs/perf/). Everything outside the markers is left as it is.
 */
import fs from 'node:fs';
import path from 'node:path';
import { type BarGroup, type RatioRow, type Spread, groupedBarChart, ratioChart } from './charts.js';
import type { LimitsResult } from './limits.js';
import { type Comparison, type NginxPeersResult, generatorText, sizeLabel, spread, verdict } from './peers-nginx.js';
import { type Results, f, mark, mbs, median, pct } from './report.js';
import type { ResumableResult } from './resumable.js';

export const BEGIN_MARKER = '<!-- bench:begin -->';
export const END_MARKER = '<!-- bench:end -->';
const MiB = 1024 * 1024;

/** What bench/run.ts collects (its Results plus the scenario results). */
export type HarnessResults = Results & {
  scenarios: string[];
  limits?: LimitsResult;
  resumable?: ResumableResult;
  peersNginx?: NginxPeersResult;
  /** Where this run wrote its charts and (full runs) the docs block. */
  outputs?: { charts: string[]; docs?: string };
};

export interface Chart {
  /** File name (no directory). */
  name: string;
  title: string;
  svg: string;
}

const spreadOf = (v: number[]): Spread | undefined => (v.length === 0 ? undefined : { median: median(v), min: Math.min(...v), max: Math.max(...v) });

/** svc / tus per round (fresh content only), and both sides' figures. */
export function tusComparison(m: ResumableResult | undefined): { svc: number[]; tus: number[]; ratios: number[] } | undefined {
  if (!m || m.skipped || !Array.isArray(m.runs)) return undefined;
  const fresh = m.runs.filter((x) => x.content === 'fresh');
  const svc = fresh.filter((x) => x.server === 'svc');
  const tus = fresh.filter((x) => x.server === 'tus');
  const ratios: number[] = [];
  for (const s of svc) {
    const t = tus.find((x) => x.round === s.round);
    if (t) ratios.push(s.mbPerSecond / t.mbPerSecond);
  }
  if (!ratios.length) return undefined;
  return { svc: svc.map((x) => x.mbPerSecond), tus: tus.map((x) => x.mbPerSecond), ratios };
}

const TUS_TARGET = 1.5;

/** The most CPU other processes took in any window of a comparison (both peers), % of one core. */
export function hostNoise(p: NginxPeersResult, c: Comparison): number {
  const runs = c.key.endsWith('-large')
    ? (c.direction === 'download' ? p.largeDownloads : p.largeUploads).map((x) => x.cpu)
    : p.runs.filter((x) => x.direction === c.direction && x.sizeBytes === c.sizeBytes && x.connections === c.connections).map((x) => x.cpu);
  const v = runs.map((x) => x.otherPercent).filter((x): x is number => x !== undefined && Number.isFinite(x));
  return v.length ? Math.max(...v) : NaN;
}

/** The charts of a run: 4 KiB and 1 MiB matrix (svc vs nginx), large objects, all ratios. */
export function buildCharts(r: HarnessResults): Chart[] {
  const charts: Chart[] = [];
  const p = r.peersNginx;
  const when = `${r.startedAt.slice(0, 16).replace('T', ' ')} UTC, ${r.mode} run, ${p?.settings.rounds ?? 0} round(s); bar: median, whisker: min–max; shared 2-CPU host, noisy`;
  if (p && !p.skipped && p.comparisons.length) {
    const group = (cs: Comparison[]): BarGroup[] => cs.map((c) => ({ label: `${c.direction === 'download' ? 'download' : 'upload'}\n${c.connections} conn.`, values: [spreadOf(c.svc), spreadOf(c.nginx)] }));
    for (const size of [4 * 1024, MiB]) {
      const cs = p.comparisons.filter((c) => c.sizeBytes === size && !c.key.endsWith('-large'));
      if (!cs.length) continue;
      const unit = cs[0].unit;
      const name = size === MiB ? 'nginx-1mib.svg' : 'nginx-4kib.svg';
      const title = `${sizeLabel(size)} objects: svc vs nginx (${unit})`;
      charts.push({ name, title, svg: groupedBarChart({ title, subtitle: when, unit, series: ['svc', 'nginx'], groups: group(cs) }) });
    }
    const large = p.comparisons.filter((c) => c.key.endsWith('-large'));
    if (large.length) {
      const title = `${sizeLabel(p.settings.largeBytes)} objects, one connection: svc vs nginx (MB/s)`;
      charts.push({ name: 'nginx-large.svg', title, svg: groupedBarChart({ title, subtitle: when, unit: 'MB/s', series: ['svc', 'nginx'], groups: large.map((c) => ({ label: c.direction, values: [spreadOf(c.svc), spreadOf(c.nginx)] })), width: 520 }) });
    }
  }
  const rows: RatioRow[] = [];
  for (const c of p?.comparisons ?? []) rows.push({ label: `${c.name} vs nginx`, ratio: spreadOf(c.ratios), target: c.target });
  const tus = tusComparison(r.resumable);
  if (tus && r.resumable) rows.push({ label: `resumable ${sizeLabel(r.resumable.bodyBytes)} vs tus`, ratio: spreadOf(tus.ratios), target: TUS_TARGET });
  if (rows.length) {
    const title = 'svc / peer, same run (higher is better for svc)';
    charts.push({ name: 'ratios.svg', title, svg: ratioChart({ title, subtitle: when, rows }) });
  }
  return charts;
}

/** Writes the charts into `dir`; returns their paths. */
export function writeCharts(dir: string, charts: Chart[]): string[] {
  fs.mkdirSync(dir, { recursive: true });
  return charts.map((c) => {
    const file = path.join(dir, c.name);
    fs.writeFileSync(file, c.svg);
    return file;
  });
}

/** The Markdown between the markers (markers excluded). `chartDir`: the charts' path relative to the document. */
export function renderGeneratedBlock(r: HarnessResults, charts: Chart[], chartDir: string): string {
  const e = r.environment;
  const p = r.peersNginx;
  const l = r.limits;
  const m = r.resumable;
  const minutes = r.finishedAt ? (Date.parse(r.finishedAt) - Date.parse(r.startedAt)) / 60_000 : NaN;
  const L: string[] = [];
  L.push(
    `_Generated by \`npm run bench\` (${r.mode} run${r.mode === 'quick' ? ', --quick: 256 MiB instead of 1 GiB, one round' : ''}); the next full run rewrites everything between the two markers around this block, so edit the hand-written sections instead._`,
    '',
    `- Run: ${r.startedAt} → ${r.finishedAt ?? '?'} (${f(minutes, 1)} min for the whole run, build excluded); code \`${e.gitCommit?.slice(0, 12) ?? 'unknown'}\`${e.gitDirty ? ' with uncommitted changes' : ''}; scenarios: ${r.scenarios.join(', ')}`,
    `- Machine: ${e.cpuModel}, ${e.cpus} CPUs, ${f(e.memoryBytes / 1024 ** 3, 0)} GiB RAM, ${e.os}; load average at start ${e.loadAverageAtStart.join(' / ')}. **The host is shared with other work: single windows vary by tens of percent; read the [min–max] ranges, not only the medians.**`,
    `- Versions: Node ${e.node}; nginx ${p?.nginx?.version ?? (p?.skipped ? `not run (${p.skipped})` : 'n/a')}; ${p?.generators?.wrk ? p.generators.wrk.version : `wrk: ${p?.generators?.wrkMissing ?? 'n/a'}`}; ${l?.openssl?.version ?? `openssl: ${l?.opensslSkipped ?? 'n/a'}`} (Node's own OpenSSL ${l?.nodeCrypto.openssl ?? process.versions.openssl}); @tus/server ${m?.tusVersions?.server ?? 'n/a'} with @tus/file-store ${m?.tusVersions?.fileStore ?? 'n/a'}`,
    `- Load generators: ${p ? generatorText(p) : 'n/a'}`,
    `- Durability, the same on both sides of every comparison: svc \`SVC_DURABILITY=${p?.durability.svc ?? r.durability}\` (nginx scenario) / \`${m?.durability ?? r.durability}\` (resumable scenario): no fsync, the page cache is trusted; nginx WebDAV PUT: no fsync (temp file + rename); tus FileStore: no fsync (fs streams); dd is measured both with \`conv=fdatasync\` and without. Loopback only, data on ${p?.settings.dataDir ?? 'the same disk'}.`,
    '',
  );
  if (r.errors.length) L.push(`**Errors in this run** (${r.errors.length}): ${r.errors.map((x) => `${x.phase}: ${x.message.replace(/\n/g, ' ').slice(0, 200)}`).join('; ')}`, '');

  L.push('#### Summary: svc against the tools it replaces', '');
  L.push('| Scenario | svc median [min–max] | peer median [min–max] | svc / peer median [min–max] | Target | Verdict | Other CPU (max) |', '|---|---|---|---|---|---|---|');
  if (p && !p.skipped) {
    for (const c of p.comparisons) {
      L.push(`| ${c.name} vs nginx | ${f(c.svcMedian)} [${spread(c.svc)}] ${c.unit} | ${f(c.nginxMedian)} [${spread(c.nginx)}] ${c.unit} | ${f(c.medianRatio, 2)}x [${spread(c.ratios, 2)}] | ${c.target === undefined ? '–' : `≥ ${f(c.target, 1)}x`} | ${verdict(c)} | ${pct(hostNoise(p, c))} |`);
    }
  } else L.push(`| svc vs nginx | | | | | ${p?.skipped ? `skipped: ${p.skipped}` : 'not run'} | |`);
  const tus = tusComparison(m);
  if (m && tus) {
    const ratio = spreadOf(tus.ratios)!;
    const straddles = ratio.min < TUS_TARGET && ratio.max >= TUS_TARGET;
    const other = m.runs.filter((x) => x.content === 'fresh').map((x) => x.cpu?.otherPercent).filter((x): x is number => x !== undefined && Number.isFinite(x));
    L.push(`| Resumable upload of ${sizeLabel(m.bodyBytes)} in ${m.partBytes / MiB} MiB parts vs tus | ${f(median(tus.svc))} [${spread(tus.svc)}] MB/s | ${f(median(tus.tus))} [${spread(tus.tus)}] MB/s | ${f(ratio.median, 2)}x [${spread(tus.ratios, 2)}] | ≥ ${f(TUS_TARGET, 1)}x | ${mark(ratio.median >= TUS_TARGET)}${straddles ? '*' : ''} | ${other.length ? pct(Math.max(...other)) : 'n/a'} |`);
  } else L.push(`| Resumable upload vs tus | | | | ≥ ${f(TUS_TARGET, 1)}x | ${m?.skipped ? `skipped: ${m.skipped}` : m?.error ? `failed: ${m.error.slice(0, 200)}` : 'not run'} | |`);
  L.push(
    '',
    `Ratio = svc / peer within the same round (back to back, the order flipped every round); median and [min–max] over ${p?.settings.rounds ?? '?'} round(s)${m && !m.skipped ? ` (resumable: ${m.rounds})` : ''}. \`*\`: the rounds fall on both sides of the target. No target is stated for 1 MiB downloads. Other CPU: the most CPU (% of one core) the rest of the host used in any window of the row, i.e. how much other work competed with the measurement. ` +
      `4 KiB figures are requests/s, the others MB/s (decimal) of body bytes. ${r.mode === 'quick' ? 'Quick run: the large-object targets are stated for 1 GiB.' : ''}`,
    '',
  );
  if (p && !p.skipped && p.runs.length) {
    const cells: string[] = [];
    for (const direction of ['download', 'upload'] as const) {
      for (const m of p.settings.matrix) {
        const of = (peer: 'svc' | 'nginx') => p.runs.filter((y) => y.peer === peer && y.direction === direction && y.sizeBytes === m.sizeBytes);
        const s = of('svc');
        const n = of('nginx');
        if (!s.length && !n.length) continue;
        const med = (x: typeof s, pick: (y: (typeof s)[number]) => number | undefined) => pct(median(x.map(pick).filter((v): v is number => v !== undefined && Number.isFinite(v))));
        cells.push(`${direction}s of ${sizeLabel(m.sizeBytes)} (${m.generator}): server svc ${med(s, (y) => y.cpu.serverPercent)} / nginx ${med(n, (y) => y.cpu.serverPercent)}, generator ${med(s, (y) => y.cpu.benchPercent)} / ${med(n, (y) => y.cpu.benchPercent)}`);
      }
    }
    L.push(`CPU, % of one core (${e.cpus} CPUs = ${e.cpus * 100}%), median over the windows: ${cells.join('; ')}. Per-window figures are in the JSON and in bench/results/latest.md.`, '');
  }
  if (p?.generatorCheck.length) {
    const reps = Math.max(...p.generatorCheck.map((g) => g.rep)) + 1;
    L.push(`Load generator check (the same download cell against the same server, generators back to back, ${reps} window(s) each${reps > 1 ? ': median [min–max]' : ''}):`, '');
    L.push('| Server | Cell | Generator | Requests/s | Generator CPU | Server CPU | Other CPU |', '|---|---|---|---|---|---|---|');
    const keys = [...new Set(p.generatorCheck.map((g) => `${g.peer}|${g.sizeBytes}|${g.connections}|${g.generator}`))];
    for (const k of keys) {
      const x = p.generatorCheck.filter((g) => `${g.peer}|${g.sizeBytes}|${g.connections}|${g.generator}` === k);
      const med = (v: Array<number | undefined>) => median(v.filter((y): y is number => y !== undefined && Number.isFinite(y)));
      L.push(`| ${x[0].peer} | GET ${sizeLabel(x[0].sizeBytes)} x${x[0].connections} | ${x[0].generator} | ${f(med(x.map((g) => g.requestsPerSecond)))} [${spread(x.map((g) => g.requestsPerSecond))}] | ${pct(med(x.map((g) => g.generatorCpuPercent)))} | ${pct(med(x.map((g) => g.serverCpuPercent)))} | ${pct(med(x.map((g) => g.otherCpuPercent)))} |`);
    }
    L.push('');
  }

  L.push('#### Machine limits (same run)', '');
  if (l) {
    const node = l.nodeCrypto;
    L.push('| Limit | Median [min–max] |', '|---|---|');
    L.push(`| SHA-256, node:crypto, one thread (hashing time only) | ${mbs(node.medianMbPerSecond)} [${spread(node.runs.map((x) => x.mbPerSecond))}] |`);
    if (l.openssl) L.push(`| SHA-256, \`openssl dgst -sha256\` (whole command, same file) | ${mbs(l.openssl.medianMbPerSecond)} [${spread(l.openssl.runs.map((x) => x.mbPerSecond))}] |`);
    else L.push(`| SHA-256, \`openssl dgst -sha256\` | skipped: ${l.opensslSkipped ?? 'not run'} |`);
    if (l.opensslSpeed) L.push(`| SHA-256, \`openssl speed -evp sha256\`, 1 MiB blocks in memory | ${mbs(l.opensslSpeed.mbPerSecond)} |`);
    if (l.disk.skipped) L.push(`| Disk write, dd | skipped: ${l.disk.skipped} |`);
    else {
      const dd = (v: 'fdatasync' | 'page cache') => l.disk.runs.filter((x) => x.variant === v).map((x) => x.mbPerSecond);
      const size = l.disk.runs[0] ? sizeLabel(l.disk.runs[0].bytes) : '?';
      L.push(`| Disk write, \`dd bs=1M conv=fdatasync\` (${size}, ${l.disk.fsType}) | ${mbs(l.disk.fdatasyncMedianMbPerSecond)} [${spread(dd('fdatasync'))}] |`);
      L.push(`| Disk write, \`dd bs=1M\`, no sync (page cache) | ${mbs(l.disk.pageCacheMedianMbPerSecond)} [${spread(dd('page cache'))}] |`);
    }
    for (const s of l.svcFigures ?? []) {
      const disk = s.durability === 'strict' ? l.disk.fdatasyncMedianMbPerSecond : l.disk.pageCacheMedianMbPerSecond;
      const ratio = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? 'n/a' : `${f(s.mbPerSecond / x, 2)}x`);
      L.push(`| svc: ${s.name} | ${mbs(s.mbPerSecond)}: ${ratio(node.medianMbPerSecond)} node:crypto SHA-256, ${ratio(l.openssl?.medianMbPerSecond)} openssl dgst, ${ratio(disk)} dd (${s.durability === 'strict' ? 'fdatasync' : 'page cache'}) |`);
    }
    L.push('');
  } else L.push('Not measured in this run.', '');

  if (m && !m.skipped) {
    L.push('#### Resumable uploads vs tus (same run)', '');
    L.push(
      `${sizeLabel(m.bodyBytes)} per upload as one session of ${m.partBytes / MiB} MiB parts on one keep-alive connection, svc (\`/api/v1/uploads\`) and \`@tus/server\` + \`@tus/file-store\` alternating, ${m.rounds} round(s), a fresh file each round: ` +
        (m.svc && m.tus && m.ratio
          ? `svc ${mbs(m.svc.medianMbPerSecond)}, tus ${mbs(m.tus.medianMbPerSecond)} (medians): ${f(m.ratio.median, 2)}x as the ratio of the medians (the summary's figure is the median of the per-round ratios), target ≥ ${f(TUS_TARGET, 1)}x: ${mark(m.ratio.median >= TUS_TARGET)}; with svc's commit ${f(m.ratio.medianWithCommit, 2)}x; commit ${f(m.svc.medianCommitMs)} ms median. Details in the hand-written sections and in bench/results/latest.md.`
          : `${m.error ? `stopped early: ${m.error.replace(/\n/g, ' ').slice(0, 300)}` : 'no complete pair of runs'}.`),
      '',
    );
  }

  if (charts.length) {
    L.push('#### Charts', '');
    for (const c of charts) L.push(`![${c.title}](${chartDir}/${c.name})`, '');
  }
  return L.join('\n').replace(/\n+$/, '\n');
}

/** `doc` with the text between the markers replaced by `block`; throws when the markers are missing or out of order. */
export function replaceGeneratedBlock(doc: string, block: string): string {
  const a = doc.indexOf(BEGIN_MARKER);
  const b = doc.indexOf(END_MARKER);
  if (a < 0 || b < 0 || b < a || doc.indexOf(BEGIN_MARKER, a + 1) >= 0 || doc.indexOf(END_MARKER, b + 1) >= 0) {
    throw new Error(`expected exactly one ${BEGIN_MARKER} followed by one ${END_MARKER}`);
  }
  return `${doc.slice(0, a + BEGIN_MARKER.length)}\n${block}${doc.slice(b)}`;
}
