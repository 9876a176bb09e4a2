// tus 1.0.0 at /files/ with raw requests: every rule of core, creation, creation-with-upload,
// creation-defer-length, termination, expiration and checksum, the statuses and headers the
// protocol names, X-HTTP-Method-Override, and that a tus upload is a session of the contract
// (the same id under /api/v1/uploads) whose completion commits a blob.

import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkedFetch as fetch, contentId, seededBytes } from './helpers/http.js';
import { startServer, type TestServer } from './helpers/server.js';

const TUS = { 'Tus-Resumable': '1.0.0' };
const STREAM = { 'Content-Type': 'application/offset+octet-stream' };
const b64 = (s: string) => Buffer.from(s).toString('base64');
const digest = (algorithm: string, body: Uint8Array) => createHash(algorithm).update(body).digest('base64');

let server: TestServer;

beforeAll(async () => {
  server = await startServer({ SVC_MAX_UPLOAD_BYTES: '64MiB' });
});

afterAll(async () => {
  await server?.stop();
});

async function create(headers: Record<string, string>, body?: Uint8Array) {
  const res = await fetch(`${server.url}/files/`, { method: 'POST', headers: { ...TUS, ...headers }, body: body as Uint8Array<ArrayBuffer> | undefined });
  const location = res.headers.get('location');
  return { res, location, url: location ? `${server.url}${location}` : '', json: res.status === 201 ? undefined : ((await res.json()) as any) };
}

async function patch(url: string, offset: number, body: Uint8Array, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'PATCH', headers: { ...TUS, ...STREAM, 'Upload-Offset': String(offset), ...headers }, body: body as Uint8Array<ArrayBuffer> });
  const text = await res.text();
  return { res, json: text ? JSON.parse(text) : undefined };
}

const head = (url: string, headers: Record<string, string> = TUS) => fetch(url, { method: 'HEAD', headers });

describe('tus 1.0.0 at /files/', () => {
  test('OPTIONS says the version, the extensions, the largest upload and the checksums', async () => {
    const res = await fetch(`${server.url}/files/`, { method: 'OPTIONS' });
    expect(res.status).toBe(204);
    expect(Object.fromEntries(['tus-resumable', 'tus-version', 'tus-extension', 'tus-max-size', 'tus-checksum-algorithm'].map((h) => [h, res.headers.get(h)]))).toEqual({
      'tus-resumable': '1.0.0',
      'tus-version': '1.0.0',
      'tus-extension': 'creation,creation-with-upload,creation-defer-length,termination,expiration,checksum,concatenation',
      'tus-max-size': String(64 * 1024 * 1024),
      'tus-checksum-algorithm': 'sha1,sha256',
    });
    expect(await res.text()).toBe('');
  });

  test('a request without Tus-Resumable: 1.0.0 is 412 with Tus-Version', async () => {
    for (const headers of [{}, { 'Tus-Resumable': '0.2.2' }] as Array<Record<string, string>>) {
      const res = await fetch(`${server.url}/files/`, { method: 'POST', headers: { ...headers, 'Upload-Length': '5' } });
      expect(res.status).toBe(412);
      expect(res.headers.get('tus-version')).toBe('1.0.0');
      expect(res.headers.get('tus-resumable')).toBe('1.0.0');
      expect(((await res.json()) as any).error).toBe('tus_version_unsupported');
    }
  });

  test('creation, HEAD, two PATCHes: the last commits the blob and names it; the same session under /api/v1/uploads', async () => {
    const created = await create({ 'Upload-Length': '11', 'Upload-Metadata': `filename ${b64('hello.txt')},filetype ${b64('text/plain')}` });
    expect(created.res.status).toBe(201);
    expect(created.location).toMatch(/^\/files\/[0-9a-f-]{36}$/);
    expect(new Date(created.res.headers.get('upload-expires')!).getTime()).toBeGreaterThan(Date.now());
    expect(created.res.headers.get('tus-resumable')).toBe('1.0.0');
    const before = await head(created.url);
    expect(before.status).toBe(200);
    expect([before.headers.get('upload-offset'), before.headers.get('upload-length'), before.headers.get('upload-metadata'), before.headers.get('cache-control')]).toEqual([
      '0', '11', `filename ${b64('hello.txt')},filetype ${b64('text/plain')}`, 'no-store',
    ]);
    expect(await before.text()).toBe('');
    const id = created.location!.slice('/files/'.length);
    const session = (await (await fetch(`${server.url}/api/v1/uploads/${id}`)).json()) as any;
    expect([session.state, session.offset, session.declaredLength, session.contentType]).toEqual(['Open', 0, 11, 'text/plain']);

    const first = await patch(created.url, 0, Buffer.from('hello '));
    expect(first.res.status).toBe(204);
    expect(first.res.headers.get('upload-offset')).toBe('6');
    expect(first.res.headers.get('upload-expires')).not.toBeNull();
    expect(first.res.headers.get('x-svc-blob-id')).toBeNull();
    const last = await patch(created.url, 6, Buffer.from('world'));
    expect(last.res.status).toBe(204);
    const blob = contentId(Buffer.from('hello world'));
    expect([last.res.headers.get('upload-offset'), last.res.headers.get('x-svc-blob-id'), last.res.headers.get('x-svc-blob-location')]).toEqual(['11', blob, `/api/v1/blobs/${blob}`]);
    expect(await (await fetch(`${server.url}/api/v1/blobs/${blob}`)).text()).toBe('hello world');
    const after = await head(created.url);
    expect([after.status, after.headers.get('upload-offset'), after.headers.get('x-svc-blob-id'), after.headers.get('upload-expires')]).toEqual([200, '11', blob, null]);
    const committed = (await (await fetch(`${server.url}/api/v1/uploads/${id}`)).json()) as any;
    expect([committed.state, committed.committedBlob]).toEqual(['Committed', blob]);
  });

  test('PATCH refusals: wrong media type 415, no or wrong Upload-Offset 400/409, past the length 413; nothing is kept', async () => {
    const { url } = await create({ 'Upload-Length': '10' });
    const wrongType = await fetch(url, { method: 'PATCH', headers: { ...TUS, 'Content-Type': 'application/octet-stream', 'Upload-Offset': '0' }, body: 'abc' });
    expect(wrongType.status).toBe(415);
    expect(((await wrongType.json()) as any).error).toBe('unsupported_media_type');
    const noOffset = await fetch(url, { method: 'PATCH', headers: { ...TUS, ...STREAM }, body: 'abc' });
    expect([noOffset.status, ((await noOffset.json()) as any).error]).toEqual([400, 'invalid_upload']);
    expect((await patch(url, 0, Buffer.from('abcd'))).res.status).toBe(204);
    const stale = await patch(url, 0, Buffer.from('abcd'));
    expect([stale.res.status, stale.json.error, stale.res.headers.get('upload-offset')]).toEqual([409, 'upload_offset_mismatch', '4']);
    const past = await patch(url, 4, Buffer.from('0123456789'));
    expect([past.res.status, past.json.error]).toEqual([413, 'upload_length_exceeded']);
    expect((await head(url)).headers.get('upload-offset')).toBe('4');
    const negative = await patch(url, -1, Buffer.from('x'));
    expect(negative.res.status).toBe(400);
  });

  test('creation-with-upload: the body is the first bytes; every byte at once commits at creation', async () => {
    const whole = seededBytes(300_000, 7);
    const all = await create({ ...STREAM, 'Upload-Length': String(whole.length) }, whole);
    expect(all.res.status).toBe(201);
    expect([all.res.headers.get('upload-offset'), all.res.headers.get('x-svc-blob-id')]).toEqual([String(whole.length), contentId(whole)]);
    const some = await create({ ...STREAM, 'Upload-Length': '10' }, Buffer.from('0123'));
    expect([some.res.status, some.res.headers.get('upload-offset'), some.res.headers.get('x-svc-blob-id')]).toEqual([201, '4', null]);
    const wrongType = await create({ 'Content-Type': 'text/plain', 'Upload-Length': '10' }, Buffer.from('0123'));
    expect([wrongType.res.status, wrongType.json.error]).toEqual([415, 'unsupported_media_type']);
  });

  test('creation-defer-length: the length comes with a PATCH, once', async () => {
    const { res, url } = await create({ 'Upload-Defer-Length': '1' });
    expect(res.status).toBe(201);
    const deferred = await head(url);
    expect([deferred.headers.get('upload-defer-length'), deferred.headers.get('upload-length')]).toEqual(['1', null]);
    expect((await patch(url, 0, Buffer.from('abcd'))).res.status).toBe(204);
    const declared = await patch(url, 4, Buffer.from('ef'), { 'Upload-Length': '8' });
    expect([declared.res.status, declared.res.headers.get('upload-length'), declared.res.headers.get('upload-defer-length')]).toEqual([204, '8', null]);
    const again = await patch(url, 6, Buffer.from('gh'), { 'Upload-Length': '9' });
    expect([again.res.status, again.json.error]).toEqual([400, 'invalid_upload']);
    const done = await patch(url, 6, Buffer.from('gh'));
    expect(done.res.headers.get('x-svc-blob-id')).toBe(contentId(Buffer.from('abcdefgh')));
    for (const headers of [{ 'Upload-Defer-Length': '2' }, { 'Upload-Defer-Length': '1', 'Upload-Length': '5' }, {}] as Array<Record<string, string>>) {
      const bad = await create(headers);
      expect([bad.res.status, bad.json.error]).toEqual([400, 'invalid_upload']);
    }
  });

  test('lengths: zero, negative, not a number and beyond Tus-Max-Size are refused', async () => {
    for (const [length, status] of [['0', 400], ['-1', 400], ['1e3', 400], ['99999999999999999999', 400], [String(64 * 1024 * 1024 + 1), 413]] as const) {
      const bad = await create({ 'Upload-Length': length });
      expect([length, bad.res.status]).toEqual([length, status]);
    }
  });

  test('malformed Upload-Metadata is 400', async () => {
    for (const metadata of ['filename !!!', `filename ${b64('a')},filename ${b64('b')}`, 'a b c', `,${b64('x')}`, `filetype ${b64('not a type')}`]) {
      const bad = await create({ 'Upload-Length': '4', 'Upload-Metadata': metadata });
      expect([metadata, bad.res.status, bad.json.error]).toEqual([metadata, 400, 'invalid_upload']);
    }
    const keyOnly = await create({ 'Upload-Length': '4', 'Upload-Metadata': `is_confidential,filename ${b64('x.bin')}` });
    expect(keyOnly.res.status).toBe(201);
  });

  test('checksum: sha1 and sha256 accepted; a mismatch is 460 and nothing of the body is kept; unknown algorithms 400', async () => {
    const body = seededBytes(200_000, 3);
    const { url } = await create({ 'Upload-Length': String(body.length * 2) });
    const wrong = await patch(url, 0, body, { 'Upload-Checksum': `sha1 ${digest('sha1', Buffer.from('other'))}` });
    expect([wrong.res.status, wrong.json.error, wrong.res.headers.get('tus-resumable')]).toEqual([460, 'checksum_mismatch', '1.0.0']);
    expect((await head(url)).headers.get('upload-offset')).toBe('0');
    expect((await patch(url, 0, body, { 'Upload-Checksum': `sha1 ${digest('sha1', body)}` })).res.status).toBe(204);
    const md5 = await patch(url, body.length, body, { 'Upload-Checksum': `md5 ${digest('md5', body)}` });
    expect([md5.res.status, md5.json.error]).toEqual([400, 'invalid_upload']);
    const done = await patch(url, body.length, body, { 'Upload-Checksum': `sha256 ${digest('sha256', body)}` });
    expect(done.res.headers.get('x-svc-blob-id')).toBe(contentId(Buffer.concat([body, body])));
  });

  test('termination: 204, then 410 for the upload and 404 for one that never was', async () => {
    const { url } = await create({ 'Upload-Length': '10' });
    expect((await patch(url, 0, Buffer.from('abc'))).res.status).toBe(204);
    const gone = await fetch(url, { method: 'DELETE', headers: TUS });
    expect([gone.status, gone.headers.get('tus-resumable')]).toEqual([204, '1.0.0']);
    expect((await head(url)).status).toBe(410);
    const late = await patch(url, 3, Buffer.from('d'));
    expect([late.res.status, late.json.error]).toEqual([410, 'upload_terminated']);
    expect((await head(`${server.url}/files/00000000-0000-4000-8000-000000000000`)).status).toBe(404);
    expect((await head(`${server.url}/files/not-an-id`)).status).toBe(404);
  });

  test('X-HTTP-Method-Override: PATCH, HEAD and DELETE through POST', async () => {
    const { url } = await create({ 'Upload-Length': '6' });
    const viaPost = await fetch(url, { method: 'POST', headers: { ...TUS, ...STREAM, 'X-HTTP-Method-Override': 'PATCH', 'Upload-Offset': '0' }, body: 'abc' });
    expect([viaPost.status, viaPost.headers.get('upload-offset')]).toEqual([204, '3']);
    const status = await fetch(url, { method: 'POST', headers: { ...TUS, 'X-HTTP-Method-Override': 'HEAD' } });
    expect([status.status, status.headers.get('upload-offset')]).toEqual([200, '3']);
    const gone = await fetch(url, { method: 'POST', headers: { ...TUS, 'X-HTTP-Method-Override': 'DELETE' } });
    expect(gone.status).toBe(204);
    const other = await fetch(url, { method: 'POST', headers: { ...TUS, 'X-HTTP-Method-Override': 'PUT' } });
    expect(other.status).toBe(405);
  });

  test('concatenation: partial uploads, then a final one assembled from their blocks without storing a byte again', async () => {
    const parts = [seededBytes(3 * 1024 * 1024 + 17, 21), seededBytes(2 * 1024 * 1024, 22), seededBytes(5000, 23)];
    const urls: string[] = [];
    for (const part of parts) {
      const created = await create({ ...STREAM, 'Upload-Concat': 'partial', 'Upload-Length': String(part.length) }, part);
      expect([created.res.status, created.res.headers.get('upload-concat')]).toEqual([201, 'partial']);
      urls.push(created.location!);
    }
    const storage = async () => ((await (await fetch(`${server.url}/api/ops/v1/snapshot`)).json()) as any).storage;
    const before = await storage();
    const whole = Buffer.concat(parts);
    // One named by its absolute URL, the others by their paths.
    const final = await create({ 'Upload-Concat': `final;${server.url}${urls[0]} ${urls[1]} ${urls[2]}` });
    expect(final.res.status).toBe(201);
    expect([final.res.headers.get('upload-offset'), final.res.headers.get('upload-length'), final.res.headers.get('x-svc-blob-id')]).toEqual([String(whole.length), String(whole.length), contentId(whole)]);
    const headFinal = await head(final.url);
    expect(headFinal.headers.get('upload-concat')).toBe(`final;${urls.join(' ')}`);
    const blob = Buffer.from(await (await fetch(`${server.url}/api/v1/blobs/${contentId(whole)}`)).arrayBuffer());
    expect(blob.equals(whole)).toBe(true);
    const after = await storage();
    expect([after.blocks, after.usedBytes]).toEqual([before.blocks, before.usedBytes]);
    const refused = await patch(final.url, whole.length, Buffer.from('x'));
    expect([refused.res.status, refused.json.error]).toEqual([403, 'upload_final']);
  });

  test('concatenation refusals: an unfinished partial, a plain upload, an unknown one, another tenant\'s, a length beside final', async () => {
    const unfinished = await create({ ...STREAM, 'Upload-Concat': 'partial', 'Upload-Length': '10' }, Buffer.from('abc'));
    const plain = await create({ ...STREAM, 'Upload-Length': '3' }, Buffer.from('abc'));
    const otherTenant = await create({ ...STREAM, 'Upload-Concat': 'partial', 'Upload-Length': '3', 'X-Svc-Tenant-Id': '7d0b8a3e-2f0c-4e55-9b8e-1a2b3c4d5e6f' }, Buffer.from('abc'));
    for (const [list, status, code] of [
      [unfinished.location!, 400, 'invalid_upload'],
      [plain.location!, 400, 'invalid_upload'],
      ['/files/00000000-0000-4000-8000-000000000000', 404, 'upload_not_found'],
      [otherTenant.location!, 404, 'upload_not_found'],
      ['/elsewhere/x', 400, 'invalid_upload'],
      ['', 400, 'invalid_upload'],
    ] as const) {
      const bad = await create({ 'Upload-Concat': `final;${list}` });
      expect([list, bad.res.status, bad.json.error]).toEqual([list, status, code]);
    }
    const withLength = await create({ 'Upload-Concat': `final;${unfinished.location}`, 'Upload-Length': '3' });
    expect([withLength.res.status, withLength.json.error]).toEqual([400, 'invalid_upload']);
  });

  test('CORS: every tus header is exposed to a browser', async () => {
    const { res } = await create({ 'Upload-Length': '3', Origin: 'http://app.example' });
    const exposed = res.headers.get('access-control-expose-headers')!.split(', ');
    for (const name of ['Location', 'Upload-Offset', 'Upload-Length', 'Tus-Resumable', 'Upload-Metadata', 'Upload-Defer-Length', 'Upload-Expires', 'X-Svc-Blob-Id', 'X-Svc-Blob-Location']) expect(exposed).toContain(name);
    const preflight = await fetch(`${server.url}/files/`, { method: 'OPTIONS', headers: { Origin: 'http://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'tus-resumable, upload-length, upload-metadata' } });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-headers')).toContain('upload-metadata');
  });
});

describe('tus expiration', () => {
  test('an upload past SVC_UPLOAD_TTL is 410 and says no more Upload-Expires', async () => {
    const short = await startServer({ SVC_UPLOAD_TTL: '1s' });
    try {
      const res = await fetch(`${short.url}/files/`, { method: 'POST', headers: { ...TUS, 'Upload-Length': '4' } });
      const expires = new Date(res.headers.get('upload-expires')!).getTime();
      expect(expires - Date.now()).toBeLessThanOrEqual(1000);
      const url = `${short.url}${res.headers.get('location')}`;
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const late = await fetch(url, { method: 'PATCH', headers: { ...TUS, ...STREAM, 'Upload-Offset': '0' }, body: 'abcd' });
      expect([late.status, ((await late.json()) as any).error]).toEqual([410, 'upload_expired']);
      expect((await fetch(url, { method: 'HEAD', headers: TUS })).status).toBe(410);
    } finally {
      await short.stop();
    }
  });
});

describe('tus with security on', () => {
  test('a token with blob.write of its tenant; none is 401, a read-only one 403, another tenant sees 404', async () => {
    const secure = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url') });
    try {
      const token = async (org: string, scope: string) => {
        const res = await fetch(`${secure.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: org, scope }) });
        return { Authorization: `Bearer ${((await res.json()) as { access_token: string }).access_token}` };
      };
      const none = await fetch(`${secure.url}/files/`, { method: 'POST', headers: { ...TUS, 'Upload-Length': '3' } });
      expect([none.status, none.headers.get('tus-resumable'), none.headers.get('www-authenticate')]).toEqual([401, '1.0.0', 'Bearer']);
      const reader = await fetch(`${secure.url}/files/`, { method: 'POST', headers: { ...TUS, ...(await token('a', 'blob.read')), 'Upload-Length': '3' } });
      expect(reader.status).toBe(403);
      const writer = await token('a', 'blob.read blob.write');
      const created = await fetch(`${secure.url}/files/`, { method: 'POST', headers: { ...TUS, ...writer, ...STREAM, 'Upload-Length': '3' }, body: 'abc' });
      expect([created.status, created.headers.get('x-svc-blob-id')]).toEqual([201, contentId(Buffer.from('abc'))]);
      const url = `${secure.url}${created.headers.get('location')}`;
      expect((await fetch(url, { method: 'HEAD', headers: { ...TUS, ...writer } })).status).toBe(200);
      expect((await fetch(url, { method: 'HEAD', headers: { ...TUS, ...(await token('b', 'blob.read blob.write')) } })).status).toBe(404);
    } finally {
      await secure.stop();
    }
  });
});
