/**
 * Two Node runtimes in the same run: `dist/bench/run.js --quick --no-docs` (every process of it, the
 * bench, its servers and their workers, on that Node) under each, alternating the order every round,
 * then a table of the figures that matter for the choice of runtime: the ingest ratio (ingest of the
 * body against node:crypto SHA-256 of the same bytes, both on that Node), 4 KiB GETs, and model
 * transforms. The raw results stay in bench/results/<timestamp>.json, one per run.
 *
 *   npm run build && node dist/bench/node-versions.js [--before=/usr/bin/node] [--after=NODE] [--rounds=N]
 *
 * --before defaults to /usr/bin/node (the machine's own, Node 20 here), --after to the Node running
 * this script (under npm, the packaged Node 22), --rounds to 2. dist/ must hold the uWS addon of
 * both ABIs (the build writes one per ABI, native/uws-error-pages.ts). `--tabulate=a.json,b.json,...`
 * prints the table of earlier runs' results (the older Node first) without running anything.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './args.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const RUN = path.join(REPO, 'dist', 'bench', 'run.js');

interface Options {
  before: string;
  after: string;
  rounds: number;
  /** Results of earlier runs to tabulate instead of running (two Node versions among them). */
  tabulate?: string[];
}

function parseOptions(): Options {
  const args = benchArgs({
    usage: 'usage: node dist/bench/node-versions.js [--before=NODE] [--after=NODE] [--rounds=N] [--tabulate=RESULTS.json,...]',
    options: {
      before: { type: 'string', value: 'NODE', default: '/usr/bin/node', help: 'the first Node runtime' },
      after: { type: 'string', value: 'NODE', help: 'the second Node runtime (default: the Node running this script; under npm, the packaged Node 22)' },
      rounds: { type: 'string', value: 'N', default: '2', help: 'rounds, each runtime once per round' },
      tabulate: { type: 'string', value: 'RESULTS.json,...', help: 'print the table of earlier runs\' results instead of running' },
    },
  });
  const { before, after, tabulate } = args.values;
  return { before, after: after ?? process.execPath, rounds: args.number('rounds'), tabulate: tabulate?.split(',') };
}

/** What one run reports, as the figures of the table. */
interface Figures {
  node: string;
  ingestMbPerSecond?: number;
  sha256MbPerSecond?: number;
  ingestRatio?: number;
  /** CPU of the rest of the host (% of one core) during the median ingest round: other work competing. */
  ingestOtherCpu?: number;
  gets: Record<string, number>;
  models: Record<string, number>;
  errors: string[];
}

function version(node: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(node, ['-p', 'process.version'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`${node} -p process.version exited ${code}`))));
  });
}

/** One quick harness run under `node`; resolves with the path of its results JSON. */
function runUnder(node: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(node, [RUN, '--quick', '--no-docs'], { cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d;
      process.stderr.write(d);
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      const file = /wrote (bench\/results\/\S+\.json)/.exec(err)?.[1];
      if (file) resolve(path.join(REPO, file));
      else reject(new Error(`${node} ${RUN} exited ${code} without writing its results`));
    });
  });
}

function figures(file: string): Figures {
  const r = JSON.parse(readFileSync(file, 'utf8'));
  const gets: Record<string, number> = {};
  for (const d of r.smallDownloads ?? []) {
    gets[`4 KiB GETs, ${d.label} (req/s)`] = d.requestsPerSecond;
    if (typeof d.cpu?.otherPercent === 'number') gets[`other processes' CPU during the GETs, ${d.label} (% of a core)`] = d.cpu.otherPercent;
  }
  const models: Record<string, number> = {};
  for (const c of r.models?.cells ?? []) models[`${c.label}, ${c.mode}, ${c.rowsPerRequest} row(s), ${c.connections} conn. (µs/row)`] = c.usPerRow;
  return {
    node: r.environment?.node ?? '?',
    ingestMbPerSecond: r.ingest?.mbPerSecond,
    sha256MbPerSecond: r.sha256?.mbPerSecond,
    ingestRatio: r.ingest?.ratioToSha256,
    ingestOtherCpu: r.ingest?.cpu?.otherPercent,
    gets,
    models,
    errors: (r.errors ?? []).map((e: { phase: string; message: string }) => `${e.phase}: ${e.message}`),
  };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function cell(xs: number[], digits: number): string {
  if (!xs.length) return 'n/a';
  const fmt = (x: number) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return xs.length === 1 ? fmt(xs[0]) : `${fmt(median(xs))} [${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}]`;
}

async function main(): Promise<void> {
  const opts = parseOptions();
  let versions: string[];
  const runs: Figures[][] = [[], []];
  if (opts.tabulate) {
    const all = opts.tabulate.map((f) => figures(path.resolve(f)));
    versions = [...new Set(all.map((f) => f.node))].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
    if (versions.length !== 2) throw new Error(`--tabulate needs the results of exactly two Node versions, not ${versions.join(', ')}`);
    for (const f of all) runs[versions.indexOf(f.node)].push(f);
    opts.rounds = Math.max(runs[0].length, runs[1].length);
  } else {
    versions = await Promise.all([opts.before, opts.after].map(version));
    await runRounds(opts, versions, runs);
  }
  table(opts, versions, runs);
}

async function runRounds(opts: Options, versions: string[], runs: Figures[][]): Promise<void> {
  const nodes = [opts.before, opts.after];
  for (let round = 0; round < opts.rounds; round++) {
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    for (const i of order) {
      process.stderr.write(`[node-versions] round ${round + 1}/${opts.rounds}: ${versions[i]} (${nodes[i]})\n`);
      runs[i].push(figures(await runUnder(nodes[i])));
    }
  }
}

function table(opts: Options, versions: string[], runs: Figures[][]): void {
  const rows: Array<[string, (f: Figures) => number | undefined, number]> = [
    ['ingest ratio: ingest / node:crypto SHA-256', (f) => f.ingestRatio, 2],
    ['ingest of 256 MiB, median of 3 (MB/s)', (f) => f.ingestMbPerSecond, 0],
    ['node:crypto SHA-256 of the same bytes (MB/s)', (f) => f.sha256MbPerSecond, 0],
    ["other processes' CPU during the ingest (% of a core)", (f) => f.ingestOtherCpu, 0],
  ];
  const keys = (pick: (f: Figures) => Record<string, number>) => [...new Set(runs.flat().flatMap((f) => Object.keys(pick(f))))];
  for (const k of keys((f) => f.gets)) rows.push([k, (f) => f.gets[k], 0]);
  for (const k of keys((f) => f.models)) rows.push([k, (f) => f.models[k], 2]);
  const values = (i: number, pick: (f: Figures) => number | undefined) => runs[i].map(pick).filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
  const lines = [
    `| Figure (median [min–max] of ${opts.rounds} run(s)) | ${versions[0]} | ${versions[1]} | ${versions[1]} / ${versions[0]} |`,
    '|---|---|---|---|',
  ];
  for (const [label, pick, digits] of rows) {
    const [a, b] = [values(0, pick), values(1, pick)];
    const ratio = a.length && b.length ? `${(median(b) / median(a)).toFixed(2)}x` : 'n/a';
    lines.push(`| ${label} | ${cell(a, digits)} | ${cell(b, digits)} | ${ratio} |`);
  }
  console.log(lines.join('\n'));
  for (const [i, list] of runs.entries()) {
    for (const f of list) for (const e of f.errors) console.log(`error under ${versions[i]}: ${e}`);
  }
}

await main();
