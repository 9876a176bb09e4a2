import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSha256Pair, newState, sha256PairUnavailableReason } from '../dist/engine/cas/sha256-pair.js';
import { contentId, seededBytes, sha256, upload } from './helpers/http.js';
import { type TestServer, startServer } from './helpers/server.js';

const MiB = 1024 * 1024;
const pair = loadSha256Pair();

describe('native SHA-256 pair', () => {
  it('loads and passes its self-test wherever the build made it', () => {
    const built = fs.existsSync(new URL('../dist/native/sha256-pair.node', import.meta.url));
    // Without a build (no compiler here) there is nothing to load; a build that fails its
    // self-test must not pass unnoticed as "unavailable".
    if (built) expect(sha256PairUnavailableReason()).toBe('');
    expect(pair !== null).toBe(built);
  });

  it.skipIf(!pair)(`hashes two streams over shared bytes as node:crypto does (${pair ? 'built' : sha256PairUnavailableReason()})`, () => {
    const p = pair!;
    const bytes = randomBytes(300_000);
    for (let round = 0; round < 40; round++) {
      // Stream b starts `lag` bytes after stream a, at no shared 64-byte alignment.
      const lag = (round * 37) % 200;
      const a = newState(p);
      const b = newState(p);
      p.update(a, null, bytes.subarray(0, lag));
      let at = lag;
      for (let step = 1 + round; at < bytes.length; at += step, step = (step * 7 + round) % 70_000) {
        p.update(a, b, bytes.subarray(at, Math.min(bytes.length, at + step)));
        if (round % 10 === 0) expect(p.hex(b)).toBe(sha256(bytes.subarray(lag, Math.min(bytes.length, at + step))));
      }
      expect(p.hex(a)).toBe(sha256(bytes));
      expect(p.hex(b)).toBe(sha256(bytes.subarray(lag)));
      // hex() leaves the state as it was.
      expect(p.hex(a)).toBe(sha256(bytes));
    }
    const empty = newState(p);
    expect(p.hex(empty)).toBe(sha256(new Uint8Array(0)));
  });

  it.skipIf(!pair)('agrees with node:crypto over random interleavings of one-stream and two-stream updates', () => {
    const p = pair!;
    const data = seededBytes(1 << 16, 9);
    let seed = 12345;
    const next = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
    for (let round = 0; round < 3000; round++) {
      const [a, b] = [newState(p), newState(p)];
      const [ha, hb] = [createHash('sha256'), createHash('sha256')];
      for (let step = 0, at = next(60_000); step < 1 + (round % 12); step++, at = next(60_000)) {
        const piece = data.subarray(at, at + next(next(10) < 3 ? 4000 : 200));
        const mode = next(4);
        if (mode === 0) p.update(a, null, piece);
        else if (mode === 1) p.update(b, null, piece);
        else p.update(mode === 2 ? a : b, mode === 2 ? b : a, piece);
        if (mode !== 1) ha.update(piece);
        if (mode !== 0) hb.update(piece);
      }
      expect([p.hex(a), p.hex(b)]).toEqual([ha.digest('hex'), hb.digest('hex')]);
    }
  });

  it.skipIf(!pair)('reads bytes in shared memory and refuses what is not a state', () => {
    const p = pair!;
    const shared = new Uint8Array(new SharedArrayBuffer(100_000));
    shared.set(seededBytes(100_000, 5));
    const s = newState(p);
    p.update(s, null, shared);
    expect(p.hex(s)).toBe(sha256(shared));
    expect(() => p.update(new Uint8Array(3), null, shared)).toThrow(/SHA-256 state/);
    expect(() => p.update(s, s, shared)).toThrow(/different states/);
    expect(() => p.update(s, null, [1, 2, 3] as unknown as Uint8Array)).toThrow(/Uint8Array/);
  });
});

/** Every block file under the store is named by the SHA-256 of its bytes. */
function expectBlocksNamedByContent(root: string): number {
  const blocks = path.join(root, 'blocks');
  let count = 0;
  for (const dir of fs.readdirSync(blocks)) {
    if (dir.startsWith('.')) continue;
    for (const name of fs.readdirSync(path.join(blocks, dir))) {
      const bytes = fs.readFileSync(path.join(blocks, dir, name));
      expect(`${sha256(bytes)}-${bytes.length}`).toBe(name);
      count++;
    }
  }
  return count;
}

async function resumable(url: string, body: Buffer, parts: number[]): Promise<string> {
  const id = crypto.randomUUID();
  const created = await fetch(`${url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': id } });
  expect(created.status).toBe(201);
  let offset = 0;
  for (const size of parts) {
    const res = await fetch(`${url}/api/v1/uploads/${id}`, {
      method: 'PATCH',
      headers: { 'Upload-Offset': String(offset), 'Upload-Part-Id': crypto.randomUUID(), 'Content-Type': 'application/offset+octet-stream' },
      body: body.subarray(offset, offset + size) as Uint8Array<ArrayBuffer>,
    });
    expect(res.status).toBe(204);
    offset += size;
  }
  const committed = await fetch(`${url}/api/v1/uploads/${id}/commit`, { method: 'POST' });
  expect(committed.status).toBe(200);
  return ((await committed.json()) as { committedBlob: string }).committedBlob;
}

for (const mode of ['auto', 'off'] as const) {
  describe(`block ids with SVC_NATIVE_SHA256=${mode}`, () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_NATIVE_SHA256: mode, SVC_LOG_LEVEL: 'info' });
    });
    afterAll(() => server.stop());

    it('says in its listening line who hashes the blocks', () => {
      const expected = mode === 'auto' && pair ? 'scanning thread (native SHA-256 pair)' : 'worker threads (node:crypto)';
      expect(server.stderr()).toContain(`"blockHashing":"${expected}"`);
    });

    it('names every block by its content: direct uploads, a PDF cut by its FastCDC fallback, a resumable upload', async () => {
      const direct = seededBytes(24 * MiB + 12345, 21);
      const a = await upload(server.url, direct);
      expect(a.res.status).toBe(201);
      expect(a.json.blob.id).toBe(contentId(direct));

      // No object boundary for 12 MiB: the PDF chunker falls back to FastCDC behind bytes it searched.
      const pdf = Buffer.concat([Buffer.from('%PDF-1.7\n'), seededBytes(12 * MiB, 22), Buffer.from('\nendobj\n%%EOF\n')]);
      const b = await upload(server.url, pdf, { 'Content-Type': 'application/pdf' });
      expect(b.res.status).toBe(201);
      expect(b.json.blob.id).toBe(contentId(pdf));
      expect(b.json.blob.blockCount).toBeGreaterThan(3);

      const object = seededBytes(20 * MiB + 7, 23);
      expect(await resumable(server.url, object, [3 * MiB + 1, 5 * MiB, 1, 7 * MiB - 2, 5 * MiB + 8])).toBe(contentId(object));

      expect(expectBlocksNamedByContent(server.root)).toBeGreaterThan(30);
    });
  });
}
