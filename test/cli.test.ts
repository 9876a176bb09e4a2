// The command-line client (`svc put|get|stat|ls`) run as a real process against a real server.

import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';
import { contentId, seededBytes } from './helpers/http.js';

const MAIN = fileURLToPath(new URL('../dist/server/main.js', import.meta.url));
const MiB = 1024 * 1024;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  bytes: Buffer;
}

interface Running {
  proc: ChildProcess;
  stderr: () => string;
  done: Promise<Run>;
}

function start(args: string[], env: Record<string, string>): Running {
  const proc = spawn(process.execPath, [MAIN, ...args], { env: { ...process.env, SVC_SERVER: '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  let stderr = '';
  proc.stdout!.on('data', (d: Buffer) => out.push(d));
  proc.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<Run>((resolve) =>
    proc.once('close', (code) => {
      const bytes = Buffer.concat(out);
      resolve({ code, stdout: bytes.toString('utf8'), stderr, bytes });
    }),
  );
  return { proc, stderr: () => stderr, done };
}

const sha256File = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

async function until(check: () => Promise<boolean> | boolean, ms: number, every = 10): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, every));
  }
}

describe('svc client commands', () => {
  let server: TestServer;
  let dir: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => start(args, env).done;
  const withServer = (...args: string[]) => cli(...args, '--server', server.url);

  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed' });
    dir = tempRoot('svc-cli-');
    env = { XDG_CACHE_HOME: path.join(dir, 'cache') };
  });

  afterAll(async () => {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('put of a small file is a direct upload whose id is the SHA-256 of the file', async () => {
    const body = seededBytes(300_000, 11);
    const file = path.join(dir, 'small.bin');
    fs.writeFileSync(file, body);
    const run = await withServer('put', file);
    expect(run.stderr).not.toContain('upload session');
    expect(run).toMatchObject({ code: 0, stdout: `${contentId(body)}\n` });

    // The same file through stdout of get, and SVC_SERVER instead of --server.
    const got = await start(['get', contentId(body)], { ...env, SVC_SERVER: server.url }).done;
    expect(got.code).toBe(0);
    expect(got.bytes.equals(body)).toBe(true);
  });

  it('put of 24 MiB above the threshold goes through a resumable session; get -o round-trips it', async () => {
    const body = seededBytes(24 * MiB, 12);
    const file = path.join(dir, 'medium.bin');
    fs.writeFileSync(file, body);
    const run = await withServer('put', file, '--threshold', '1MiB', '--part-size', '4MiB');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`${contentId(body)}\n`);
    const session = /upload session ([0-9a-f-]{36}), 6 parts/.exec(run.stderr)?.[1];
    expect(session).toBeDefined();
    const status = (await (await fetch(`${server.url}/api/v1/uploads/${session}`)).json()) as any;
    expect(status).toMatchObject({ state: 'Committed', committedBlob: contentId(body), partCount: 6, offset: 24 * MiB });
    // The resume state is gone once the upload is done.
    expect(fs.readdirSync(path.join(dir, 'cache', 'svc', 'uploads'))).toEqual([]);

    const out = path.join(dir, 'medium.out');
    const got = await withServer('get', contentId(body), '-o', out);
    expect(got).toMatchObject({ code: 0, stdout: '' });
    expect(fs.readFileSync(out).equals(body)).toBe(true);
  });

  it('get -o resumes a truncated file with a range request and checks the whole', async () => {
    const body = seededBytes(24 * MiB, 12);
    const id = contentId(body);
    const out = path.join(dir, 'partial.out');
    fs.writeFileSync(out, body.subarray(0, 5 * MiB + 123));
    const got = await withServer('get', id, '-o', out);
    expect(got.code).toBe(0);
    expect(got.stderr).toContain(`resuming ${out} at byte ${5 * MiB + 123}`);
    expect(fs.readFileSync(out).equals(body)).toBe(true);

    // Complete already: nothing to fetch.
    const again = await withServer('get', id, '-o', out);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain('already complete');

    // A prefix that is not the blob's: the check at the end says so, exit 1.
    const wrong = Buffer.from(body.subarray(0, MiB));
    wrong[1000] ^= 0xff;
    fs.writeFileSync(out, wrong);
    const bad = await withServer('get', id, '-o', out);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/svc: .* does not match the id: .*were there before this download/);
  });

  it('ls lists the blobs (one line each, every page with --all); stat prints headers and summary', async () => {
    const medium = contentId(seededBytes(24 * MiB, 12));
    const small = contentId(seededBytes(300_000, 11));
    const ls = await withServer('ls');
    expect(ls.code).toBe(0);
    const lines = ls.stdout.trim().split('\n');
    expect(lines.some((l) => /^\S+\t[0-9]+\t\S+\t\S+Z$/.test(l) && l.startsWith(`${medium}\t${24 * MiB}\tapplication/octet-stream\t`))).toBe(true);
    expect(lines.some((l) => l.startsWith(`${small}\t300000\t`))).toBe(true);
    const paged = await withServer('ls', '--limit', '1', '--all');
    expect(paged.stdout.trim().split('\n').sort()).toEqual(lines.sort());
    const one = await withServer('ls', '--limit', '1');
    expect(one.stdout.trim().split('\n')).toHaveLength(1);
    expect(one.stderr).toContain('--all');

    const stat = await withServer('stat', medium);
    expect(stat.code).toBe(0);
    const json = JSON.parse(stat.stdout);
    expect(json).toMatchObject({
      id: medium,
      headers: { etag: `"${medium}"`, 'content-length': String(24 * MiB), 'accept-ranges': 'bytes' },
      summary: { id: medium, size: 24 * MiB, mediaType: 'application/octet-stream' },
    });
  });

  it('bad usage exits 2; an unknown blob exits 1 with the server message', async () => {
    for (const args of [['put'], ['put', 'a', 'b'], ['put', 'x', '--part-size', 'lots'], ['get', 'not-an-id'], ['ls', '--limit', '0'], ['stat'], ['ls', '--bogus']]) {
      const run = await withServer(...args);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr, args.join(' ')).toMatch(/^svc: /);
    }
    const unknown = `sha-256:${'0'.repeat(64)}:5`;
    const get = await withServer('get', unknown);
    expect(get.code).toBe(1);
    expect(get.stdout).toBe('');
    expect(get.stderr).toContain(`svc: 404 blob_not_found: No blob ${unknown}`);
    const stat = await withServer('stat', unknown);
    expect(stat.code).toBe(1);
    expect(stat.stderr).toContain('svc: 404 blob_not_found');
    const missing = await withServer('put', path.join(dir, 'no-such-file'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('cannot read');
  });

  it('a client killed after a part was applied resumes its session from the state file with the next part', async () => {
    const body = seededBytes(10 * MiB + 7, 13);
    const file = path.join(dir, 'killed.bin');
    fs.writeFileSync(file, body);
    const size = body.length;
    const mtimeMs = fs.statSync(file).mtimeMs;
    const sessionId = randomUUID();
    const base = `${server.url}/api/v1/uploads`;
    expect((await fetch(base, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': sessionId, 'Upload-Length': String(size) } })).status).toBe(201);
    const patch = (partId: string, offset: number, length: number) =>
      fetch(`${base}/${sessionId}`, {
        method: 'PATCH',
        headers: { 'Upload-Offset': String(offset), 'Upload-Part-Id': partId, 'Content-Length': String(length) },
        body: body.subarray(offset, offset + length) as Uint8Array<ArrayBuffer>,
      });
    expect((await patch(randomUUID(), 0, 2 * MiB)).status).toBe(204);
    // The part in flight when the client died: applied by the server, never acknowledged to it.
    const inflight = { id: randomUUID(), offset: 2 * MiB, length: 2 * MiB };
    expect((await patch(inflight.id, inflight.offset, inflight.length)).status).toBe(204);
    const statePath = path.join(dir, 'killed.state.json');
    fs.writeFileSync(statePath, JSON.stringify({ version: 1, file, size, mtimeMs, server: server.url, sessionId, part: inflight }));

    const run = await withServer('put', file, '--threshold', '1MiB', '--part-size', '2MiB', '--state', statePath);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`${contentId(body)}\n`);
    expect(run.stderr).toContain(`resuming upload session ${sessionId}`);
    expect(run.stderr).toContain(`is at byte ${4 * MiB} of ${size}`);
    const status = (await (await fetch(`${base}/${sessionId}`)).json()) as any;
    expect(status).toMatchObject({ state: 'Committed', committedBlob: contentId(body), partCount: 6 });
    expect(fs.existsSync(statePath)).toBe(false);

    // Re-running on the committed session (state file left by a kill after the commit) prints the id.
    fs.writeFileSync(statePath, JSON.stringify({ version: 1, file, size, mtimeMs, server: server.url, sessionId }));
    const rerun = await withServer('put', file, '--threshold', '1MiB', '--state', statePath);
    expect(rerun).toMatchObject({ code: 0, stdout: `${contentId(body)}\n` });
  });
  it('a client killed in the middle of a part resumes its session and sends that part again under the same part id', async () => {
    const body = seededBytes(100 * MiB, 14);
    const file = path.join(dir, 'stopped.bin');
    fs.writeFileSync(file, body);
    const statePath = path.join(dir, 'stopped.state.json');
    const args = ['put', file, '--server', server.url, '--threshold', '1MiB', '--part-size', '64MiB', '--state', statePath];
    const first = start(args, env);
    let state: any;
    await until(() => {
      try {
        state = JSON.parse(fs.readFileSync(statePath, 'utf8'));
        return state.part !== undefined;
      } catch {
        return false;
      }
    }, 10_000, 2);
    // Frozen while its first 64 MiB part is on the wire, then killed: the part never completes.
    first.proc.kill('SIGSTOP');
    const head = await fetch(`${server.url}/api/v1/uploads/${state.sessionId}`, { method: 'HEAD' });
    expect(head.headers.get('upload-offset')).toBe('0');
    first.proc.kill('SIGKILL');
    await first.done;

    const run = await start(args, env).done;
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(`${contentId(body)}\n`);
    expect(run.stderr).toContain(`resuming upload session ${state.sessionId}`);
    expect(run.stderr).toContain(`is at byte 0 of ${body.length} (sending part ${state.part.id} again, same part id)`);
    const status = (await (await fetch(`${server.url}/api/v1/uploads/${state.sessionId}`)).json()) as any;
    expect(status).toMatchObject({ state: 'Committed', committedBlob: contentId(body), partCount: 2 });
  });
});

describe('svc put robustness', () => {
  it('The CLI resumes a 256 MiB upload after the server is killed and restarted mid-transfer (and then the download)', async () => {
    const root = tempRoot();
    const dir = tempRoot('svc-cli-big-');
    const port = await freePort();
    const serverEnv = { SVC_DURABILITY: 'relaxed', SVC_HTTP_PORT: String(port) };
    let server = await startServer(serverEnv, root);
    try {
      const file = path.join(dir, 'big.bin');
      const hash = createHash('sha256');
      const fd = fs.openSync(file, 'w');
      for (let i = 0; i < 32; i++) {
        const chunk = randomBytes(8 * MiB);
        hash.update(chunk);
        fs.writeSync(fd, chunk);
      }
      fs.closeSync(fd);
      const id = `sha-256:${hash.digest('hex')}:${256 * MiB}`;
      const statePath = path.join(dir, 'state.json');

      const put = start(['put', file, '--server', server.url, '--part-size', '8MiB', '--state', statePath], { XDG_CACHE_HOME: path.join(dir, 'cache') });
      let sessionId = '';
      await until(() => {
        try {
          sessionId = JSON.parse(fs.readFileSync(statePath, 'utf8')).sessionId;
          return true;
        } catch {
          return false;
        }
      }, 10_000);
      let offsetAtKill = 0;
      await until(async () => {
        const res = await fetch(`${server.url}/api/v1/uploads/${sessionId}`, { method: 'HEAD' }).catch(() => undefined);
        offsetAtKill = Number(res?.headers.get('upload-offset') ?? 0);
        return offsetAtKill > 0;
      }, 20_000, 5);
      expect(put.proc.exitCode).toBeNull();
      await server.kill9();
      expect(offsetAtKill).toBeLessThan(256 * MiB);
      await new Promise((r) => setTimeout(r, 500));
      server = await startServer(serverEnv, root);

      const run = await put.done;
      expect(run.stderr).toMatch(/retrying in/);
      expect(run.stderr).toMatch(new RegExp(`session ${sessionId} is at byte [0-9]+ of ${256 * MiB}`));
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toBe(`${id}\n`);
      const verify = (await (await fetch(`${server.url}/api/v1/blobs/${id}/verify`, { method: 'POST' })).json()) as any;
      expect(verify).toEqual({ id, verified: true, bytesChecked: 256 * MiB });
      const status = (await (await fetch(`${server.url}/api/v1/uploads/${sessionId}`)).json()) as any;
      expect(status).toMatchObject({ state: 'Committed', committedBlob: id });

      // And back, with the same crash in the middle of the download: resumed with a range request.
      const out = path.join(dir, 'big.out');
      const get = start(['get', id, '-o', out, '--server', server.url], {});
      await until(() => fs.existsSync(out) && fs.statSync(out).size > 0, 20_000, 5);
      expect(get.proc.exitCode).toBeNull();
      await server.kill9();
      server = await startServer(serverEnv, root);
      const got = await get.done;
      expect(got.code, got.stderr).toBe(0);
      expect(got.stderr).toMatch(/retrying in/);
      expect(fs.statSync(out).size).toBe(256 * MiB);
      expect(sha256File(out)).toBe(id.split(':')[1]);
    } finally {
      await server.stop();
      fs.rmSync(root, { recursive: true, force: true });
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
