import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { TEST_BACKEND } from './helpers/backends.js';
import { startServer, tempRoot } from './helpers/server.js';
import { contentId, rawRequest, seededBytes, sha256, upload } from './helpers/http.js';

const MiB = 1024 * 1024;

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return Number(m![1]);
}

/**
 * Descriptors of files (not sockets, pipes, event fds or devices: pg-s3 keeps connections to
 * PostgreSQL and S3 open, and its SDK opens /dev/null on first use).
 */
function openFiles(pid: number): number {
  return fs.readdirSync(`/proc/${pid}/fd`).filter((fd) => {
    try {
      const target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      return target.startsWith('/') && !target.startsWith('/dev/');
    } catch {
      return false;
    }
  }).length;
}

/** Files of writes in progress: block temp files (fs) or upload spills (pg-s3's scratch directory). */
function listTemp(root: string): string[] {
  const dir = TEST_BACKEND === 'fs' ? path.join(root, 'blocks', '.tmp') : path.join(root, 'scratch');
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => e.name);
}

/** Sends headers and `sent` bytes of a declared `declared`-byte body, then drops the connection. */
function partialUpload(port: number, declared: number, sent: number, seed: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', async () => {
      socket.write(`POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Length: ${declared}\r\n\r\n`);
      for (let off = 0; off < sent; off += MiB) {
        if (!socket.write(seededBytes(Math.min(MiB, sent - off), seed + off))) await new Promise((r) => socket.once('drain', r));
      }
      setTimeout(() => socket.destroy(), 100);
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve());
  });
}

async function eventually(check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('robustness', () => {
  it('a client that disconnects mid-upload leaves no manifest, no buffers, no open files', async () => {
    const server = await startServer({ SVC_DURABILITY: 'relaxed' });
    try {
      await upload(server.url, Buffer.from('warm up'));
      const filesBefore = openFiles(server.proc.pid!);
      await Promise.all([partialUpload(server.port, 64 * MiB, 20 * MiB, 1), partialUpload(server.port, 10 * MiB, 3 * MiB + 5, 2), partialUpload(server.port, 1000, 10, 3)]);
      await eventually(async () => (await metric(server.url, 'svc_buffered_bytes')) === 0 && (await metric(server.url, 'svc_transfers_in_flight')) === 0);
      const list = (await (await fetch(`${server.url}/api/v1/blobs`)).json()) as any;
      expect(list.blobs.map((b: any) => b.size)).toEqual([7]);
      await eventually(async () => openFiles(server.proc.pid!) <= filesBefore);
      expect(listTemp(server.root)).toEqual([]);
    } finally {
      await server.stop();
    }
  });

  // Block temp files are the fs store's (pg-s3 writes each block with one PUT; its kill -9 cases are in uploads-api and multi-node).
  it.skipIf(TEST_BACKEND !== 'fs')('kill -9 during uploads: every acknowledged blob is intact after restart, temp files are cleaned', async () => {
    const root = tempRoot();
    let server = await startServer({ SVC_DURABILITY: 'strict' }, root);
    const acknowledged: Array<{ id: string; body: Buffer }> = [];
    let stop = false;
    const writer = async (seed: number) => {
      for (let i = 0; !stop; i++) {
        const body = seededBytes(((seed * 7919 + i * 104729) % (6 * MiB)) + 1, seed * 1000 + i);
        try {
          const { res, json } = await upload(server.url, body);
          if (res.status === 201) acknowledged.push({ id: json.blob.id, body });
        } catch {
          return; // the server died under us
        }
      }
    };
    const writers = [writer(1), writer(2), writer(3), partialUpload(server.port, 200 * MiB, 150 * MiB, 9)];
    await eventually(async () => acknowledged.length >= 6, 60_000);
    await server.kill9();
    stop = true;
    await Promise.all(writers);
    fs.writeFileSync(path.join(root, 'blocks', '.tmp', 'leftover.partial'), 'x');
    fs.mkdirSync(path.join(root, 'blocks', '.tmp', 'w7'), { recursive: true });
    fs.writeFileSync(path.join(root, 'blocks', '.tmp', 'w7', 'leftover.0'), 'x');
    server = await startServer({ SVC_DURABILITY: 'strict' }, root);
    try {
      expect(listTemp(root)).toEqual([]);
      for (const { id, body } of acknowledged) {
        expect(id).toBe(contentId(body));
        const verify = (await (await fetch(`${server.url}/api/v1/blobs/${id}/verify`, { method: 'POST' })).json()) as any;
        expect(verify).toEqual({ id, verified: true, bytesChecked: body.length });
        const got = Buffer.from(await (await fetch(`${server.url}/api/v1/blobs/${id}`)).arrayBuffer());
        expect(sha256(got)).toBe(sha256(body));
      }
      // Every listed blob is whole: nothing half-published.
      const list = (await (await fetch(`${server.url}/api/v1/blobs?limit=1000`)).json()) as any;
      for (const b of list.blobs) {
        const v = (await (await fetch(`${server.url}/api/v1/blobs/${b.id}/verify`, { method: 'POST' })).json()) as any;
        expect(v.verified).toBe(true);
      }
    } finally {
      await server.stop();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('50 concurrent uploads of 1 B .. 64 MiB with concurrent reads round-trip every byte in bounded memory', async () => {
    const server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_INGEST_BUFFER_BYTES: '96MiB' });
    const sizes = [1, 777, 4096, 100_000, MiB + 1, 5 * MiB, 17 * MiB, 64 * MiB];
    let peak = 0;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, server.rss());
      } catch {}
    }, 25);
    try {
      // Bodies and ids are made before any request, and reads are compared, not hashed: a test
      // process that blocks its event loop for seconds (making 64 MiB bodies, hashing them) lets
      // its idle keep-alive connections go stale, and a request then meets a closed socket.
      const bodies = Array.from({ length: 50 }, (_, i) => seededBytes(sizes[i % sizes.length], 5000 + i));
      const ids = bodies.map((b) => contentId(b));
      // Every thread's code loaded first (pg-s3: the S3 client of each worker), so that the bound is on what the load adds.
      const warm = seededBytes(9 * MiB, 4999);
      await Promise.all(Array.from({ length: 4 }, async (_, i) => {
        const body = warm.subarray(i * 4096);
        expect((await upload(server.url, body)).res.status).toBe(201);
        await (await fetch(`${server.url}/api/v1/blobs/${contentId(body)}`)).arrayBuffer();
      })).catch((err) => {
        throw new Error(`warm-up: ${String(err)} (${String((err as Error).cause)}); server log:\n${server.stderr().slice(-4000)}`);
      });
      const baseline = server.rss();
      const stored = new Map<string, number>();
      const t0 = Date.now();
      const roundTrip = async (i: number) => {
        const body = bodies[i];
        const id = ids[i];
        let began = Date.now();
        const step = (name: string) => (err: unknown) => {
          throw new Error(`${name} of ${body.length} bytes (task ${i}), sent at +${began - t0} ms, failed at +${Date.now() - t0} ms: ${String(err)} (${String((err as Error).cause)})`);
        };
        const { res, json } = await upload(server.url, body).catch(step('upload'));
        expect(res.status).toBe(201);
        expect(json.blob.id).toBe(id);
        stored.set(id, i);
        // Read back something uploaded by another task while uploads continue.
        const other = [...stored.keys()][i % stored.size];
        began = Date.now();
        const r = await fetch(`${server.url}/api/v1/blobs/${other}`).catch(step('read of another'));
        const got = Buffer.from(await r.arrayBuffer().catch(step('body of another')));
        expect(got.equals(bodies[stored.get(other)!])).toBe(true);
        began = Date.now();
        const mine = Buffer.from(await (await fetch(`${server.url}/api/v1/blobs/${id}`).catch(step('read back'))).arrayBuffer().catch(step('body read back')));
        expect(mine.equals(body)).toBe(true);
      };
      // Started one per turn of the event loop: fetch copies each body when it is called, and 50
      // calls in one synchronous loop (530 MiB of copies) can block a starved test process past the
      // server's 10 s idle timeout, so the client's keep-alive timers (4 s) cannot retire the
      // warm-up's idle connections before a request is written on one the server has closed.
      const trips: Array<Promise<void>> = [];
      for (let i = 0; i < 50; i++) {
        const trip = roundTrip(i);
        trip.catch(() => {}); // answered by Promise.all below; not unhandled meanwhile
        trips.push(trip);
        await new Promise(setImmediate);
      }
      await Promise.all(trips).catch((err) => {
        throw new Error(`${String(err)}; server log:\n${server.stderr().slice(-4000)}`);
      });
      expect(stored.size).toBe(50);
      // Upload segments and download buffers live within SVC_INGEST_BUFFER_BYTES (96 MiB), bytes
      // uWS delivers after pause() wait in spill files; the rest is the runtime's own, and how much
      // of that is garbage not yet collected depends on the machine's load: alone, 176-229 MiB over
      // the baseline on pg-s3 (198-214 MiB before issue 25), 241 MiB beside the full suite. The
      // bodies total ~530 MiB (six of 64 MiB) and each is read twice: holding them whole would be
      // several times this bound.
      expect(peak - baseline).toBeLessThan(320 * MiB);
      expect(await metric(server.url, 'svc_buffered_bytes')).toBe(0);
      // Spill files of backlogs are gone once their uploads are done.
      await eventually(async () => listTemp(server.root).length === 0);
    } finally {
      clearInterval(sampler);
      await server.stop();
    }
  });

  it('downloads dropped mid-stream give back their transfer memory and do not disturb other downloads', async () => {
    const server = await startServer({ SVC_DURABILITY: 'relaxed' });
    try {
      const blobs = [seededBytes(9 * MiB, 71), seededBytes(6 * MiB, 72), seededBytes(3 * MiB + 5, 73)];
      for (const body of blobs) expect((await upload(server.url, body)).res.status).toBe(201);
      const ids = blobs.map(contentId);
      // Read the first chunk of a large download, then drop the connection while its next
      // block is being read ahead into a recycled buffer.
      const abandon = (id: string) =>
        new Promise<void>((resolve) => {
          const socket = net.connect(Number(new URL(server.url).port), '127.0.0.1', () => socket.write(`GET /api/v1/blobs/${id} HTTP/1.1\r\nHost: x\r\n\r\n`));
          socket.once('data', () => socket.destroy());
          socket.on('close', () => resolve());
          socket.on('error', () => resolve());
        });
      const complete = async (i: number) => {
        const got = Buffer.from(await (await fetch(`${server.url}/api/v1/blobs/${ids[i % ids.length]}`)).arrayBuffer());
        expect(got.equals(blobs[i % blobs.length]), `download ${i}`).toBe(true);
      };
      for (let round = 0; round < 4; round++) {
        await Promise.all([...Array.from({ length: 6 }, (_, i) => abandon(ids[i % ids.length])), ...Array.from({ length: 6 }, (_, i) => complete(round + i))]);
      }
      // A dropped download's read-ahead may still be on its way from S3: its buffer comes back when it lands.
      await eventually(async () => (await metric(server.url, 'svc_buffered_bytes')) === 0);
    } finally {
      await server.stop();
    }
  });

  it('maximal blocks that straddle segments do not stall a paused upload', async () => {
    // Zeros never cut, so every block after the random prefix is maximal (4 MiB) and starts 986 KB
    // into a 1 MiB segment (the prefix's first cut is at 986,252): each spans five segments, more
    // than the resume mark, while the upload waits paused for the bytes that end it.
    const server = await startServer({ SVC_DURABILITY: 'relaxed' });
    try {
      const body = Buffer.concat([seededBytes(1_800_000, 10), Buffer.alloc(96 * MiB)]);
      const head = `POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n`;
      for (let i = 0; i < 4; i++) {
        // One write of the whole request: the sender outruns the server, so the upload pauses.
        const res = await rawRequest(server.port, Buffer.concat([Buffer.from(head), body]), 20_000);
        expect(res?.status).toBe(201);
        expect(JSON.parse(res!.body.toString()).blob.id).toBe(contentId(body));
      }
    } finally {
      await server.stop();
    }
  }, 60_000);

  // The corruption is made in a block file (fs).
  it.skipIf(TEST_BACKEND !== 'fs')('a corrupted block is never served: 500 storage_failure, verify false, counted in metrics', async () => {
    const server = await startServer({ SVC_DURABILITY: 'relaxed' });
    try {
      const body = seededBytes(3 * MiB, 77);
      const { json } = await upload(server.url, body);
      const meta = (await (await fetch(`${server.url}/api/v1/blobs/${json.blob.id}/metadata`)).json()) as any;
      const first = meta.blocks[0].contentId.split(':');
      const file = path.join(server.root, 'blocks', first[1].slice(0, 3), `${first[1]}-${first[2]}`);
      const bytes = fs.readFileSync(file);
      bytes[1000] ^= 0xff;
      fs.writeFileSync(file, bytes);
      const res = await fetch(`${server.url}/api/v1/blobs/${json.blob.id}`);
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({ error: 'storage_failure', message: expect.any(String) });
      const ranged = await fetch(`${server.url}/api/v1/blobs/${json.blob.id}`, { headers: { Range: `bytes=${body.length - 10}-` } });
      expect(ranged.status).toBe(206);
      expect(Buffer.from(await ranged.arrayBuffer()).equals(body.subarray(body.length - 10))).toBe(true);
      const verify = (await (await fetch(`${server.url}/api/v1/blobs/${json.blob.id}/verify`, { method: 'POST' })).json()) as any;
      expect(verify).toEqual({ id: json.blob.id, verified: false, bytesChecked: body.length });
      expect(await metric(server.url, 'svc_corrupt_blocks')).toBe(1);
      expect(server.stderr()).not.toContain('at ');
    } finally {
      await server.stop();
    }
  });
});
