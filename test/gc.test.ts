// Garbage collection over HTTP against a real server: mark, quarantine, purge, restore, the
// block roots (resumable sessions, document content), `svc gc`, one run at a time, and a
// randomized run concurrent with uploads, deletes and re-uploads.

import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api, devToken } from './helpers/docs-client.js';
import { contentId, seededBytes, sha256, upload } from './helpers/http.js';
import { type TestServer, startServer } from './helpers/server.js';
import { TEST_BACKEND, storedBlockNames } from './helpers/backends.js';
import { BLOCK, FIXED_BLOCKS_ENV, blockNames, gcRun } from './helpers/gc.js';

const run = promisify(execFile);
const SVC = fileURLToPath(new URL('../bin/svc.js', import.meta.url));

/** GC with no waiting; the durability a run may override (GC_TEST_DURABILITY). */
const ENV = { ...FIXED_BLOCKS_ENV, SVC_DURABILITY: process.env.GC_TEST_DURABILITY ?? 'relaxed' };

const gc = gcRun;

const live = (s: TestServer) => storedBlockNames(s.root, 'live');
const quarantined = (s: TestServer) => storedBlockNames(s.root, 'quarantine');

async function verify(url: string, id: string): Promise<boolean> {
  const res = await fetch(`${url}/api/v1/blobs/${id}/verify`, { method: 'POST' });
  expect(res.status).toBe(200);
  return ((await res.json()) as any).verified;
}

async function put(url: string, body: Uint8Array): Promise<string> {
  const { res, json } = await upload(url, body);
  expect(res.status, JSON.stringify(json)).toBe(201);
  return json.blob.id;
}

async function del(url: string, id: string): Promise<void> {
  expect((await fetch(`${url}/api/v1/blobs/${id}`, { method: 'DELETE' })).status).toBe(204);
}

const concat = (...parts: Uint8Array[]) => Buffer.concat(parts);
const bytesOf = (blocks: number, seed: number) => seededBytes(blocks * BLOCK, seed);
const sizeOf = (name: string) => Number(name.split('-')[1]);

describe('garbage collection', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer(ENV);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('quarantines exactly the unshared blocks of deleted blobs (dry run changes nothing), then purges them', async () => {
    const shared = bytesOf(3, 101);
    const a = concat(shared, bytesOf(2, 102));
    const b = concat(shared, bytesOf(2, 103));
    const idA = await put(server.url, a);
    const idB = await put(server.url, b);
    const blocksA = await blockNames(server.url, idA);
    const blocksB = await blockNames(server.url, idB);
    const unshared = blocksA.filter((n) => !blocksB.includes(n));
    expect(unshared).toHaveLength(2);
    await del(server.url, idA);

    const before = await live(server);
    const dry = await gc(server.url, 'quarantine', false);
    expect(dry).toMatchObject({ phase: 'quarantine', apply: false, quarantined: { count: 2, bytes: 2 * BLOCK } });
    expect(dry.markedBlocks).toBeGreaterThanOrEqual(blocksB.length);
    expect(dry.candidates).toBe(2);
    expect((await live(server))).toEqual(before);
    expect((await quarantined(server)).size).toBe(0);

    const applied = await gc(server.url, 'quarantine', true);
    expect(applied).toMatchObject({ apply: true, quarantined: { count: 2, bytes: 2 * BLOCK }, quarantineBlocks: 2 });
    expect([...(await quarantined(server))].sort()).toEqual([...unshared].sort());
    for (const n of unshared) expect((await live(server)).has(n)).toBe(false);
    for (const n of blocksB) expect((await live(server)).has(n)).toBe(true);
    expect(await verify(server.url, idB)).toBe(true);

    const state = (await (await fetch(`${server.url}/api/ops/v1/gc`)).json()) as any;
    expect(state).toMatchObject({ running: false, quarantinedBlocks: 2, lastRun: { runId: applied.runId } });

    const dryPurge = await gc(server.url, 'purge', false);
    expect(dryPurge.purged).toEqual({ count: 2, bytes: 2 * BLOCK });
    expect((await quarantined(server)).size).toBe(2);
    const purged = await gc(server.url, 'purge', true);
    expect(purged).toMatchObject({ purged: { count: 2, bytes: 2 * BLOCK }, quarantineBlocks: 0 });
    expect((await quarantined(server)).size).toBe(0);
    expect(await verify(server.url, idB)).toBe(true);
    // Nothing more to do.
    const again = await gc(server.url, 'run', true);
    expect(again).toMatchObject({ quarantined: { count: 0 }, purged: { count: 0 } });
    await del(server.url, idB);
    await gc(server.url, 'quarantine', true);
    await gc(server.url, 'purge', true);
  });

  it('a dry run of every phase changes nothing', async () => {
    const id = await put(server.url, bytesOf(4, 201));
    await del(server.url, id);
    const before = await live(server);
    const report = await gc(server.url, 'run', false);
    expect(report.quarantined.count).toBe(4);
    expect((await live(server))).toEqual(before);
    expect((await quarantined(server)).size).toBe(0);
    await gc(server.url, 'quarantine', true);
    await gc(server.url, 'purge', true);
  });

  it('keeps the blocks of an open resumable session and of document content', async () => {
    // An open session with one acknowledged part of 3 blocks and a bit.
    const sessionBytes = concat(bytesOf(3, 301), seededBytes(100, 302));
    const session = randomUUID();
    expect((await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': session } })).status).toBe(201);
    const part = await fetch(`${server.url}/api/v1/uploads/${session}`, {
      method: 'PATCH',
      body: sessionBytes,
      headers: { 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() },
    });
    expect(part.status).toBe(204);
    // A document's content.
    const api = new Api(server.url, await devToken(server.url, { scope: 'doc.create doc.read' }));
    const docBytes = concat(bytesOf(3, 303), seededBytes(50, 304));
    const doc = await api.newDocument(docBytes, { contentType: 'application/octet-stream' });
    // And something to collect.
    const gone = await put(server.url, bytesOf(2, 305));
    const goneBlocks = await blockNames(server.url, gone);
    await del(server.url, gone);

    const before = await live(server);
    const sessionBlocks = [0, 1, 2].map((i) => `${sha256(sessionBytes.subarray(i * BLOCK, (i + 1) * BLOCK))}-${BLOCK}`).filter((n) => before.has(n));
    expect(sessionBlocks.length).toBeGreaterThan(0);
    const docBlocks = [0, 1, 2].map((i) => `${sha256(docBytes.subarray(i * BLOCK, (i + 1) * BLOCK))}-${BLOCK}`);
    for (const n of docBlocks) expect(before.has(n)).toBe(true);

    const report = await gc(server.url, 'run', true);
    expect(report.quarantined.count).toBe(2);
    await gc(server.url, 'purge', true);
    const after = await live(server);
    for (const n of goneBlocks) expect(after.has(n)).toBe(false);
    expect(new Set([...before].filter((n) => !goneBlocks.includes(n)))).toEqual(after);

    const content = await fetch(`${server.url}/v1/documents/${doc.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
    expect(content.status).toBe(200);
    expect(Buffer.from(await content.arrayBuffer()).equals(docBytes)).toBe(true);
    const committed = await fetch(`${server.url}/api/v1/uploads/${session}/commit`, { method: 'POST' });
    expect(committed.status).toBe(200);
    const blob = ((await committed.json()) as any).committedBlob;
    expect(blob).toBe(contentId(sessionBytes));
    expect(await verify(server.url, blob)).toBe(true);
  });

  it('the blocks of document bytes stored but refused at their record (the upload finalized meanwhile: none names them) are collected; the content finalized stays', async () => {
    const api = new Api(server.url, await devToken(server.url, { scope: 'doc.create doc.read doc.write' }));
    const created = await api.post('/v1/documents', {});
    expect(created.status).toBe(201);
    const uploadId = created.json.uploadId as string;
    const kept = bytesOf(3, 351);
    expect((await api.putBytes(uploadId, kept)).status).toBe(204);
    // Bytes sent again, the upload finalized while they stream: stored, then refused (409) by the
    // unit that would have named them (on pg-s3 also the one that records them): as if the node
    // had died between the blocks' writes and that commit.
    const refused = bytesOf(4, 352);
    const answer = new Promise<number>((resolve, reject) => {
      const req = http.request(`${server.url}/v1/uploads/${uploadId}/bytes`, {
        method: 'PUT', headers: { Authorization: `Bearer ${api.token}`, 'Content-Length': String(refused.length), 'Content-Type': 'application/octet-stream' },
      }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.write(refused.subarray(0, 2 * BLOCK));
      setTimeout(async () => {
        const fin = await api.post(`/v1/uploads/${uploadId}/finalize`, {});
        expect(fin.status).toBe(201);
        req.end(refused.subarray(2 * BLOCK));
      }, 300);
    });
    expect(await answer).toBe(409);
    const refusedBlocks = [0, 1, 2, 3].map((i) => `${sha256(refused.subarray(i * BLOCK, (i + 1) * BLOCK))}-${BLOCK}`);
    const before = await live(server);
    for (const n of refusedBlocks) expect(before.has(n), n).toBe(true);
    // S3 keeps times to the second: the blocks no record names must be older than the run's start.
    if (TEST_BACKEND !== 'fs') await new Promise((r) => setTimeout(r, 1100));
    await gc(server.url, 'run', true);
    // And their copies in quarantine older than the purge's start.
    if (TEST_BACKEND !== 'fs') await new Promise((r) => setTimeout(r, 1100));
    await gc(server.url, 'purge', true);
    const after = await live(server);
    for (const n of refusedBlocks) expect(after.has(n), n).toBe(false);
    const content = await fetch(`${server.url}/v1/documents/${created.json.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
    expect(content.status).toBe(200);
    expect(Buffer.from(await content.arrayBuffer()).equals(kept)).toBe(true);
  });

  it('a re-upload of deleted content restores its quarantined blocks', async () => {
    const body = bytesOf(4, 401);
    const id = await put(server.url, body);
    const names = await blockNames(server.url, id);
    await del(server.url, id);
    await gc(server.url, 'quarantine', true);
    for (const n of names) expect((await quarantined(server)).has(n)).toBe(true);
    // Reads of a deleted blob are 404, of course.
    expect((await fetch(`${server.url}/api/v1/blobs/${id}`)).status).toBe(404);

    expect(await put(server.url, body)).toBe(id);
    for (const n of names) {
      expect((await live(server)).has(n)).toBe(true);
      expect((await quarantined(server)).has(n)).toBe(false);
    }
    expect(await verify(server.url, id)).toBe(true);
    const purge = await gc(server.url, 'purge', true);
    expect(purge.purged.count).toBe(0);
    expect(purge.quarantineBlocks).toBe(0);
    expect(await verify(server.url, id)).toBe(true);
    const body2 = Buffer.from(await (await fetch(`${server.url}/api/v1/blobs/${id}`)).arrayBuffer());
    expect(body2.equals(body)).toBe(true);
  });

  it('blocks a resumable part stores again after their quarantine are settled by the next run', async () => {
    const body = bytesOf(3, 501);
    const id = await put(server.url, body);
    const names = await blockNames(server.url, id);
    await del(server.url, id);
    await gc(server.url, 'quarantine', true);
    // A resumable session cuts the same blocks: the store moves their quarantined copies back
    // (no publication yet, so their receipts stay until the next run sees them referenced).
    const session = randomUUID();
    expect((await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': session } })).status).toBe(201);
    const part = await fetch(`${server.url}/api/v1/uploads/${session}`, { method: 'PATCH', body: concat(body, seededBytes(10, 502)), headers: { 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() } });
    expect(part.status).toBe(204);
    const liveNow = await live(server);
    const back = names.filter((n) => liveNow.has(n));
    expect(back.length).toBeGreaterThanOrEqual(2);
    for (const n of back) expect((await quarantined(server)).has(n)).toBe(false);
    const report = await gc(server.url, 'run', true);
    expect(report.quarantined.count).toBe(0);
    // Records of the blocks (fs, pg-s3) stay quarantined until this run finds them referenced and
    // counts them restored; the S3-only backend keeps no record per block: the part's store
    // already moved them back, and the run has nothing left to restore.
    expect(report.restored).toBe(TEST_BACKEND === 's3' ? 0 : back.length);
    for (const n of back) expect((await live(server)).has(n)).toBe(true);
    const committed = await fetch(`${server.url}/api/v1/uploads/${session}/commit`, { method: 'POST' });
    expect(committed.status).toBe(200);
    const blob = ((await committed.json()) as any).committedBlob;
    expect(await verify(server.url, blob)).toBe(true);
    expect((await gc(server.url, 'run', true)).quarantineBlocks).toBe(0);
  });

  it('svc gc prints the report; a second concurrent run is 409 gc_running', async () => {
    const { stdout } = await run(process.execPath, [SVC, 'gc', 'mark', '--server', server.url]);
    const report = JSON.parse(stdout);
    expect(report).toMatchObject({ phase: 'mark', apply: false, runId: expect.any(String), markedBlocks: expect.any(Number) });
    const dry = JSON.parse((await run(process.execPath, [SVC, 'gc', '--server', server.url])).stdout);
    expect(dry).toMatchObject({ phase: 'run', apply: false });
    const bad = await run(process.execPath, [SVC, 'gc', 'sweep', '--server', server.url]).catch((e) => e);
    expect(bad.code).toBe(2);

    // Enough blocks that a run takes a while, then several at once.
    for (let i = 0; i < 20; i++) await put(server.url, bytesOf(20, 600 + i));
    const answers = await Promise.all([0, 1, 2, 3].map(() => fetch(`${server.url}/api/ops/v1/gc?phase=run&apply=false`, { method: 'POST' })));
    const statuses = answers.map((r) => r.status);
    expect(statuses).toContain(200);
    expect(statuses).toContain(409);
    for (const r of answers) {
      const json = (await r.json()) as any;
      if (r.status === 409) expect(json).toEqual({ error: 'gc_running', message: expect.any(String) });
    }
    // And through the command: exit 1 while a run is in progress.
    const long = fetch(`${server.url}/api/ops/v1/gc?phase=run&apply=false`, { method: 'POST' });
    const busy = await run(process.execPath, [SVC, 'gc', '--server', server.url]).catch((e) => e);
    const first = await long;
    if (busy.code !== undefined) {
      expect(busy.code).toBe(1);
      expect(busy.stderr).toContain('gc_running');
    }
    expect(first.status).toBe(200);

    expect((await fetch(`${server.url}/api/ops/v1/gc?phase=nope`, { method: 'POST' })).status).toBe(400);
    expect((await fetch(`${server.url}/api/ops/v1/gc?apply=yes`, { method: 'POST' })).status).toBe(400);
    expect((await fetch(`${server.url}/api/ops/v1/gc`, { method: 'DELETE' })).status).toBe(405);
  });

  it('svc nodes lists this node (a root holder once it keeps document content, on s3); it cannot be forgotten, nor can an unknown id', async () => {
    // Document content is a reference in this node's data directory on s3 (the documents node's
    // LMDB): that makes the node a root holder (GC waits for it while it is down). pg-s3 keeps it
    // in PostgreSQL (no node holds roots); fs has one node and no such list.
    const api = new Api(server.url, await devToken(server.url, { scope: 'doc.create doc.read' }));
    await api.newDocument(bytesOf(2, 950), { contentType: 'application/octet-stream' });
    const holder = TEST_BACKEND === 's3';
    const listed = await fetch(`${server.url}/api/ops/v1/nodes`);
    expect(listed.status).toBe(200);
    const { nodes } = (await listed.json()) as any;
    const nodeId = ((await (await fetch(`${server.url}/api/ops/v1/snapshot`)).json()) as any).placement.nodeId;
    // A shared catalog keeps what the node said of itself at its heartbeat (the snapshot's cluster view).
    const summaries = nodes.map(({ summary }: any) => summary);
    if (TEST_BACKEND !== 'fs') expect(summaries).toEqual([expect.objectContaining({ health: expect.anything(), traffic: expect.any(Object), capacity: expect.any(Object) })]);
    expect(nodes.map(({ summary: _summary, ...n }: any) => n)).toEqual([{
      nodeId, address: `127.0.0.1:${server.port}`, state: 'live', lastSeenAt: expect.stringMatching(/Z$/), rootHolder: holder,
      ...(holder ? { rootHolderSince: expect.stringMatching(/Z$/) } : {}), self: true,
    }]);
    const { stdout } = await run(process.execPath, [SVC, 'nodes', '--server', server.url]);
    // Health, traffic and transfers from the node's heartbeat on a shared catalog; '-' without one (fs).
    const said = TEST_BACKEND === 'fs' ? '-\t-\t-' : '(ok|unknown)\t\\d+ requests, \\d+ errors\t\\d+ transfers';
    expect(stdout).toMatch(new RegExp(`^${nodeId}\t127\\.0\\.0\\.1:${server.port}\tlive\t${holder ? 'root holder' : 'no roots'}\t${said}\t\\(answered\\)\n$`));
    const self = await run(process.execPath, [SVC, 'nodes', 'forget', nodeId, '--server', server.url]).catch((e) => e);
    expect([self.code, self.stdout, self.stderr]).toEqual([1, '', `svc: 409 node_live: Node ${nodeId} is live (it is the node answering this request): only a node that is down can be forgotten; stop it first\n`]);
    const unknown = await fetch(`${server.url}/api/ops/v1/nodes/${encodeURIComponent('node 7')}`, { method: 'DELETE' });
    expect([unknown.status, await unknown.json()]).toEqual([404, { error: 'node_not_found', message: 'No node node 7 is known (svc nodes lists them)' }]);
    expect((await fetch(`${server.url}/api/ops/v1/nodes?all=1`)).status).toBe(400);
    expect((await fetch(`${server.url}/api/ops/v1/nodes`, { method: 'POST' })).status).toBe(405);
    const usage = await run(process.execPath, [SVC, 'nodes', 'drop', 'x', '--server', server.url]).catch((e) => e);
    expect(usage.code).toBe(2);
  });
});

describe('scheduled garbage collection', () => {
  it('SVC_GC_INTERVAL runs `run` with apply on its own', async () => {
    const server = await startServer({ ...ENV, SVC_GC_INTERVAL: '300ms' });
    try {
      const id = await put(server.url, bytesOf(2, 801));
      const names = await blockNames(server.url, id);
      await del(server.url, id);
      let state: any;
      for (let i = 0; i < 100; i++) {
        state = (await (await fetch(`${server.url}/api/ops/v1/gc`)).json()) as any;
        const liveNow = await live(server);
        if (names.every((n) => !liveNow.has(n)) && state.lastRun?.trigger === 'schedule' && !state.running) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(state).toMatchObject({ config: { intervalMs: 300 }, lastRun: { trigger: 'schedule', phase: 'run', apply: true }, nextScheduledRunAt: expect.any(String) });
      for (const n of names) expect((await live(server)).has(n)).toBe(false);
    } finally {
      await server.stop();
    }
  });
});

describe('garbage collection under concurrent uploads, deletes and re-uploads', () => {
  it('never loses a referenced block (randomized)', async () => {
    const server = await startServer(ENV);
    try {
      const base = bytesOf(12, 7001);
      // A new seed each run (printed on failure; GC_SEED=n repeats one).
      const seed0 = Number(process.env.GC_SEED) || (Date.now() % 1_000_000_007) | 1;
      let seed = seed0;
      const rand = (n: number) => {
        // xorshift32: every bit is usable (an LCG's low bits cycle).
        seed ^= seed << 13;
        seed ^= seed >>> 17;
        seed ^= seed << 5;
        return Math.floor(((seed >>> 0) / 2 ** 32) * n);
      };
      /** Bodies ever uploaded, by id (re-uploads pick from here). */
      const bodies = new Map<string, Buffer>();
      const present = new Set<string>();
      const failures: string[] = [];
      let stop = false;

      const makeBody = () => {
        const prefix = base.subarray(0, rand(12) * BLOCK);
        return concat(prefix, seededBytes(BLOCK * (1 + rand(3)) + rand(BLOCK), 10_000 + rand(1_000_000)));
      };

      const resumable = async (body: Buffer): Promise<string | undefined> => {
        const id = randomUUID();
        const created = await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': id } });
        if (created.status !== 201) return void failures.push(`create ${created.status}`);
        const cut = Math.floor(body.length / 2);
        for (const [from, to] of [[0, cut], [cut, body.length]]) {
          const r = await fetch(`${server.url}/api/v1/uploads/${id}`, { method: 'PATCH', body: body.subarray(from, to) as Uint8Array<ArrayBuffer>, headers: { 'Upload-Offset': String(from), 'Upload-Part-Id': randomUUID() } });
          if (r.status !== 204) return void failures.push(`patch ${r.status} ${await r.text()}`);
        }
        const c = await fetch(`${server.url}/api/v1/uploads/${id}/commit`, { method: 'POST' });
        if (c.status !== 200) return void failures.push(`commit ${c.status} ${await c.text()}`);
        return ((await c.json()) as any).committedBlob;
      };

      /** Ids a client is deleting or re-uploading right now (one operation per id at a time). */
      const busy = new Set<string>();
      const operation = async () => {
        const op = rand(10);
        if (op < 5) {
          const body = makeBody();
          let id: string | undefined;
          if (op === 0) id = await resumable(body);
          else {
            const { res, json } = await upload(server.url, body);
            if (res.status !== 201) failures.push(`upload ${res.status} ${JSON.stringify(json)}`);
            else id = json.blob.id;
          }
          if (id && !busy.has(id)) {
            bodies.set(id, body);
            present.add(id);
          }
        } else if (op < 8) {
          const ids = [...present].filter((id) => !busy.has(id));
          if (ids.length === 0) return;
          const id = ids[rand(ids.length)];
          busy.add(id);
          present.delete(id);
          const r = await fetch(`${server.url}/api/v1/blobs/${id}`, { method: 'DELETE' });
          busy.delete(id);
          if (r.status !== 204) failures.push(`delete ${r.status}`);
        } else {
          const gone = [...bodies.keys()].filter((id) => !present.has(id) && !busy.has(id));
          if (gone.length === 0) return;
          const id = gone[rand(gone.length)];
          busy.add(id);
          const { res, json } = await upload(server.url, bodies.get(id)!);
          busy.delete(id);
          if (res.status !== 201) failures.push(`re-upload ${res.status} ${JSON.stringify(json)}`);
          else present.add(id);
        }
      };
      const client = async (iterations: number) => {
        for (let i = 0; i < iterations; i++) {
          try {
            await operation();
          } catch (err) {
            failures.push(`client: ${String((err as Error)?.stack ?? err)}`);
          }
        }
      };

      const phases = ['mark', 'quarantine', 'purge', 'run'];
      const reports: any[] = [];
      const collector = async () => {
        while (!stop) {
          const phase = phases[rand(phases.length)];
          try {
            const res = await fetch(`${server.url}/api/ops/v1/gc?phase=${phase}&apply=true`, { method: 'POST' });
            const json = (await res.json()) as any;
            if (res.status !== 200 || json.error) failures.push(`gc ${res.status} ${JSON.stringify(json)}`);
            else reports.push(json);
          } catch (err) {
            failures.push(`gc: ${String(err)}`);
          }
        }
      };

      const gcLoop = collector();
      await Promise.all([client(100), client(100), client(100), client(100)]);
      stop = true;
      await gcLoop;
      // On a failure, the server's log says why (a publication the GC guard refused, ...).
      expect(failures, `seed ${seed0}; server log:\n${server.stderr().slice(-6000)}`).toEqual([]);
      expect(reports.length).toBeGreaterThan(3);
      expect(reports.some((r) => r.quarantined.count > 0), `seed ${seed0}`).toBe(true);
      // A purge during the traffic needs enough runs: against s3rver a pg-s3 run takes seconds
      // (bucket listings), so only the embedded backend is held to it; the safety checks below hold for both.
      if (TEST_BACKEND === 'fs') expect(reports.some((r) => r.purged.count > 0), `seed ${seed0}`).toBe(true);

      // Every blob in the inventory verifies, and every block it references is a live file.
      const inventory: string[] = [];
      let cursor: string | undefined;
      do {
        const page = (await (await fetch(`${server.url}/api/v1/blobs?limit=1000${cursor ? `&cursor=${cursor}` : ''}`)).json()) as any;
        inventory.push(...page.blobs.map((b: any) => b.id));
        cursor = page.nextCursor;
      } while (cursor);
      expect(new Set(inventory)).toEqual(present);
      // pg-s3: a block that a publication referenced while a run was moving it is live again in the
      // catalog at once, but its bytes come back from quarantine with the next run (reads fall
      // back to them meanwhile): until the last collection below, quarantine counts as kept.
      const files = await live(server);
      if (TEST_BACKEND !== 'fs') for (const n of await quarantined(server)) files.add(n);
      for (const id of inventory) {
        expect(await verify(server.url, id), `${id} (seed ${seed0})`).toBe(true);
        for (const n of await blockNames(server.url, id)) expect(files.has(n), `${id}: ${n} (seed ${seed0})`).toBe(true);
      }
      // A last full collection keeps all of it.
      await gc(server.url, 'run', true);
      await gc(server.url, 'purge', true);
      const after = await live(server);
      for (const id of inventory) {
        expect(await verify(server.url, id), id).toBe(true);
        for (const n of await blockNames(server.url, id)) expect(after.has(n)).toBe(true);
      }
      expect([...after].every((n) => sizeOf(n) > 0)).toBe(true);
    } finally {
      await server.stop();
    }
  }, 120_000);
});
