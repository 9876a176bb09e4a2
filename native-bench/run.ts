/**
 * Native and near-native building blocks of the engine, measured in isolation: hashing,
 * chunking, the LMDB catalog, handing segments to worker threads, and memcpy as reference.
 * `npm run native-bench` builds and runs this; the table goes to stdout, progress to stderr,
 * and the results to native-bench/results/latest.json.
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchCatalog } from './catalog.js';
import { benchChunkers } from './chunking.js';
import { benchHandoff } from './handoff.js';
import type { BenchResult } from './harness.js';
import { benchHashes } from './hashes.js';
import { benchMemcopy } from './memcopy.js';
import { environment, markdownTable, writeJson } from './report.js';

// dist/native-bench/run.js -> <repo>/native-bench/results/latest.json
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const OUTPUT = path.join(repoRoot, 'native-bench', 'results', 'latest.json');

async function main(): Promise<void> {
  const env = environment();
  const started = performance.now();
  process.stderr.write(`native-bench: node ${env.node}, ${env.cpus} cpus (${env.cpuModel}), load average ${env.loadAverageAtStart}\n`);
  if (env.loadAverageAtStart > 0.75) process.stderr.write('native-bench: warning: the machine is busy; numbers will be low and noisy\n');

  const results: BenchResult[] = [];
  results.push(...(await benchMemcopy()));
  results.push(...(await benchHashes()));
  const chunking = await benchChunkers();
  results.push(...chunking.results);
  const catalog = await benchCatalog();
  results.push(...catalog.results);
  results.push(...(await benchHandoff()));

  const seconds = (performance.now() - started) / 1000;
  const notes = [
    ...chunking.stats.map((s) => `- ${s.chunker}: ${s.blocks} blocks, mean ${(s.meanBlockBytes / 1024).toFixed(0)} KiB (${(s.minBlockBytes / 1024).toFixed(0)}-${(s.maxBlockBytes / 1024).toFixed(0)} KiB)`),
    `- LMDB values: ${catalog.valueBytes} bytes of msgpack on average; keys 32 bytes binary`,
    `- MB = 10^6 bytes; throughput = total work / total timed time (mean latency); ${seconds.toFixed(1)} s in all`,
  ];
  process.stdout.write(`\n## native-bench (${env.date.slice(0, 10)}, node ${env.node}, ${env.cpus} cpus)\n\n${markdownTable(results)}\n\n${notes.join('\n')}\n`);

  writeJson(OUTPUT, {
    environment: { ...env, loadAverageAtEnd: Number(os.loadavg()[0].toFixed(2)) },
    durationSeconds: Number(seconds.toFixed(1)),
    chunking: chunking.stats,
    lmdbValueBytes: catalog.valueBytes,
    results,
  });
  process.stderr.write(`native-bench: wrote ${path.relative(process.cwd(), OUTPUT) || OUTPUT}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`native-bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
