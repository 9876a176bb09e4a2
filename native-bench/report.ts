import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BenchResult } from './harness.js';

export interface Environment {
  date: string;
  node: string;
  v8: string;
  platform: string;
  arch: string;
  cpus: number;
  cpuModel: string;
  /** 1-minute load average when the run started: other processes skew every number. */
  loadAverageAtStart: number;
}

export function environment(): Environment {
  const cpus = os.cpus();
  return {
    date: new Date().toISOString(),
    node: process.version,
    v8: process.versions.v8,
    platform: `${os.type()} ${os.release()}`,
    arch: process.arch,
    cpus: os.availableParallelism(),
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    loadAverageAtStart: Number(os.loadavg()[0].toFixed(2)),
  };
}

function formatThroughput(value: number): string {
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  if (value >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

export function markdownTable(results: BenchResult[]): string {
  const lines = ['| Benchmark | Throughput | Unit | Samples |', '|---|---:|---|---:|'];
  for (const r of results) lines.push(`| ${r.name} | ${formatThroughput(r.throughput)} | ${r.unit} | ${r.samples} |`);
  return lines.join('\n');
}

export function writeJson(file: string, payload: unknown): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(payload, null, 2)}\n`);
}
