import { describe, expect, it } from 'vitest';
import { parseContentId, parseContentIdSegment } from '../dist/engine/base/content-id.js';
import { parseLimit } from '../dist/engine/cas/cursors.js';
import { CursorSeal } from '../dist/engine/auth/cursor-seal.js';
import { invalidPagination } from '../dist/engine/base/errors.js';
import { ConfigError, loadConfig, parseDuration, parseSize } from '../dist/engine/base/config.js';
import { evaluate, parseRange } from '../dist/server/conditional.js';

const HEX = 'a'.repeat(64);

describe('content ids', () => {
  it('parses the canonical form and percent-encoded segments', () => {
    expect(parseContentId(`sha-256:${HEX}:5`)).toEqual({ hex: HEX, size: 5 });
    expect(parseContentIdSegment(`sha-256%3A${HEX}%3A5`)).toEqual({ hex: HEX, size: 5 });
  });

  it.each([
    ['', 'empty'],
    [`sha-256:${HEX}:0`, 'zero length'],
    [`sha-256:${HEX}:05`, 'leading zero'],
    [`sha-256:${'A'.repeat(64)}:5`, 'uppercase hex'],
    [`sha-256:${HEX.slice(1)}:5`, 'short digest'],
    [`blake3:${HEX}:5`, 'other algorithm'],
    [`sha-256:${HEX}:-1`, 'negative'],
    [`sha-256:${HEX}:5:6`, 'extra part'],
    [`sha-256:${HEX}`, 'no length'],
  ])('rejects %s (%s) with invalid_blob_id', (id) => {
    expect(() => parseContentId(id)).toThrowError(expect.objectContaining({ kind: 'invalid', code: 'invalid_blob_id' }));
  });

  it('rejects malformed percent-encoding', () => {
    expect(() => parseContentIdSegment('sha-256%3')).toThrowError(expect.objectContaining({ code: 'invalid_blob_id', message: expect.stringContaining('encoding') }));
  });
});

describe('pagination', () => {
  it('limits 1..1000, default 100', () => {
    expect(parseLimit(undefined)).toBe(100);
    expect(parseLimit('1')).toBe(1);
    expect(parseLimit('1000')).toBe(1000);
    for (const bad of ['0', '1001', '-1', '1.5', 'ten', '', ' 5']) {
      expect(() => parseLimit(bad)).toThrowError(expect.objectContaining({ code: 'invalid_pagination' }));
    }
  });

  it('cursors are sealed: they open for their list, caller and query alone, and name nothing in clear', async () => {
    let kept: string | undefined;
    const seal = new CursorSeal({ location: 'memory', keep: async (candidate: string) => ({ secret: (kept ??= candidate), created: kept === candidate }) });
    await seal.load();
    const alice = { tenant: 'acme', subject: 'alice' };
    const inv = seal.of('blobs', alice);
    const token = inv.seal(['q'], '0190-secret-position');
    expect(inv.open(['q'], token)).toBe('0190-secret-position');
    expect(inv.open(['q'], undefined)).toBeUndefined();
    expect(Buffer.from(token, 'base64url').toString('latin1')).not.toContain('secret-position');
    // Each seal is new (random IV): equal positions give different cursors.
    expect(inv.seal(['q'], '0190-secret-position')).not.toBe(token);
    const refused = expect.objectContaining({ code: 'invalid_cursor' });
    expect(() => inv.open(['other'], token)).toThrowError(refused);
    expect(() => seal.of('blocks', alice).open(['q'], token)).toThrowError(refused);
    expect(() => seal.of('blobs', { tenant: 'acme', subject: 'bob' }).open(['q'], token)).toThrowError(refused);
    expect(() => seal.of('blobs', { tenant: 'globex', subject: 'alice' }).open(['q'], token)).toThrowError(refused);
    expect(() => seal.of('blobs', undefined).open(['q'], token)).toThrowError(refused);
    const bytes = Buffer.from(token, 'base64url');
    for (let i = 1; i < bytes.length; i++) {
      const flipped = Buffer.from(bytes);
      flipped[i] = flipped[i]! ^ 0x80;
      expect(() => inv.open(['q'], flipped.toString('base64url'))).toThrowError(refused);
    }
    for (const bad of ['', 'garbage', 'inv1.@@', `${token}A`, 'A'.repeat(16385), token.slice(0, -1)]) expect(() => inv.open(['q'], bad)).toThrowError(refused);
    // A list may answer a token not even shaped like a cursor with its own code (the blob contract's).
    const blobs = seal.of('blobs', alice, { malformed: invalidPagination });
    expect(() => blobs.open(['q'], 'garbage')).toThrowError(expect.objectContaining({ code: 'invalid_pagination' }));
    expect(() => blobs.open(['other'], token)).toThrowError(refused);
    // Another server's key: the same cursor does not open.
    const elsewhere = new CursorSeal({ location: 'memory', keep: async (candidate: string) => ({ secret: candidate, created: true }) });
    await elsewhere.load();
    expect(() => elsewhere.of('blobs', alice).open(['q'], token)).toThrowError(refused);
  });
});

describe('configuration', () => {
  it('parses sizes and durations with units', () => {
    expect(parseSize('X', '256KiB')).toBe(262144);
    expect(parseSize('X', '5GiB')).toBe(5 * 2 ** 30);
    expect(parseSize('X', '1048576')).toBe(1048576);
    expect(parseDuration('X', '500ms')).toBe(500);
    expect(parseDuration('X', '15m')).toBe(900_000);
    expect(parseDuration('X', '7d')).toBe(7 * 86_400_000);
    expect(() => parseDuration('X', '15')).toThrow(ConfigError);
  });

  it('names the variable of an invalid value', () => {
    expect(() => loadConfig({ SVC_DURABILITY: 'sometimes' })).toThrowError(/SVC_DURABILITY/);
    expect(() => loadConfig({ SVC_HTTP_PORT: '70000' })).toThrowError(/SVC_HTTP_PORT/);
    expect(() => loadConfig({ SVC_CHUNK_MIN: '8MiB' })).toThrowError(/SVC_CHUNK_MIN/);
    expect(loadConfig({}).httpPort).toBe(8081);
  });

  it('reads SVC_MODEL_ROOTS as directories and s3://, gs:// folders; named roots are the only places; the store\'s own bucket is never a bundle\'s', () => {
    const model = (env: Record<string, string>) => loadConfig({ SVC_FS_ROOT: '/data', ...env }).model;
    const mixed = model({ SVC_MODEL_ROOTS: '/srv/models, s3://ml-bundles/prod, gs://g_bucket, s3://other/a%20b/' });
    expect([mixed.roots, mixed.objectRoots]).toEqual([['/srv/models'], [{ scheme: 's3', bucket: 'ml-bundles', prefix: 'prod/' }, { scheme: 'gs', bucket: 'g_bucket', prefix: '' }, { scheme: 's3', bucket: 'other', prefix: 'a b/' }]]);
    expect([model({ SVC_MODEL_ROOTS: 's3://b-1' }).roots, model({ SVC_MODEL_ROOTS: '/srv' }).objectRoots]).toEqual([[], []]);
    expect([model({}).roots, model({}).objectRoots]).toEqual([null, null]);
    expect([model({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 'x'.repeat(32) }).roots, model({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 'x'.repeat(32) }).objectRoots]).toEqual([['/data/models'], []]);
    expect(model({ SVC_S3_BUCKET: 'store', SVC_S3_PREFIX: 'svc/' }).storeLocation).toEqual({ bucket: 'store', prefix: 'svc/' });
    expect(model({}).storeLocation).toBeNull();
    for (const [roots, reason] of [['s3://Not_A_Bucket/x', 'does not name a valid s3 bucket'], ['s3://bucket/a/../b', 'has a . or .. segment'], ['s3://bucket/%E0%A4%A', 'not valid percent-encoding'], ['https://host/x', 'is a directory, an s3:// or a gs:// prefix']] as const) {
      expect(() => model({ SVC_MODEL_ROOTS: roots })).toThrowError(new RegExp(`SVC_MODEL_ROOTS: entry 1 .*${reason.replace(/[.*/]/g, '\\$&')}`));
    }
  });
});

describe('preconditions and ranges (RFC 9110)', () => {
  const rep = { etag: '"x"', lastModified: Date.parse('Sat, 21 Nov 2026 10:00:00 GMT'), size: 1000 };
  const before = 'Sat, 21 Nov 2026 09:00:00 GMT';
  const after = 'Sat, 21 Nov 2026 11:00:00 GMT';

  it('orders If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since', () => {
    expect(evaluate(rep, { ifMatch: '"y"' }).status).toBe(412);
    expect(evaluate(rep, { ifMatch: 'W/"x"' }).status).toBe(412);
    expect(evaluate(rep, { ifMatch: '"y", "x"' }).status).toBe(200);
    expect(evaluate(rep, { ifMatch: '*', ifUnmodifiedSince: before }).status).toBe(200);
    expect(evaluate(rep, { ifUnmodifiedSince: before }).status).toBe(412);
    expect(evaluate(rep, { ifUnmodifiedSince: after }).status).toBe(200);
    expect(evaluate(rep, { ifNoneMatch: 'W/"x"' }).status).toBe(304);
    expect(evaluate(rep, { ifNoneMatch: '*' }).status).toBe(304);
    expect(evaluate(rep, { ifNoneMatch: '"y"', ifModifiedSince: after }).status).toBe(200);
    expect(evaluate(rep, { ifModifiedSince: after }).status).toBe(304);
    expect(evaluate(rep, { ifModifiedSince: before }).status).toBe(200);
    expect(evaluate(rep, { ifModifiedSince: 'yesterday' }).status).toBe(200);
    expect(evaluate(rep, { ifMatch: '"y"', ifNoneMatch: '"x"' }).status).toBe(412);
  });

  it('applies Range only when If-Range holds', () => {
    expect(evaluate(rep, { range: 'bytes=0-9', ifRange: '"x"' })).toEqual({ status: 206, start: 0, end: 9 });
    expect(evaluate(rep, { range: 'bytes=0-9', ifRange: '"y"' })).toEqual({ status: 200 });
    expect(evaluate(rep, { range: 'bytes=0-9', ifRange: 'W/"x"' })).toEqual({ status: 200 });
    expect(evaluate(rep, { range: 'bytes=0-9', ifRange: 'Sat, 21 Nov 2026 10:00:00 GMT' }).status).toBe(206);
    expect(evaluate(rep, { range: 'bytes=0-9', ifRange: before })).toEqual({ status: 200 });
  });

  it('parses the three range forms and refuses the rest', () => {
    expect(parseRange('bytes=10-19', 1000)).toEqual({ status: 206, start: 10, end: 19 });
    expect(parseRange('bytes=990-', 1000)).toEqual({ status: 206, start: 990, end: 999 });
    expect(parseRange('bytes=-10', 1000)).toEqual({ status: 206, start: 990, end: 999 });
    expect(parseRange('bytes=-5000', 1000)).toEqual({ status: 206, start: 0, end: 999 });
    expect(parseRange('bytes=900-5000', 1000)).toEqual({ status: 206, start: 900, end: 999 });
    for (const bad of ['bytes=1000-', 'bytes=-0', 'bytes=5-1', 'bytes=0-1,3-4', 'items=0-1', 'bytes=', 'bytes=-', 'bytes=a-b']) {
      expect(parseRange(bad, 1000)).toEqual({ status: 416 });
    }
  });
});

describe('upload backlog', async () => {
  const { Backlog } = await import('../dist/engine/cas/backlog.js');
  const { TransferMemory } = await import('../dist/engine/cas/transfer-memory.js');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');

  it('keeps arrival order across memory and the spill file, and removes the file when drained', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'backlog-'));
    let spilled = 0;
    const memory = new TransferMemory(1024, 4);
    const backlog = new Backlog(10, memory, dir, (n: number) => (spilled += n));
    const input = Buffer.from('abcdefghijklmnopqrstuvwxyz0123456789');
    for (let i = 0; i < input.length; i += 4) backlog.push(input.subarray(i, i + 4));
    expect(backlog.pending).toBe(input.length);
    expect(backlog.memoryBytes).toBeLessThanOrEqual(10);
    expect(spilled).toBe(input.length - backlog.memoryBytes);
    const out: Buffer[] = [];
    const into = Buffer.alloc(3);
    for (let n = backlog.take(into); n > 0; n = backlog.take(into)) out.push(Buffer.from(into.subarray(0, n)));
    expect(Buffer.concat(out).toString()).toBe(input.toString());
    expect(backlog.pending).toBe(0);
    expect(fs.readdirSync(dir)).toEqual([]);
    backlog.push(Buffer.from('again'));
    expect(backlog.memoryBytes).toBe(5);
    expect(memory.bufferedBytes).toBe(8);
    backlog.dispose();
    expect(memory.bufferedBytes).toBe(0);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('tail buffer pool', async () => {
  const { BufferPool } = await import('../dist/engine/uploads/buffer-pool.js');

  it('lends views of pooled buffers, reuses what comes back, and bounds what it keeps', () => {
    const pool = new BufferPool(1024, 2);
    const a = pool.take(100);
    const b = pool.take(1024);
    expect([a.length, b.length]).toEqual([100, 1024]);
    expect(a.buffer.byteLength).toBe(1024);
    // Both pooled buffers are lent: the next one is a buffer of its own, and so is an oversize one.
    const own = pool.take(10);
    expect(own.buffer.byteLength).not.toBe(1024);
    expect(pool.take(4096).length).toBe(4096);
    pool.give(own);
    pool.give(a);
    const c = pool.take(500);
    expect(c.buffer).toBe(a.buffer);
    // A second give of a buffer now lent again must not free it for someone else.
    pool.give(a);
    const d = pool.take(500);
    expect(d.buffer).not.toBe(c.buffer);
  });
});
