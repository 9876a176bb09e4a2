// A full disk must not stay full: the blocks a failed upload wrote are deleted at once (but not
// those another upload still needs), and below SVC_MIN_FREE_SPACE uploads are refused up front.

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { contentId, seededBytes, sha256, upload } from './helpers/http.js';
import { type TestServer, startServer } from './helpers/server.js';

const BLOCK = 16 * 1024;
/** Fixed 16 KiB blocks in 64 KiB segments, one worker thread (store tasks run in order), no inline blobs. */
const ENV = {
  SVC_DURABILITY: 'relaxed',
  SVC_CHUNKER: 'fixed',
  SVC_CHUNK_MIN: '4KiB',
  SVC_CHUNK_AVG: '16KiB',
  SVC_CHUNK_MAX: '64KiB',
  SVC_SEGMENT_BYTES: '64KiB',
  SVC_WORKERS: '1',
  SVC_INLINE_MAX_BYTES: '0',
};

/** `<hex>-<size>` of each 16 KiB block of `data`. */
const blockNames = (data: Buffer) => Array.from({ length: Math.ceil(data.length / BLOCK) }, (_, i) => {
  const b = data.subarray(i * BLOCK, (i + 1) * BLOCK);
  return `${sha256(b)}-${b.length}`;
});
const livePath = (s: TestServer, name: string) => path.join(s.root, 'blocks', name.slice(0, 3), name);
const quarantinePath = (s: TestServer, name: string) => path.join(s.root, 'blocks', '.quarantine', name.slice(0, 3), name);
const isFile = (p: string) => fs.statSync(p, { throwIfNoEntry: false })?.isFile() === true;

/** A direct upload whose body is written piece by piece (chunked), answered once it ends. */
function streamingUpload(url: string) {
  const req = http.request(`${url}/api/v1/blobs`, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' } });
  const answer = new Promise<{ status: number; json: any }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, json: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', reject);
  });
  return {
    write: (bytes: Buffer) => void req.write(bytes),
    end: () => {
      req.end();
      return answer;
    },
  };
}

async function until(what: () => boolean): Promise<void> {
  await vi.waitFor(() => expect(what()).toBe(true), { timeout: 20_000, interval: 20 });
}

async function gcState(url: string): Promise<any> {
  return (await fetch(`${url}/api/ops/v1/gc`)).json();
}

describe('reclaiming the blocks of a failed upload', () => {
  it('deletes at once the blocks it wrote that nothing needs; an upload sharing the others is unaffected', async () => {
    const server = await startServer(ENV);
    try {
      const shared = seededBytes(32 * BLOCK, 1);
      const own = seededBytes(8 * BLOCK, 2);
      const failing = seededBytes(BLOCK, 3);
      const a = Buffer.concat([shared, own, failing, seededBytes(8 * BLOCK, 4)]);
      const b = Buffer.concat([shared, seededBytes(8 * BLOCK, 5)]);
      // A directory where the failing block's file goes: its write fails (the disk-full stand-in).
      const [failingName] = blockNames(failing);
      fs.mkdirSync(path.join(livePath(server, failingName), 'in-the-way'), { recursive: true });

      // A writes the shared blocks and its own.
      const first = streamingUpload(server.url);
      first.write(Buffer.concat([shared, own]));
      const written = [...blockNames(shared), ...blockNames(own)];
      await until(() => written.every((n) => isFile(livePath(server, n))));

      // B finds the shared blocks on disk (deduplicated) and stays open. With one worker thread,
      // once its last blocks are on disk every earlier store of B has reported.
      const second = streamingUpload(server.url);
      second.write(b);
      const bLast = blockNames(b).slice(-4);
      await until(() => bLast.every((n) => isFile(livePath(server, n))));

      // A resumable session records three of A's own blocks (a part of three blocks and a byte).
      const session = randomUUID();
      expect((await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': session } })).status).toBe(201);
      const partBytes = own.subarray(0, 3 * BLOCK + 1);
      const part = await fetch(`${server.url}/api/v1/uploads/${session}`, {
        method: 'PATCH',
        body: partBytes as Uint8Array<ArrayBuffer>,
        headers: { 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() },
      });
      expect(part.status).toBe(204);

      // A fails on the blocked write.
      first.write(a.subarray(shared.length + own.length));
      const failed = await first.end();
      expect(failed).toEqual({ status: 500, json: { error: 'ingest_failed', message: expect.any(String) } });

      // Its own blocks are gone at once (not after SVC_GC_MIN_AGE), live and quarantined alike,
      // but for those the session recorded.
      await vi.waitFor(async () => expect((await gcState(server.url)).reclaimed).toEqual({ blocks: 5, bytes: 5 * BLOCK }), { timeout: 20_000, interval: 50 });
      for (const n of blockNames(own).slice(3)) {
        expect(isFile(livePath(server, n))).toBe(false);
        expect(isFile(quarantinePath(server, n))).toBe(false);
      }
      for (const n of blockNames(own).slice(0, 3)) expect(isFile(livePath(server, n))).toBe(true);
      // The shared ones stay: B holds them.
      for (const n of blockNames(shared)) expect(isFile(livePath(server, n))).toBe(true);
      expect((await gcState(server.url)).quarantinedBlocks).toBe(0);

      const done = await second.end();
      expect(done.status).toBe(201);
      expect(done.json.blob.id).toBe(contentId(b));
      expect(done.json.duplicateBlocks).toBe(32);
      const read = await fetch(`${server.url}/api/v1/blobs/${contentId(b)}`);
      expect(Buffer.from(await read.arrayBuffer()).equals(b)).toBe(true);
      const verify = await fetch(`${server.url}/api/v1/blobs/${contentId(b)}/verify`, { method: 'POST' });
      expect(((await verify.json()) as any).verified).toBe(true);

      const committed = await fetch(`${server.url}/api/v1/uploads/${session}/commit`, { method: 'POST' });
      expect(committed.status).toBe(200);
      expect(((await committed.json()) as any).committedBlob).toBe(contentId(partBytes));
      const verifyPart = await fetch(`${server.url}/api/v1/blobs/${contentId(partBytes)}/verify`, { method: 'POST' });
      expect(((await verifyPart.json()) as any).verified).toBe(true);

      // Once the way is clear, A uploads: its deleted blocks are written again.
      fs.rmSync(livePath(server, failingName), { recursive: true });
      const again = await upload(server.url, a);
      expect(again.res.status).toBe(201);
      const verifyA = await fetch(`${server.url}/api/v1/blobs/${contentId(a)}/verify`, { method: 'POST' });
      expect(((await verifyA.json()) as any).verified).toBe(true);
    } finally {
      await server.stop();
    }
  });
});

describe('SVC_MIN_FREE_SPACE', () => {
  it('below the floor: uploads are 507 before a byte is stored, readiness is degraded, the snapshot says why', async () => {
    const server = await startServer({ ...ENV, SVC_MIN_FREE_SPACE: '100%' });
    try {
      const up = await upload(server.url, seededBytes(100_000, 9));
      expect(up.res.status).toBe(507);
      expect(up.json).toEqual({ error: 'insufficient_storage', message: expect.stringContaining('SVC_MIN_FREE_SPACE') });
      expect(fs.readdirSync(path.join(server.root, 'blocks')).filter((n) => !n.startsWith('.'))).toEqual([]);

      // A resumable part too; the session is left as it was (not leased).
      const id = randomUUID();
      expect((await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': id } })).status).toBe(201);
      const part = await fetch(`${server.url}/api/v1/uploads/${id}`, {
        method: 'PATCH',
        body: seededBytes(1000, 10) as Uint8Array<ArrayBuffer>,
        headers: { 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() },
      });
      expect(part.status).toBe(507);
      expect(((await part.json()) as any).error).toBe('insufficient_storage');
      expect(((await (await fetch(`${server.url}/api/v1/uploads/${id}`)).json()) as any)).toMatchObject({ offset: 0, partCount: 0 });
      const cancel = await fetch(`${server.url}/api/v1/uploads/${id}`, { method: 'DELETE' });
      expect(cancel.status).toBe(204);

      const ready = await fetch(`${server.url}/api/health/ready`);
      expect(ready.status).toBe(200);
      const body = (await ready.json()) as any;
      expect(body.status).toBe('degraded');
      expect(body.checks.find((c: any) => c.name === 'diskSpace')).toEqual({
        name: 'diskSpace',
        status: 'warn',
        latencyMs: expect.any(Number),
        detail: expect.stringMatching(/below SVC_MIN_FREE_SPACE .*uploads are refused \(507\)/),
      });

      const snapshot = (await (await fetch(`${server.url}/api/ops/v1/snapshot`)).json()) as any;
      expect(snapshot.status).toBe('Degraded');
      expect(snapshot.checks.find((c: any) => c.id === 'diskSpace')).toEqual({ id: 'diskSpace', status: 'warn', detail: expect.stringContaining('below SVC_MIN_FREE_SPACE') });
      expect(snapshot.storage.minFreeBytes).toBeGreaterThan(snapshot.storage.availableBytes);
    } finally {
      await server.stop();
    }
  });

  it('above the floor: uploads proceed and readiness is ready', async () => {
    const server = await startServer({ ...ENV, SVC_MIN_FREE_SPACE: '1MiB' });
    try {
      expect((await upload(server.url, seededBytes(100_000, 11))).res.status).toBe(201);
      const body = (await (await fetch(`${server.url}/api/health/ready`)).json()) as any;
      expect(body.status).toBe('ready');
      expect(body.checks.find((c: any) => c.name === 'diskSpace')).toMatchObject({ status: 'ok' });
      const snapshot = (await (await fetch(`${server.url}/api/ops/v1/snapshot`)).json()) as any;
      expect(snapshot.storage.minFreeBytes).toBe(1024 * 1024);
    } finally {
      await server.stop();
    }
  });
});
