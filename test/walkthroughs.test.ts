// Every command in README.md and docs/ runs as written against a fresh server.
//
// Each page's ```sh blocks run in order as one bash script (`set -euo pipefail`) in an empty
// directory that holds the files the pages name (report.pdf, photo.jpg, movie.mp4, ...), against a
// server of its own started as `npm start` would (defaults, a temporary data directory, free
// ports): `127.0.0.1:8081` / `localhost:8081` in the text become its blob port, `localhost:8080`
// its model port, `localhost:9000` its S3 port, and `svc` runs this checkout's bin/svc.js. curl fails on any answer of 400 or
// more (`--fail-with-body` is added to every call), so a page whose command is answered with an
// error fails here. A block that cannot run in a test (installing, starting a server, a
// benchmark, a stream that never ends) is preceded in the page by a visible marker,
// `<!-- walkthrough: skip (why) -->`; nothing is skipped silently. A page that names the MLeap
// fixtures needs ../shared (skipped with a message when it is absent). A page whose server needs
// variables of its own (security on) names them in `<!-- walkthrough: env NAME=VALUE ... -->`
// ($DIR in a value is the page's directory, made before the server starts), beside its own
// start block, which is skipped; the commands then run with that server's SVC_FS_ROOT (as a
// user's `svc reload` beside the server it started).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { seededBytes } from './helpers/http.js';
import { syntheticPdf } from './helpers/pdf.js';
import { startServer, tempRoot } from './helpers/server.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const AIRBNB = path.join(REPO, '../shared/fixtures/mleap/combust-mleap/mleap-benchmark/src/main/resources/models/airbnb.model.lr.zip');
const SKIP = /<!--\s*walkthrough:\s*skip\b[^>]*-->\s*$/;
const ENV = /<!--\s*walkthrough:\s*env\s+([^>]*?)\s*-->/;

/** The server variables a page names in its env marker, $DIR made the page's directory. */
function pageEnv(text: string, dir: string): Record<string, string> {
  const marker = ENV.exec(text);
  if (!marker) return {};
  return Object.fromEntries(marker[1]!.split(/\s+/).map((pair) => {
    const at = pair.indexOf('=');
    return [pair.slice(0, at), pair.slice(at + 1).replaceAll('$DIR', dir)];
  }));
}

const pages = ['README.md', ...fs.readdirSync(path.join(REPO, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];

/** The page's shell blocks, each with whether a skip marker precedes it. */
function shellBlocks(text: string): Array<{ code: string; skipped: boolean; line: number }> {
  const blocks: Array<{ code: string; skipped: boolean; line: number }> = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(sh|bash|shell)\s*$/.test(lines[i]!)) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    let before = start - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    blocks.push({ code: body.join('\n'), skipped: before >= 0 && SKIP.test(lines[before]!), line: start + 1 });
  }
  return blocks;
}

/** The files the pages upload, made here (real PDFs, random bytes). */
function makeFiles(dir: string): void {
  for (const name of ['report.pdf', 'filing.pdf', 'file.pdf']) fs.writeFileSync(path.join(dir, name), syntheticPdf(6, name.length));
  fs.writeFileSync(path.join(dir, 'photo.jpg'), seededBytes(300_000, 1));
  fs.writeFileSync(path.join(dir, 'movie.mp4'), seededBytes(20_000_000, 2));
  fs.writeFileSync(path.join(dir, 'film.mp4'), seededBytes(70 * 1024 * 1024, 3));
  fs.writeFileSync(path.join(dir, 'data.bin'), seededBytes(3 * 1024 * 1024, 4));
  // security.md's tenant policy file, as its start block writes it.
  fs.writeFileSync(path.join(dir, 'policy.json'), '{ "default": { "requestsPerMinute": 6000 } }\n');
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  fs.writeFileSync(path.join(bin, 'svc'), `#!/bin/sh\nexec "${process.execPath}" "${path.join(REPO, 'bin/svc.js')}" "$@"\n`, { mode: 0o755 });
}

describe('walkthroughs: every command of README.md and docs/ runs as written', () => {
  it('every shell block either runs here or says why not', () => {
    for (const page of pages) {
      for (const block of shellBlocks(fs.readFileSync(path.join(REPO, page), 'utf8'))) {
        expect([page, block.line, block.code.trim().length > 0]).toEqual([page, block.line, true]);
      }
    }
  });

  for (const page of pages) {
    const text = fs.readFileSync(path.join(REPO, page), 'utf8');
    const blocks = shellBlocks(text).filter((b) => !b.skipped);
    if (blocks.length === 0) continue;
    const needsFixtures = blocks.some((b) => b.code.includes('airbnb.model.lr.zip'));
    const fixturesAbsent = needsFixtures && !fs.existsSync(AIRBNB);
    if (fixturesAbsent) console.warn(`walkthrough of ${page} skipped: the MLeap fixtures (../shared) are absent`);
    it.skipIf(fixturesAbsent)(page, async () => {
      const dir = tempRoot('svc-walk-');
      makeFiles(dir);
      const server = await startServer({ SVC_LOG_LEVEL: 'warn', ...pageEnv(text, dir) });
      try {
        const host = `127.0.0.1:${server.port}`;
        const script = blocks
          .map((b) => `# ${page}:${b.line}\n${b.code}`)
          .join('\n')
          .replaceAll('127.0.0.1:8081', host)
          .replaceAll('localhost:8081', host)
          .replaceAll('localhost:8080', `127.0.0.1:${server.modelPort}`)
          .replaceAll('localhost:9000', `127.0.0.1:${server.s3Port}`)
          .replaceAll('file:///models/airbnb.model.lr.zip', `file://${AIRBNB}`);
        const prelude = 'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; }\n';
        const result = await run('bash', ['-c', prelude + script], {
          cwd: dir,
          env: { ...process.env, PATH: `${path.join(dir, 'bin')}:${process.env.PATH}`, SVC_SERVER: `http://${host}`, SVC_FS_ROOT: server.root },
          timeout: 120_000,
          maxBuffer: 64 * 1024 * 1024,
        }).catch((err: { code?: number; stdout?: string; stderr?: string }) => err);
        const failed = 'code' in result && result.code !== undefined && result.code !== 0;
        expect(failed ? `${page} failed (exit ${result.code}):\n${String(result.stderr).slice(-3000)}\n--- stdout tail:\n${String(result.stdout).slice(-1500)}` : 'ok').toBe('ok');
      } finally {
        await server.stop();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }, 180_000);
  }
});
