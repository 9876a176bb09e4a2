// Resumable sessions shared by two pg-s3 nodes on one PostgreSQL catalog and one bucket: a part,
// a status, a commit or a cancel may reach either node; the session's lease is one across nodes;
// a node killed in the middle of a part leaves the session to the other once its heartbeat is
// older than SVC_NODE_TTL.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND, backendEnv, stagedTails } from './helpers/backends.js';
import { contentId, seededBytes } from './helpers/http.js';
import { type TestServer, startServer } from './helpers/server.js';
import { commit, create, patch, readBack, status } from './helpers/sessions.js';

const shared = TEST_BACKEND !== 'fs';
if (!shared) console.warn('shared-sessions test skipped: it needs a shared catalog (the pg-s3 project runs it)');

const MiB = 1024 * 1024;
const NODE = { SVC_NODE_TTL: '2s', SVC_DURABILITY: 'relaxed' };
let a: TestServer;
let b: TestServer;

/** A part sent a MiB at a time, 50 ms apart, that stops sending after `stopAfter` bytes. */
function slowPatch(s: TestServer, id: string, offset: number, body: Buffer, stopAfter: number): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1', port: s.port, method: 'PATCH', path: `/api/v1/uploads/${id}`,
      headers: { 'Upload-Offset': String(offset), 'Upload-Part-Id': randomUUID(), 'Content-Length': String(body.length) },
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', () => resolve(0));
    let at = 0;
    const step = () => {
      if (at >= stopAfter) return;
      req.write(body.subarray(at, at + MiB));
      at += MiB;
      setTimeout(step, 50);
    };
    step();
  });
}

describe.skipIf(!shared)('resumable sessions shared by two pg-s3 nodes', () => {
  beforeAll(async () => {
    a = await startServer(NODE);
    b = await startServer({ ...(await backendEnv(a.root)), ...NODE });
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
  });

  it('parts alternate between the nodes, back to back and after pauses; either commits the right blob, both read it', async () => {
    const data = seededBytes(23 * MiB + 12_345, 4100);
    const sizes = [3 * MiB + 7, 1, 5 * MiB, 64 * 1024 + 3, 7 * MiB + 11, 2 * MiB];
    const { id, status: created } = await create(a);
    expect(created).toBe(201);
    let offset = 0;
    for (const [i, size] of sizes.entries()) {
      const node = i % 2 === 0 ? a : b;
      const part = await patch(node, id, offset, data.subarray(offset, offset + size));
      expect([i, part.status, part.json]).toEqual([i, 204, undefined]);
      offset += size;
      expect(part.offset).toBe(String(offset));
      // The other node sees the offset at once.
      expect((await status(i % 2 === 0 ? b : a, id)).json.offset).toBe(offset);
      // Some parts come after the live ingest of the node that took the last one has closed.
      if (i % 3 === 2) await new Promise((r) => setTimeout(r, 300));
    }
    const last = await patch(b, id, offset, data.subarray(offset));
    expect(last.status).toBe(204);
    const committed = await commit(a, id);
    expect(committed.status, JSON.stringify(committed.json)).toBe(200);
    expect(committed.json.committedBlob).toBe(contentId(data));
    expect((await commit(b, id)).json.committedBlob).toBe(contentId(data));
    for (const node of [a, b]) expect((await readBack(node, contentId(data))).equals(data)).toBe(true);
    const verify = await fetch(`${b.url}/api/v1/blobs/${contentId(data)}/verify`, { method: 'POST' });
    expect(((await verify.json()) as any).verified).toBe(true);
    expect(await stagedTails(a.root, id)).toEqual([]);
  });

  it('one session id created on both nodes at once: exactly one 201, the other 409 upload_exists', async () => {
    for (let i = 0; i < 5; i++) {
      const id = randomUUID();
      const answers = await Promise.all([create(a, id), create(b, id)]);
      expect(answers.map((x) => x.status).sort()).toEqual([201, 409]);
      expect(answers.find((x) => x.status === 409)!.json.error).toBe('upload_exists');
    }
  });

  it('a part in progress on one node makes the other answer 409 upload_busy to a part, a commit and a cancel', async () => {
    const data = seededBytes(9 * MiB, 4200);
    const { id } = await create(a);
    const first = await patch(a, id, 0, data.subarray(0, 2 * MiB));
    expect(first.status).toBe(204);
    const hanging = slowPatch(a, id, 2 * MiB, data.subarray(2 * MiB), 3 * MiB);
    await new Promise((r) => setTimeout(r, 400));
    const busy = await patch(b, id, 2 * MiB, data.subarray(2 * MiB));
    expect(busy.status).toBe(409);
    expect(busy.json.error).toBe('upload_busy');
    expect((await commit(b, id)).json.error).toBe('upload_busy');
    expect((await fetch(`${b.url}/api/v1/uploads/${id}`, { method: 'DELETE' })).status).toBe(409);
    expect((await status(b, id)).json).toMatchObject({ state: 'Open', offset: 2 * MiB });
    // The hanging part ends when its node stops (afterAll).
    void hanging;
  });

  it('a node killed in the middle of a part: the other takes the session once its heartbeat is stale, and the blob is right', async () => {
    const c = await startServer({ ...(await backendEnv(a.root)), ...NODE });
    const data = seededBytes(14 * MiB + 3, 4300);
    const { id } = await create(c);
    const firstId = randomUUID();
    expect((await patch(c, id, 0, data.subarray(0, 4 * MiB + 1), firstId)).status).toBe(204);
    const hanging = slowPatch(c, id, 4 * MiB + 1, data.subarray(4 * MiB + 1), 4 * MiB);
    await new Promise((r) => setTimeout(r, 500));
    await c.kill9();
    await hanging;
    // The lease of the dead node holds until its heartbeat is older than SVC_NODE_TTL (2 s).
    let next = await patch(a, id, 4 * MiB + 1, data.subarray(4 * MiB + 1, 9 * MiB));
    for (let i = 0; i < 60 && next.status === 409; i++) {
      await new Promise((r) => setTimeout(r, 200));
      next = await patch(a, id, 4 * MiB + 1, data.subarray(4 * MiB + 1, 9 * MiB));
    }
    expect(next.status, JSON.stringify(next.json)).toBe(204);
    // The first part's id, replayed on the other node: the durable offset, nothing applied twice.
    const replay = await patch(b, id, 0, data.subarray(0, 4 * MiB + 1), firstId);
    expect([replay.status, replay.offset]).toEqual([204, String(9 * MiB)]);
    expect((await patch(b, id, 9 * MiB, data.subarray(9 * MiB))).status).toBe(204);
    const committed = await commit(b, id);
    expect(committed.json.committedBlob).toBe(contentId(data));
    expect((await readBack(a, contentId(data))).equals(data)).toBe(true);
    await c.stop().catch(() => {});
  });

  it('a cancel on one node ends a session created on the other; its staged tails go', async () => {
    const { id } = await create(a);
    expect((await patch(a, id, 0, seededBytes(3 * MiB + 5, 4400))).status).toBe(204);
    expect(await stagedTails(a.root, id)).toHaveLength(1);
    expect((await fetch(`${b.url}/api/v1/uploads/${id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await status(a, id)).json.state).toBe('Cancelled');
    expect(await stagedTails(a.root, id)).toEqual([]);
    expect((await patch(a, id, 3 * MiB + 5, Buffer.from('x'))).json.error).toBe('upload_state');
  });

  it('tus: PATCHes of one upload reach both nodes; the last one commits; HEAD on either names the blob; a final concatenation of partials from both', async () => {
    const tus = { 'Tus-Resumable': '1.0.0' };
    const stream = { ...tus, 'Content-Type': 'application/offset+octet-stream' };
    const data = seededBytes(9 * MiB + 77, 4200);
    const created = await fetch(`${a.url}/files/`, { method: 'POST', headers: { ...tus, 'Upload-Length': String(data.length) } });
    expect(created.status).toBe(201);
    const path = created.headers.get('location')!;
    const cuts = [0, 3 * MiB, 3 * MiB + 5, 8 * MiB, data.length];
    let last: Response | undefined;
    for (let i = 0; i + 1 < cuts.length; i++) {
      const node = i % 2 === 0 ? b : a;
      last = await fetch(`${node.url}${path}`, { method: 'PATCH', headers: { ...stream, 'Upload-Offset': String(cuts[i]) }, body: new Uint8Array(data.subarray(cuts[i], cuts[i + 1])) });
      expect([i, last.status]).toEqual([i, 204]);
    }
    expect(last!.headers.get('x-svc-blob-id')).toBe(contentId(data));
    for (const node of [a, b]) expect((await fetch(`${node.url}${path}`, { method: 'HEAD', headers: tus })).headers.get('x-svc-blob-id')).toBe(contentId(data));
    const partials: string[] = [];
    for (const [node, part] of [[a, data.subarray(0, 2 * MiB)], [b, data.subarray(2 * MiB)]] as const) {
      const res = await fetch(`${node.url}/files/`, { method: 'POST', headers: { ...stream, 'Upload-Concat': 'partial', 'Upload-Length': String(part.length) }, body: new Uint8Array(part) });
      expect(res.status).toBe(201);
      partials.push(res.headers.get('location')!);
    }
    const final = await fetch(`${a.url}/files/`, { method: 'POST', headers: { ...tus, 'Upload-Concat': `final;${partials.join(' ')}` } });
    expect([final.status, final.headers.get('x-svc-blob-id')]).toEqual([201, contentId(data)]);
  });
});
