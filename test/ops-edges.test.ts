// What an operator sees, checked against what happened: the last minutes of traffic are there at
// once, upload bytes count as they arrive, "used" is what svc stores, and `svc gc` can be
// told to reclaim now.
import { execFile } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededBytes, upload } from './helpers/http.js';
import { type TestServer, startServer } from './helpers/server.js';

const run = promisify(execFile);
const MAIN = path.join(fileURLToPath(new URL('..', import.meta.url)), 'dist/server/main.js');
const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A snapshot read after the last one expired (SVC_OPS_REFRESH_MS is 50 ms here). */
const snapshot = async (url: string) => {
  await sleep(60);
  return (await (await fetch(`${url}/api/ops/v1/snapshot`)).json()) as any;
};

describe('the operator view', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_OPS_REFRESH_MS: '50' });
  });
  afterAll(() => server.stop());

  it('the last minutes of traffic are there at once, whether or not anyone watched', async () => {
    const body = seededBytes(3 * MiB, 1);
    expect((await upload(server.url, body)).res.status).toBe(201);
    // Until a sample (every 1 s: ten minutes in at most 600 points) after the upload has counted
    // it; a fixed wait of two intervals was too short once the server's timers ran late.
    type History = { intervalMs: number; points: Array<{ at: number; ingestedBytes: number; servedBytes: number }> };
    let history: History | undefined;
    for (const until = Date.now() + 15_000; Date.now() < until; await sleep(100)) {
      const res = await fetch(`${server.url}/api/ops/v1/history`);
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      history = (await res.json()) as History;
      if (history.points.length >= 2 && history.points.reduce((n, p) => n + p.ingestedBytes, 0) >= body.length) break;
    }
    expect(history!.intervalMs).toBe(1000);
    const points = history!.points;
    expect(points.length).toBeGreaterThanOrEqual(2);
    expect(points.reduce((n, p) => n + p.ingestedBytes, 0)).toBe(body.length);
    expect(points.every((p, i) => i === 0 || p.at > points[i - 1]!.at)).toBe(true);
  });

  it('upload bytes count as they arrive, before the upload completes', async () => {
    const before = (await snapshot(server.url)).traffic.bytesIngested;
    const body = seededBytes(8 * MiB, 2);
    const socket = net.connect(server.port, '127.0.0.1');
    let answer = '';
    socket.on('data', (d) => (answer += d));
    socket.write(`POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n`);
    socket.write(body.subarray(0, 4 * MiB));
    let during = before;
    for (let i = 0; i < 100 && during - before < 4 * MiB; i++) {
      await sleep(50);
      during = (await snapshot(server.url)).traffic.bytesIngested;
    }
    expect(during - before).toBe(4 * MiB);
    expect(answer).toBe('');
    socket.write(body.subarray(4 * MiB));
    for (let i = 0; i < 200 && !answer.includes('\r\n\r\n{'); i++) await sleep(25);
    socket.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 201 /);
    expect((await snapshot(server.url)).traffic.bytesIngested - before).toBe(body.length);
  });

  it('storage usedBytes is what svc stores, and svc gc with overrides reclaims it now', async () => {
    const start = (await snapshot(server.url)).storage.usedBytes;
    const body = seededBytes(2 * MiB, 3);
    const { json } = await upload(server.url, body);
    expect((await snapshot(server.url)).storage.usedBytes - start).toBe(body.length);
    expect((await fetch(`${server.url}/api/v1/blobs/${json.blob.id}`, { method: 'DELETE' })).status).toBe(204);

    // Without overrides nothing is young enough to go (SVC_GC_MIN_AGE 24 h).
    const plain = JSON.parse((await run(process.execPath, [MAIN, 'gc', '--apply', '--server', server.url])).stdout);
    expect(plain.quarantined.count).toBe(0);
    expect(plain.overrides).toBeUndefined();

    const quarantine = JSON.parse((await run(process.execPath, [MAIN, 'gc', 'quarantine', '--apply', '--min-age', '0s', '--server', server.url])).stdout);
    expect(quarantine.overrides).toEqual({ minAgeMs: 0 });
    expect(quarantine.quarantined).toEqual({ count: json.blob.blockCount, bytes: body.length });
    expect((await snapshot(server.url)).storage.usedBytes).toBe(start);
    // Purge: without the override the quarantine age (7 d) keeps them; with it, only the fence of
    // uploads of the last minute does (a resumable part records its blocks after its ingest ends).
    const dry = JSON.parse((await run(process.execPath, [MAIN, 'gc', 'purge', '--server', server.url])).stdout);
    expect(dry.skipped.reasons).toEqual({ 'younger than SVC_GC_QUARANTINE_AGE': json.blob.blockCount });
    const purge = JSON.parse((await run(process.execPath, [MAIN, 'gc', 'purge', '--apply', '--quarantine-age', '0s', '--server', server.url])).stdout);
    expect(purge.overrides).toEqual({ quarantineAgeMs: 0 });
    expect(purge.skipped.reasons).toEqual({ 'uploads in flight since its quarantine': json.blob.blockCount });
    expect(server.stderr()).toContain('gc: ages overridden for this run');

    const bad = await fetch(`${server.url}/api/ops/v1/gc?phase=run&minAge=soon`, { method: 'POST' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error).toBe('invalid_request');
    const cli = await run(process.execPath, [MAIN, 'gc', '--min-age', 'soon', '--server', server.url]).catch((e) => e);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('400 invalid_request');
  });
});
