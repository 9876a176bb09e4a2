// Every command in README.md and docs/ runs as written against a fresh server.
//
// Each page runs ALONE: its ```sh blocks run in order as one bash script (`set -euo pipefail`)
// in an empty directory of its own, against a server of its own started as `npm start` would
// (defaults, a fresh temporary data directory, free ports), so a page passes only if it makes
// every file it uses and registers every schema it names itself. The directory stands for the
// checkout: `bin` in it links to this checkout's bin/, so `./bin/svc.js`, the one way the pages
// run the CLI, works as written (no `svc` on PATH: a page that runs a bare `svc` fails).
// `127.0.0.1:8081` / `localhost:8081` in the text become the server's blob port, `localhost:8080`
// its model port, `localhost:9000` its S3 port. curl fails on any answer of 400 or more
// (`--fail-with-body` is added to every call), so a page whose command is answered with an error
// fails here. A block that cannot run in a test (installing, starting a server, a benchmark, a
// stream that never ends) is preceded in the page by a visible marker,
// `<!-- walkthrough: skip (why) -->`; nothing is skipped silently. A page that names the MLeap
// fixtures needs ../shared (skipped with a message when it is absent). A page whose server needs
// variables of its own (security on) names them in `<!-- walkthrough: env NAME=VALUE ... -->`
// ($DIR in a value is the page's directory) beside its own start block, which is skipped; the
// page's blocks above the marker (making a file the server reads at start) run before the
// server starts, the rest after, with that server's SVC_FS_ROOT (as a user's `svc reload`
// beside the server it started). Pages run concurrently, a few at a time.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
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

/** The line (1-based) of the page's env marker, or 0 without one. */
function envMarkerLine(text: string): number {
  return text.split('\n').findIndex((l) => ENV.test(l)) + 1;
}

/** Pages running at once: each starts a server; more would only make them slower on 2 cores. */
const CONCURRENT_PAGES = 3;
let running = 0;
const waiting: Array<() => void> = [];
async function slot<T>(work: () => Promise<T>): Promise<T> {
  while (running >= CONCURRENT_PAGES) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/** A line of a code block that runs the CLI as a bare `svc` (not ./bin/svc.js). */
const BARE_SVC = /(^\s*(\$ )?|\$\(|[;&|]\s*|^\s*([A-Z_]+=\S*\s+)+)svc\s/;

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

describe('walkthroughs: every command of README.md and docs/ runs as written', () => {
  it('every shell block either runs here or says why not', () => {
    for (const page of pages) {
      for (const block of shellBlocks(fs.readFileSync(path.join(REPO, page), 'utf8'))) {
        expect([page, block.line, block.code.trim().length > 0]).toEqual([page, block.line, true]);
      }
    }
  });

  it('every page runs the CLI as ./bin/svc.js; a bare svc only beside npm link, the optional extra', () => {
    for (const page of pages) {
      const text = fs.readFileSync(path.join(REPO, page), 'utf8');
      const bare = shellBlocks(text)
        .filter((b) => !/^npm link\b/m.test(b.code))
        .flatMap((b) => b.code.split('\n').filter((l) => !l.trimStart().startsWith('#') && BARE_SVC.test(l)));
      const prompts = text.split('\n').filter((l) => /^\$ svc\s/.test(l));
      expect([page, [...bare, ...prompts]]).toEqual([page, []]);
    }
  });

  for (const page of pages) {
    const text = fs.readFileSync(path.join(REPO, page), 'utf8');
    const blocks = shellBlocks(text).filter((b) => !b.skipped);
    if (blocks.length === 0) continue;
    const needsFixtures = blocks.some((b) => b.code.includes('airbnb.model.lr.zip'));
    const fixturesAbsent = needsFixtures && !fs.existsSync(AIRBNB);
    if (fixturesAbsent) console.warn(`walkthrough of ${page} skipped: the MLeap fixtures (../shared) are absent`);
    const marker = envMarkerLine(text);
    const beforeServer = blocks.filter((b) => b.line < marker);
    const afterServer = blocks.filter((b) => b.line >= marker);
    (fixturesAbsent ? it.skip : it.concurrent)(page, () => slot(async () => {
      const dir = tempRoot('svc-walk-');
      fs.symlinkSync(path.join(REPO, 'bin'), path.join(dir, 'bin'));
      const env = { ...process.env, XDG_CACHE_HOME: path.join(dir, '.cache') };
      const prelude = 'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; }\n';
      const runBlocks = async (part: typeof blocks, replace: (code: string) => string, extra: Record<string, string>): Promise<string> => {
        if (part.length === 0) return 'ok';
        const script = replace(part.map((b) => `# ${page}:${b.line}\n${b.code}`).join('\n'));
        const result = await run('bash', ['-c', prelude + script], {
          cwd: dir, env: { ...env, ...extra }, timeout: 150_000, maxBuffer: 64 * 1024 * 1024,
        }).catch((err: { code?: number; stdout?: string; stderr?: string }) => err);
        const failed = 'code' in result && result.code !== undefined && result.code !== 0;
        return failed ? `${page} failed (exit ${result.code}):\n${String(result.stderr).slice(-3000)}\n--- stdout tail:\n${String(result.stdout).slice(-1500)}` : 'ok';
      };
      try {
        // Blocks above an env marker make what the server reads at its start (a policy file).
        expect(await runBlocks(beforeServer, (code) => code, {})).toBe('ok');
        const server = await startServer({ SVC_LOG_LEVEL: 'warn', ...pageEnv(text, dir) });
        try {
          const host = `127.0.0.1:${server.port}`;
          const replace = (code: string) => code
            .replaceAll('127.0.0.1:8081', host)
            .replaceAll('localhost:8081', host)
            .replaceAll('localhost:8080', `127.0.0.1:${server.modelPort}`)
            .replaceAll('localhost:9000', `127.0.0.1:${server.s3Port}`)
            .replaceAll('file:///models/airbnb.model.lr.zip', `file://${AIRBNB}`);
          // SVC_SERVER: the CLI's default address, http://127.0.0.1:8081, is this server's.
          expect(await runBlocks(afterServer, replace, { SVC_SERVER: `http://${host}`, SVC_FS_ROOT: server.root })).toBe('ok');
        } finally {
          await server.stop();
        }
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }), 400_000);
  }
});
