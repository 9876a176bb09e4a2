// Every benchmark entry point parses its arguments with bench/args.ts (issue 38): `--help` prints
// the usage and exits 0 before the bench starts anything, an unknown option prints the usage on
// stderr and exits 2. The benches themselves are never run here.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('..', import.meta.url));

/** The programs under bench/ (the bench:* scripts and the others documented to be run). */
const ENTRIES = [
  'block-put-cost', 'bulk-migration', 'documents-cluster', 'gc-ops', 'house-ab', 'idempotency', 'job-pickup', 'legacy-import', 'metadata-search',
  'node-versions', 'peers-nginx', 'pg-catalog', 'pg-s3', 'pg-s3-cost', 'pg-s3-holdings', 'pg-statement-cost', 'refused-names', 'run', 's3-api', 's3-layout',
  'security', 'tenant-accounting', 'tus-clients', 'tus-server',
];

function runBench(name: string, arg: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [`dist/bench/${name}.js`, arg], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('bench entry points', () => {
  it('every bench:* script is listed, and no bench reads process.argv but through bench/args.ts', () => {
    const scripts = Object.values((JSON.parse(readFileSync(`${REPO}package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts);
    const named = scripts.flatMap((s) => [...s.matchAll(/dist\/bench\/([a-z0-9-]+)\.js/g)].map((m) => m[1]!));
    expect(named.length).toBeGreaterThan(10);
    for (const name of named) expect(ENTRIES).toContain(name);
    for (const file of readdirSync(`${REPO}bench`).filter((f) => f.endsWith('.ts') && f !== 'args.ts')) {
      const source = readFileSync(`${REPO}bench/${file}`, 'utf8');
      // process.argv[1] is only the "run as a program?" check of a bench that others import.
      expect(source.replaceAll('process.argv[1]', ''), file).not.toContain('process.argv');
      expect(source.includes("from './args.js'"), file).toBe(ENTRIES.includes(file.replace(/\.ts$/, '')));
    }
  });

  describe.concurrent.each(ENTRIES)('%s', (name) => {
    const usage = `usage: node dist/bench/${name}.js`;

    it('--help prints the usage and the options and exits 0', async () => {
      const r = await runBench(name, '--help');
      expect(r.code).toBe(0);
      expect(r.stdout.startsWith(usage)).toBe(true);
      expect(r.stdout).toContain('-h, --help');
      expect(r.stderr).toBe(''); // nothing started: no progress line, no server's output
    });

    it('an unknown option prints the usage on stderr and exits 2', async () => {
      const r = await runBench(name, '--no-such-flag');
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain(`${name}: Unknown option '--no-such-flag'`);
      expect(r.stderr).toContain(usage);
    });
  });
});
