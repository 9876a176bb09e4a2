import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestServer, startServer } from './helpers/server.js';
import { checkedFetch as fetch, contentId, rawRequest, seededBytes, sha256, upload } from './helpers/http.js';
import { BACKEND_DEPENDENCIES, TEST_BACKEND, countStoredBlocks } from './helpers/backends.js';

let server: TestServer;
let url: string;

beforeAll(async () => {
  server = await startServer({ SVC_DURABILITY: 'relaxed' });
  url = server.url;
});
afterAll(() => server.stop());

const MiB = 1024 * 1024;

describe('POST /api/v1/blobs', () => {
  it('stores a body and answers 201 with Location, ETag and the summary', async () => {
    const body = seededBytes(3 * MiB + 123, 1);
    const { res, json } = await upload(url, body, { 'Content-Type': 'application/octet-stream' });
    const id = contentId(body);
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.headers.get('location')).toBe(`/api/v1/blobs/${id}`);
    expect(res.headers.get('etag')).toBe(`"${id}"`);
    expect(json.blob).toMatchObject({ id, size: body.length, mediaType: 'application/octet-stream', chunker: 'fastcdc-262144-1048576-4194304' });
    expect(json.blob.blockCount).toBeGreaterThanOrEqual(1);
    expect(new Date(json.blob.createdAt).toISOString()).toBe(json.blob.createdAt);
    expect(json.freshBlocks + json.duplicateBlocks).toBe(json.blob.blockCount);
    expect(typeof json.durationSeconds).toBe('number');
  });

  it('returns the same id for identical bytes and reuses every block', async () => {
    const body = seededBytes(2 * MiB, 2);
    const first = await upload(url, body);
    const second = await upload(url, body);
    expect(second.res.status).toBe(201);
    expect(second.json.blob.id).toBe(first.json.blob.id);
    expect(second.json.freshBlocks).toBe(0);
    expect(second.json.duplicateBlocks).toBe(first.json.blob.blockCount);
  });

  it('deduplicates shared content between different blobs', async () => {
    const base = seededBytes(8 * MiB, 3);
    await upload(url, base);
    const edited = Buffer.concat([base, seededBytes(100_000, 4)]);
    const { json } = await upload(url, edited);
    expect(json.duplicateBlocks).toBeGreaterThanOrEqual(json.blob.blockCount - 2);
  });

  it('accepts a chunked body without Content-Length', async () => {
    const body = seededBytes(300_000, 5);
    const stream = new ReadableStream({
      start(c) {
        for (let i = 0; i < body.length; i += 70_000) c.enqueue(body.subarray(i, i + 70_000));
        c.close();
      },
    });
    const res = await fetch(`${url}/api/v1/blobs`, { method: 'POST', body: stream, duplex: 'half' } as RequestInit);
    expect(res.status).toBe(201);
    expect(((await res.json()) as any).blob.id).toBe(contentId(body));
  });

  it('uses the fixed chunker when configured', async () => {
    const other = await startServer({ SVC_CHUNKER: 'fixed', SVC_DURABILITY: 'relaxed' });
    try {
      const { json } = await upload(other.url, seededBytes(2.5 * MiB, 6));
      expect(json.blob.chunker).toBe('fixed-1048576');
      expect(json.blob.blockCount).toBe(3);
    } finally {
      await other.stop();
    }
  });

  it('refuses an empty body with 400 invalid_blob', async () => {
    const { res, json } = await upload(url, new Uint8Array(0));
    expect(res.status).toBe(400);
    expect(json.error).toBe('invalid_blob');
    const raw = await rawRequest(server.port, 'POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(raw?.status).toBe(400);
    expect(JSON.parse(raw!.body.toString()).error).toBe('invalid_blob');
  });

  describe('PDF detection', () => {
    const pdf = Buffer.concat([Buffer.from('%PDF-1.7\n1 0 obj\n<< >>\nendobj\n'), seededBytes(5000, 7), Buffer.from('\n%%EOF\n')]);

    it('octet-stream or no type plus %PDF- gets the PDF chunker and application/pdf', async () => {
      for (const headers of <Record<string, string>[]>[{}, { 'Content-Type': 'application/octet-stream' }]) {
        const { res, json } = await upload(url, pdf, headers);
        expect(res.status).toBe(201);
        expect(json.blob.mediaType).toBe('application/pdf');
        expect(json.blob.chunker).toBe('pdf-object-1048576-4194304');
      }
    });

    it('application/pdf with a PDF body is accepted', async () => {
      const { res, json } = await upload(url, pdf, { 'Content-Type': 'application/pdf' });
      expect(res.status).toBe(201);
      expect(json.blob.chunker).toBe('pdf-object-1048576-4194304');
    });

    it('application/pdf without the signature is 400', async () => {
      const { res, json } = await upload(url, Buffer.from('not a pdf at all'), { 'Content-Type': 'application/pdf' });
      expect(res.status).toBe(400);
      expect(json).toEqual({ error: 'invalid_blob', message: expect.stringContaining('%PDF-') });
    });

    it('a concrete other type with the PDF signature is 400', async () => {
      const { res, json } = await upload(url, pdf, { 'Content-Type': 'text/plain' });
      expect(res.status).toBe(400);
      expect(json.error).toBe('invalid_blob');
      expect(json.message).toContain('text/plain');
    });

    it('other types keep their type and the default chunker', async () => {
      const { json } = await upload(url, Buffer.from('hello'), { 'Content-Type': 'text/plain; charset=utf-8' });
      expect(json.blob.mediaType).toBe('text/plain; charset=utf-8');
      expect(json.blob.chunker).toMatch(/^fastcdc-/);
    });

    it('nothing is published for a refused upload', async () => {
      const body = Buffer.from('%PDF-1.4 refused body unique 8472');
      await upload(url, body, { 'Content-Type': 'image/png' });
      const res = await fetch(`${url}/api/v1/blobs/${contentId(body)}`);
      expect(res.status).toBe(404);
    });
  });

  it('enforces SVC_MAX_UPLOAD_BYTES from Content-Length and while streaming', async () => {
    const small = await startServer({ SVC_MAX_UPLOAD_BYTES: '1MiB', SVC_DURABILITY: 'relaxed' });
    try {
      const big = seededBytes(MiB + 1, 8);
      const declared = await rawRequest(small.port, `POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Length: ${big.length}\r\n\r\n`);
      expect(declared?.status).toBe(413);
      expect(JSON.parse(declared!.body.toString()).error).toBe('payload_too_large');
      // Chunked: no declared size, so the limit trips mid-stream.
      const chunks = [`POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n`];
      for (let i = 0; i < 20; i++) chunks.push(`${(64 * 1024).toString(16)}\r\n${'a'.repeat(64 * 1024)}\r\n`);
      chunks.push('0\r\n\r\n');
      const streamed = await rawRequest(small.port, chunks.join(''));
      expect(streamed?.status).toBe(413);
      expect(JSON.parse(streamed!.body.toString()).error).toBe('payload_too_large');
      const list = (await (await fetch(`${small.url}/api/v1/blobs`)).json()) as any;
      expect(list.blobs).toEqual([]);
    } finally {
      await small.stop();
    }
  });

  it('treats Content-Length as exact: a short body publishes nothing', async () => {
    const body = seededBytes(10_000, 9);
    const raw = await rawRequest(server.port, Buffer.concat([Buffer.from(`POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n`), body]), 800, { endAfterWrite: true });
    expect(raw === null || raw.status >= 400).toBe(true);
    expect((await fetch(`${url}/api/v1/blobs/${contentId(body)}`)).status).toBe(404);
  });

  it('refuses malformed Content-Length before reading the body', async () => {
    for (const value of ['+5', '1e1', '-1', 'five']) {
      const raw = await rawRequest(server.port, `POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Length: ${value}\r\n\r\nqwert`);
      expect(raw?.status).toBe(400);
    }
    expect((await fetch(`${url}/api/v1/blobs/${contentId(Buffer.from('qwert'))}`)).status).toBe(404);
  });

  it('refuses a Content-Type that is not a media type', async () => {
    for (const type of ['text', 'a/b c', ';;']) {
      const { res, json } = await upload(url, Buffer.from('typed body 5521'), { 'Content-Type': type });
      expect(res.status).toBe(400);
      expect(json).toEqual({ error: 'invalid_blob', message: expect.stringContaining('Content-Type') });
    }
    const ok = await upload(url, Buffer.from('typed body 5521'), { 'Content-Type': 'text/plain;' });
    expect(ok.res.status).toBe(201);
  });

  it('bytes past Content-Length are never part of a blob', async () => {
    // uWS frames the body by Content-Length; what follows must be a request, and this is not:
    // it is refused and the connection closed. The 5 declared bytes were a complete request.
    const raw = await rawRequest(server.port, 'POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nfiveXEXTRA BYTES', 800);
    expect(raw!.raw).toMatch(/^HTTP\/1\.1 (201|400|505) /);
    expect(raw!.raw).toMatch(/HTTP\/1\.1 (400|505) /);
    expect((await fetch(`${url}/api/v1/blobs/${contentId(Buffer.from('fiveXEXTRA BYTES'))}`)).status).toBe(404);
    expect((await fetch(`${url}/api/v1/blobs/${contentId(Buffer.from('EXTRA BYTES'))}`)).status).toBe(404);
  });

  it('answers 503 locality_unavailable for session-localized uploads and 400 for half of them', async () => {
    const tenant = '00000000-0000-4000-8000-000000000000';
    const session = '0190f5a2-7c3e-7aaa-8bbb-123456789abc';
    let r = await upload(url, Buffer.from('x'), { 'X-Svc-Tenant-Id': tenant, 'X-Svc-Upload-Session-Id': session });
    expect(r.res.status).toBe(503);
    expect(r.json.error).toBe('locality_unavailable');
    r = await upload(url, Buffer.from('x'), { 'X-Svc-Tenant-Id': tenant });
    expect(r.res.status).toBe(400);
    expect(r.json.error).toBe('invalid_blob');
  });
});

describe('GET and HEAD /api/v1/blobs/:id', () => {
  const body = seededBytes(5 * MiB + 77, 10);
  const id = contentId(body);
  let createdAt: string;

  beforeAll(async () => {
    createdAt = (await upload(url, body, { 'Content-Type': 'application/x-test' })).json.blob.createdAt;
  });

  it('serves the whole body with the full header set', async () => {
    const res = await fetch(`${url}/api/v1/blobs/${id}`);
    expect(res.status).toBe(200);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(sha256(bytes)).toBe(sha256(body));
    expect(res.headers.get('content-type')).toBe('application/x-test');
    expect(res.headers.get('content-length')).toBe(String(body.length));
    expect(res.headers.get('etag')).toBe(`"${id}"`);
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('last-modified')).toBe(new Date(Math.floor(Date.parse(createdAt) / 1000) * 1000).toUTCString());
  });

  it('accepts a percent-encoded id', async () => {
    const res = await fetch(`${url}/api/v1/blobs/${encodeURIComponent(id)}`, { method: 'HEAD' });
    expect(res.status).toBe(200);
  });

  it('HEAD has the same status and headers and no body', async () => {
    const raw = await rawRequest(server.port, `HEAD /api/v1/blobs/${id} HTTP/1.1\r\nHost: x\r\n\r\n`, 500);
    expect(raw?.status).toBe(200);
    expect(raw?.headers['content-length']).toBe(String(body.length));
    expect(raw?.headers.etag).toBe(`"${id}"`);
    expect(raw?.body.length).toBe(0);
  });

  it.each([
    ['bytes=0-0', 0, 0],
    ['bytes=1048570-2097160', 1048570, 2097160],
    ['bytes=5242000-', 5242000, body.length - 1],
    ['bytes=-100', body.length - 100, body.length - 1],
    [`bytes=10-${body.length + 1000}`, 10, body.length - 1],
  ])('serves %s as 206', async (range, start, end) => {
    const res = await fetch(`${url}/api/v1/blobs/${id}`, { headers: { Range: range } });
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe(`bytes ${start}-${end}/${body.length}`);
    expect(res.headers.get('content-length')).toBe(String(end - start + 1));
    expect(Buffer.from(await res.arrayBuffer()).equals(body.subarray(start, end + 1))).toBe(true);
  });

  it.each(['bytes=0-1,5-6', `bytes=${body.length}-`, 'bytes=-0', 'bytes=9-3', 'lines=1-2', 'bytes=x-'])('refuses %s with 416', async (range) => {
    const res = await fetch(`${url}/api/v1/blobs/${id}`, { headers: { Range: range } });
    expect(res.status).toBe(416);
    expect(res.headers.get('content-range')).toBe(`bytes */${body.length}`);
    expect(await res.json()).toEqual({ error: 'invalid_range', message: expect.any(String) });
  });

  it('evaluates conditional headers', async () => {
    const get = (headers: Record<string, string>) => fetch(`${url}/api/v1/blobs/${id}`, { headers });
    const lastModified = (await get({})).headers.get('last-modified')!;
    let res = await get({ 'If-None-Match': `"${id}"` });
    expect(res.status).toBe(304);
    expect(res.headers.get('etag')).toBe(`"${id}"`);
    expect((await res.arrayBuffer()).byteLength).toBe(0);
    expect((await get({ 'If-None-Match': `W/"${id}"` })).status).toBe(304);
    expect((await get({ 'If-None-Match': '"other"' })).status).toBe(200);
    expect((await get({ 'If-Modified-Since': lastModified })).status).toBe(304);
    res = await get({ 'If-Match': '"other"' });
    expect(res.status).toBe(412);
    expect(res.headers.get('etag')).toBe(`"${id}"`);
    expect(await res.json()).toEqual({ error: 'precondition_failed', message: 'If-Match or If-Unmodified-Since does not hold for the current representation' });
    expect((await get({ 'If-Match': `"${id}"` })).status).toBe(200);
    expect((await get({ 'If-Unmodified-Since': 'Mon, 01 Jan 2001 00:00:00 GMT' })).status).toBe(412);
    expect((await get({ Range: 'bytes=0-9', 'If-Range': `"${id}"` })).status).toBe(206);
    expect((await get({ Range: 'bytes=0-9', 'If-Range': '"stale"' })).status).toBe(200);
  });

  it('304 carries no Content-Length and no body', async () => {
    const raw = await rawRequest(server.port, `GET /api/v1/blobs/${id} HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n`, 500);
    expect(raw?.status).toBe(304);
    expect(raw?.headers['content-length']).toBeUndefined();
    expect(raw?.body.length).toBe(0);
  });

  it('answers 404 blob_not_found and 400 invalid_blob_id', async () => {
    let res = await fetch(`${url}/api/v1/blobs/sha-256:${'0'.repeat(64)}:1`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: 'blob_not_found', message: expect.any(String) });
    for (const bad of ['nope', `sha-256:${'0'.repeat(64)}:0`, `sha-256:${'0'.repeat(63)}:1`, 'sha-256%3', `SHA-256:${'0'.repeat(64)}:1`]) {
      res = await fetch(`${url}/api/v1/blobs/${bad}`);
      expect(res.status).toBe(400);
      expect(((await res.json()) as any).error).toBe('invalid_blob_id');
    }
  });
});

describe('metadata, verify, inventory, delete', () => {
  it('lists the manifest blocks with offsets, paginated', async () => {
    const body = seededBytes(9 * MiB, 20);
    const id = contentId(body);
    const { json: up } = await upload(url, body);
    const all: any[] = [];
    let cursor: string | undefined;
    do {
      const res = await fetch(`${url}/api/v1/blobs/${id}/metadata?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as any;
      expect(page.summary).toEqual(up.blob);
      all.push(...page.blocks);
      cursor = page.nextCursor;
    } while (cursor);
    expect(all.length).toBe(up.blob.blockCount);
    let offset = 0;
    all.forEach((b, i) => {
      expect(b.index).toBe(i);
      expect(b.offset).toBe(offset);
      expect(b.contentId).toBe(contentId(body.subarray(offset, offset + b.size)));
      offset += b.size;
    });
    expect(offset).toBe(body.length);
    expect((await fetch(`${url}/api/v1/blobs/${id}/metadata?limit=0`)).status).toBe(400);
    const bad = await fetch(`${url}/api/v1/blobs/${id}/metadata?cursor=zzz`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error).toBe('invalid_pagination');
  });

  it('verifies a blob by recomputing its SHA-256', async () => {
    const body = seededBytes(2 * MiB + 5, 21);
    const id = contentId(body);
    await upload(url, body);
    const res = await fetch(`${url}/api/v1/blobs/${id}/verify`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id, verified: true, bytesChecked: body.length });
    const missing = await fetch(`${url}/api/v1/blobs/sha-256:${'1'.repeat(64)}:3/verify`, { method: 'POST' });
    expect(missing.status).toBe(404);
  });

  it('pages the inventory newest first with an opaque cursor', async () => {
    const fresh = await startServer({ SVC_DURABILITY: 'relaxed' });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 7; i++) ids.push((await upload(fresh.url, Buffer.from(`blob number ${i}`))).json.blob.id);
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = (await (await fetch(`${fresh.url}/api/v1/blobs?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).json()) as any;
        seen.push(...page.blobs.map((b: any) => b.id));
        cursor = page.nextCursor;
      } while (cursor);
      expect(seen).toEqual([...ids].reverse());
      for (const q of ['limit=0', 'limit=1001', 'limit=abc', 'cursor=not-a-cursor', 'cursor=inv1.%21%21']) {
        const res = await fetch(`${fresh.url}/api/v1/blobs?${q}`);
        expect(res.status).toBe(400);
        expect(((await res.json()) as any).error).toBe('invalid_pagination');
      }
      const last = (await (await fetch(`${fresh.url}/api/v1/blobs?limit=1000`)).json()) as any;
      expect(last.nextCursor).toBeUndefined();
    } finally {
      await fresh.stop();
    }
  });

  it('deletes the manifest only: 204, then 404', async () => {
    const body = seededBytes(100_000, 19283);
    const { json } = await upload(url, body);
    const id = json.blob.id;
    expect((await fetch(`${url}/api/v1/blobs/${id}`, { method: 'HEAD' })).status).toBe(200); // now cached
    const del = await fetch(`${url}/api/v1/blobs/${id}`, { method: 'DELETE' });
    expect(del.status).toBe(204);
    expect((await fetch(`${url}/api/v1/blobs/${id}`)).status).toBe(404);
    expect((await fetch(`${url}/api/v1/blobs/${id}`, { method: 'DELETE' })).status).toBe(404);
    const again = await upload(url, body);
    expect(again.json.duplicateBlocks).toBe(1);
  });
});

describe('small blobs kept in the catalog', () => {
  it('stores a blob up to SVC_INLINE_MAX_BYTES without a stored block, and serves, ranges, verifies and deletes it', async () => {
    const before = await countStoredBlocks(server.root);
    const body = seededBytes(16 * 1024, 4242);
    const id = contentId(body);
    const { res, json } = await upload(url, body, { 'Content-Type': 'image/x-icon' });
    expect(res.status).toBe(201);
    expect(json).toMatchObject({ blob: { id, size: body.length, blockCount: 1 }, freshBlocks: 1, duplicateBlocks: 0 });
    expect(await countStoredBlocks(server.root)).toBe(before);
    const again = await upload(url, body, { 'Content-Type': 'image/x-icon' });
    expect(again.json).toMatchObject({ freshBlocks: 0, duplicateBlocks: 1 });
    const got = await fetch(`${url}/api/v1/blobs/${id}`);
    expect(got.headers.get('content-type')).toBe('image/x-icon');
    expect(Buffer.from(await got.arrayBuffer()).equals(body)).toBe(true);
    const ranged = await fetch(`${url}/api/v1/blobs/${id}`, { headers: { Range: 'bytes=100-199' } });
    expect(Buffer.from(await ranged.arrayBuffer()).equals(body.subarray(100, 200))).toBe(true);
    expect(await (await fetch(`${url}/api/v1/blobs/${id}/verify`, { method: 'POST' })).json()).toEqual({ id, verified: true, bytesChecked: body.length });
    const meta = (await (await fetch(`${url}/api/v1/blobs/${id}/metadata`)).json()) as any;
    expect(meta.blocks).toEqual([{ index: 0, contentId: id, offset: 0, size: body.length }]);
    expect((await fetch(`${url}/api/v1/blobs/${id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await fetch(`${url}/api/v1/blobs/${id}`)).status).toBe(404);
    // One byte more is a stored block.
    const bigger = seededBytes(16 * 1024 + 1, 4243);
    await upload(url, bigger);
    expect(await countStoredBlocks(server.root)).toBe(before + 1);
  });
});

describe('CORS, health, stats, metrics, unknown routes', () => {
  it('answers preflight permissively while security is off', async () => {
    const res = await fetch(`${url}/api/v1/blobs/x`, { method: 'OPTIONS', headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'GET' } });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(res.headers.get('access-control-allow-methods')).toBe('DELETE, GET, HEAD');
    expect(res.headers.get('access-control-allow-headers')).toContain('if-none-match');
    const get = await fetch(`${url}/api/v1/blobs`);
    expect(get.headers.get('access-control-allow-origin')).toBe('*');
    expect(get.headers.get('access-control-expose-headers')).toContain('ETag');
  });

  it('the ops snapshot names the backend, its dependencies and the nodes sharing its catalog', async () => {
    let snapshot: any;
    // A shared catalog's node list comes from heartbeats; the first is written as the node starts listening.
    for (let i = 0; i < 50; i++) {
      snapshot = await (await fetch(`${url}/api/ops/v1/snapshot`)).json();
      if (TEST_BACKEND === 'fs' || snapshot.placement.nodes.some((n: any) => n.address)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(snapshot.storage.backend).toBe(TEST_BACKEND);
    expect(snapshot.dependencies.map((d: any) => d.kind).sort()).toEqual(BACKEND_DEPENDENCIES);
    for (const d of snapshot.dependencies) expect(d).toEqual({ kind: d.kind, status: 'ok', latencyMs: expect.any(Number) });
    expect(snapshot.placement.mode).toBe('single-node');
    if (TEST_BACKEND === 'fs') expect(snapshot.placement.nodes).toEqual([]);
    else expect(snapshot.placement.nodes).toEqual([{ nodeId: snapshot.placement.nodeId, address: `127.0.0.1:${server.port}`, lastSeenAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }]);
  });

  it('health live and ready', async () => {
    const live = await fetch(`${url}/api/health/live`);
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: 'ok', version: expect.any(String), uptimeSeconds: expect.any(Number) });
    const ready = await fetch(`${url}/api/health/ready`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as any;
    expect(body.status).toBe('ready');
    // pg-s3: this node's clock against PostgreSQL's (engine/base/clock.ts), within a second here.
    expect(body.checks.map((c: any) => c.name).sort()).toEqual([...BACKEND_DEPENDENCIES, 'diskSpace', ...(TEST_BACKEND === 'pg-s3' ? ['clock'] : [])].sort());
    if (TEST_BACKEND === 'pg-s3') expect(Math.abs(body.checks.find((c: any) => c.name === 'clock').offsetMs)).toBeLessThan(1000);
    for (const c of body.checks) expect(c).toMatchObject({ status: 'ok', latencyMs: expect.any(Number) });
  });

  it('stats count ingests and reads', async () => {
    const before = (await (await fetch(`${url}/api/stats`)).json()) as any;
    const body = seededBytes(1000, 30);
    await upload(url, body);
    await (await fetch(`${url}/api/v1/blobs/${contentId(body)}`)).arrayBuffer();
    const after = (await (await fetch(`${url}/api/stats`)).json()) as any;
    expect(Object.keys(after).sort()).toEqual(['bytesIngested', 'bytesServed', 'dedupRatio', 'duplicateBlocks', 'duplicateBytes', 'freshBlocks', 'freshBytes', 'ingests', 'reads', 'uptimeSeconds'].sort());
    expect(after.ingests).toBe(before.ingests + 1);
    expect(after.bytesIngested).toBe(before.bytesIngested + 1000);
    expect(after.reads).toBe(before.reads + 1);
    expect(after.bytesServed).toBe(before.bytesServed + 1000);
  });

  it('exports Prometheus text', async () => {
    const res = await fetch(`${url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toMatch(/^svc_ingests_total \d+$/m);
    expect(text).toMatch(/^svc_worker_threads \d+$/m);
    expect(text).toContain('svc_http_requests_total{route="POST /api/v1/blobs",status="201"}');
  });

  it('unknown routes are 404 and wrong methods 405, in the envelope', async () => {
    let res = await fetch(`${url}/nope`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as any).error).toBe('not_found');
    res = await fetch(`${url}/api/v1/blobs`, { method: 'PUT', body: 'x' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, POST, OPTIONS');
  });
});
