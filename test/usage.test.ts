// GET /api/v1/usage and the numbers of a tenant's limit refusals over real HTTP: two tenants'
// usage kept apart through uploads, repeats and deletes, with and without limits; 507 and 413
// envelopes that carry the quota, the retained bytes and the object limit; a declared
// Content-Length or Upload-Length that cannot fit under the quota answered before the body is
// sent (the blob API, sessions, tus, a document's bytes); with security off, the default tenant.
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkedFetch } from './helpers/http.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
let open: TestServer;

const POLICY = {
  default: { requestsPerMinute: 1000 },
  tenants: {
    'u-limited': { maxObjectBytes: 100_000, quotaBytes: 250_000, maxConcurrent: 4, bytesPerMinute: 1_000_000 },
    'u-quota': { maxObjectBytes: 100_000, quotaBytes: 150_000 },
    'u-early': { quotaBytes: 1_000_000 },
  },
};
const DEFAULT_TENANT = '00000000-0000-4000-8000-000000000000';
const SCOPE = 'blob.read blob.write blob.delete doc.create doc.read doc.write';

interface Usage {
  tenant: string;
  retainedBytes: number;
  objects: number;
  quotaBytes: number | null;
  maxObjectBytes: number | null;
  concurrency: { inUse: number | null; queued: number | null; limit: number | null };
  budgets: Record<'requests' | 'bytes', { remaining: number | null; limit: number | null; resetsAt: string | null }>;
}

async function token(org: string, sub = 'alice'): Promise<string> {
  const res = await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: org, sub, scope: SCOPE }) });
  return ((await res.json()) as { access_token: string }).access_token;
}

const bearer = (t: string) => ({ Authorization: `Bearer ${t}` });

async function usage(t?: string, url = server.url): Promise<Usage> {
  const res = await checkedFetch(`${url}/api/v1/usage`, { headers: t ? bearer(t) : {} });
  expect(res.status).toBe(200);
  expect(res.headers.get('cache-control')).toBe('no-store');
  return (await res.json()) as Usage;
}

async function upload(t: string, body: Buffer): Promise<{ status: number; json: any }> {
  const res = await checkedFetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), body: new Uint8Array(body) });
  return { status: res.status, json: await res.json() };
}

/**
 * Sends the head and `first` bytes of a body declared `Content-Length: declared`, and waits for an
 * answer without sending the rest: resolves with it (the body never finished), or rejects after 5 s.
 */
function answeredBeforeBody(url: string, method: string, headers: Record<string, string>, declared: number, first = 1000): Promise<{ status: number; json: any; sent: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { ...headers, 'Content-Length': String(declared) } });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer to ${method} ${url} within 5 s of ${first} of ${declared} bytes`));
    }, 5000);
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        clearTimeout(timer);
        req.destroy();
        resolve({ status: res.statusCode!, json: JSON.parse(text), sent: first });
      });
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.flushHeaders();
    req.write(randomBytes(first));
  });
}

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-usage-'));
  const policyFile = path.join(dir, 'policy.json');
  fs.writeFileSync(policyFile, JSON.stringify(POLICY));
  [server, open] = await Promise.all([
    startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_TENANT_POLICY_FILE: policyFile }),
    startServer(),
  ]);
});

afterAll(async () => {
  await Promise.all([server?.stop(), open?.stop()]);
});

describe('GET /api/v1/usage', () => {
  it('needs a token with security on; any valid token will do, and it names the token\'s own tenant', async () => {
    const anonymous = await checkedFetch(`${server.url}/api/v1/usage`);
    expect(anonymous.status).toBe(401);
    const minted = await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: 'u-bare', scope: 'model.read' }) });
    const bare = ((await minted.json()) as { access_token: string }).access_token;
    expect((await usage(bare)).tenant).toBe('u-bare');
  });

  it('two tenants\' usage, apart, through uploads, a repeat and deletes; limits as the policy says', async () => {
    const limited = await token('u-limited');
    const free = await token('u-free');
    const started = Date.now();
    const before = await usage(limited);
    expect(before).toMatchObject({ tenant: 'u-limited', retainedBytes: 0, objects: 0, quotaBytes: 250_000, maxObjectBytes: 100_000, concurrency: { inUse: 0, queued: 0, limit: 4 } });
    expect(before.budgets.requests.limit).toBe(1000);
    expect(before.budgets.bytes).toMatchObject({ limit: 1_000_000, remaining: 1_000_000 });
    const [a, b] = [randomBytes(60_000), randomBytes(40_000)];
    const ids: string[] = [];
    for (const body of [a, b]) {
      const r = await upload(limited, body);
      expect(r.status).toBe(201);
      ids.push(r.json.blob.id);
    }
    // Another tenant holds the same bytes: nothing of it shows in the first tenant's usage.
    expect((await upload(free, a)).status).toBe(201);
    const after = await usage(limited);
    expect(after).toMatchObject({ retainedBytes: 100_000, objects: 2 });
    // The bytes uploaded were charged to the caller's budget (it refills at 16667 bytes a second), the requests too.
    expect(after.budgets.bytes.remaining).toBeLessThan(1_000_000 - 50_000);
    expect(after.budgets.bytes.remaining).toBeGreaterThanOrEqual(1_000_000 - 100_000);
    expect(Date.parse(after.budgets.bytes.resetsAt!)).toBeGreaterThan(Date.now());
    // Four requests charged (two usage reads, two uploads), less what refilled since (1000 a minute: one per 60 ms).
    expect(after.budgets.requests.remaining).toBeLessThanOrEqual(Math.min(1000, 1000 - 4 + Math.ceil((Date.now() - started) / 60)));
    expect(await usage(free)).toMatchObject({ tenant: 'u-free', retainedBytes: 60_000, objects: 1 });
    // A repeat is free; a delete frees at once.
    expect((await upload(limited, a)).status).toBe(201);
    expect(await usage(limited)).toMatchObject({ retainedBytes: 100_000, objects: 2 });
    expect((await checkedFetch(`${server.url}/api/v1/blobs/${ids[0]}`, { method: 'DELETE', headers: bearer(limited) })).status).toBe(204);
    expect(await usage(limited)).toMatchObject({ retainedBytes: 40_000, objects: 1 });
    expect(await usage(free)).toMatchObject({ retainedBytes: 60_000, objects: 1 });
  });

  it('document content of a tenant without a quota is counted once however often and however concurrently it is sent, in one document or several', async () => {
    const t = await token('u-documents');
    const docUpload = async () => {
      const made = await checkedFetch(`${server.url}/v1/documents`, { method: 'POST', headers: { ...bearer(t), 'Content-Type': 'application/json' }, body: '{}' });
      expect(made.status).toBe(201);
      return ((await made.json()) as { uploadId: string }).uploadId;
    };
    const send = async (uploadId: string, body: Buffer) => {
      const r = await checkedFetch(`${server.url}/v1/uploads/${uploadId}/bytes`, { method: 'PUT', headers: { ...bearer(t), 'Content-Type': 'application/octet-stream' }, body: new Uint8Array(body) });
      expect(r.status).toBe(204);
    };
    const [a, b] = [randomBytes(30_000), randomBytes(20_000)];
    const uploads = await Promise.all(Array.from({ length: 4 }, docUpload));
    // The same content sent at once to four uploads (two of them twice), then another content.
    await Promise.all([...uploads, uploads[0]!, uploads[1]!].map((id) => send(id, a)));
    expect(await usage(t)).toMatchObject({ tenant: 'u-documents', quotaBytes: null, retainedBytes: 30_000 });
    await Promise.all([send(uploads[2]!, b), send(uploads[3]!, b), send(uploads[0]!, a)]);
    expect(await usage(t)).toMatchObject({ retainedBytes: 50_000 });
  });

  it('without limits every limit is null: no quota, no object limit, no concurrency limit, no byte budget', async () => {
    const free = await usage(await token('u-none'));
    expect(free).toEqual({
      tenant: 'u-none', retainedBytes: 0, stagedBytes: 0, objects: 0, quotaBytes: null, maxObjectBytes: null,
      concurrency: { inUse: null, queued: null, limit: null },
      budgets: { requests: { remaining: expect.any(Number), limit: 1000, resetsAt: expect.any(String) }, bytes: { remaining: null, limit: null, resetsAt: null } },
    });
  });

  it('an operation in flight counts in concurrency.inUse', async () => {
    const limited = await token('u-limited', 'bob');
    const req = http.request(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { ...bearer(limited), 'Content-Length': '20000' } });
    const done = new Promise<number>((resolve, reject) => {
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
    });
    req.write(randomBytes(1000));
    let seen = 0;
    for (const until = Date.now() + 5000; Date.now() < until && seen === 0; await new Promise((r) => setTimeout(r, 20))) seen = (await usage(limited)).concurrency.inUse ?? 0;
    expect(seen).toBe(1);
    req.end(randomBytes(19_000));
    expect(await done).toBe(201);
    expect((await usage(limited)).concurrency.inUse).toBe(0);
  });

  it('with security off: the default tenant, no token, no limits', async () => {
    const before = await usage(undefined, open.url);
    expect(before).toMatchObject({ tenant: DEFAULT_TENANT, quotaBytes: null, maxObjectBytes: null, concurrency: { inUse: null, queued: null, limit: null } });
    expect(before.budgets).toEqual({ requests: { remaining: null, limit: null, resetsAt: null }, bytes: { remaining: null, limit: null, resetsAt: null } });
    const res = await checkedFetch(`${open.url}/api/v1/blobs`, { method: 'POST', body: new Uint8Array(randomBytes(5000)) });
    expect(res.status).toBe(201);
    expect(await usage(undefined, open.url)).toMatchObject({ retainedBytes: before.retainedBytes + 5000, objects: before.objects + 1 });
  });
});

describe('the numbers of a limit refusal', () => {
  it('507 tenant_storage_quota_exceeded says the quota and the retained bytes; 413 tenant_object_limit_exceeded the object limit', async () => {
    const t = await token('u-quota');
    expect((await upload(t, randomBytes(90_000))).status).toBe(201);
    // Chunked (no declared length): refused at the publication.
    const chunked = await checkedFetch(`${server.url}/api/v1/blobs`, {
      method: 'POST', headers: bearer(t), duplex: 'half',
      body: new ReadableStream({ start: (c) => { c.enqueue(new Uint8Array(randomBytes(70_000))); c.close(); } }),
    } as RequestInit);
    expect(chunked.status).toBe(507);
    expect(await chunked.json()).toEqual({
      error: 'tenant_storage_quota_exceeded',
      message: 'Publishing this blob would take the tenant past its retained-byte quota: 70000 more bytes on 90000 retained of a quota of 150000 bytes (60000 left)',
      quotaBytes: 150_000,
      retainedBytes: 90_000,
    });
    // Declared: refused before the body.
    const declared = await upload(t, randomBytes(70_000));
    expect(declared).toEqual({ status: 507, json: {
      error: 'tenant_storage_quota_exceeded',
      message: 'The declared length would take the tenant past its retained-byte quota: 70000 more bytes on 90000 retained of a quota of 150000 bytes (60000 left)',
      quotaBytes: 150_000,
      retainedBytes: 90_000,
    } });
    const tooLarge = await upload(t, randomBytes(100_001));
    expect(tooLarge).toEqual({ status: 413, json: { error: 'tenant_object_limit_exceeded', message: "The object exceeds the tenant's limit of 100000 bytes (maxObjectBytes 100000)", maxObjectBytes: 100_000 } });
    // Resumable sessions: a part whose end cannot fit is refused at once. Without a declared
    // length a session holds what it received: a second session's part finds the room the first
    // holds taken (stagedBytes), and once the first is committed, its blob.
    const session = async () => {
      const id = randomUUID();
      expect((await checkedFetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { ...bearer(t), 'X-Svc-Upload-Session-Id': id } })).status).toBe(201);
      return id;
    };
    const sendPart = (id: string, size: number) => checkedFetch(`${server.url}/api/v1/uploads/${id}`, { method: 'PATCH', headers: { ...bearer(t), 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() }, body: new Uint8Array(randomBytes(size)) });
    const refused = await sendPart(await session(), 60_001);
    expect(refused.status).toBe(507);
    expect(await refused.json()).toMatchObject({ error: 'tenant_storage_quota_exceeded', quotaBytes: 150_000, retainedBytes: 90_000 });
    const [first, second] = [await session(), await session()];
    expect((await sendPart(first, 40_000)).status).toBe(204);
    const held = await sendPart(second, 40_000);
    expect(held.status).toBe(507);
    expect(await held.json()).toEqual({
      error: 'tenant_storage_quota_exceeded',
      message: 'The declared length would take the tenant past its retained-byte quota: 40000 more bytes on 90000 retained and 40000 reserved by open uploads of a quota of 150000 bytes (20000 left)',
      quotaBytes: 150_000,
      retainedBytes: 90_000,
      stagedBytes: 40_000,
    });
    expect((await checkedFetch(`${server.url}/api/v1/uploads/${first}/commit`, { method: 'POST', headers: bearer(t) })).status).toBe(200);
    const after = await sendPart(second, 40_000);
    expect(after.status).toBe(507);
    expect(await after.json()).toMatchObject({ error: 'tenant_storage_quota_exceeded', quotaBytes: 150_000, retainedBytes: 130_000 });
    // Nothing of the refused ones was kept.
    expect(await usage(t)).toMatchObject({ retainedBytes: 130_000, stagedBytes: 0, objects: 2 });
  });

  it('a declared length that cannot fit under the quota is answered before the body is sent: blob API, sessions and their parts, tus creations, PATCHes and deferred lengths, a document\'s bytes', async () => {
    const t = await token('u-early');
    expect((await upload(t, randomBytes(100_000))).status).toBe(201);
    const numbers = { quotaBytes: 1_000_000, retainedBytes: 100_000 };
    const message = (size: number) => `The declared length would take the tenant past its retained-byte quota: ${size} more bytes on 100000 retained of a quota of 1000000 bytes (900000 left)`;
    // A body of 5 MB of which 1000 bytes are sent: the answer comes anyway.
    const blob = await answeredBeforeBody(`${server.url}/api/v1/blobs`, 'POST', bearer(t), 5_000_000);
    expect(blob).toEqual({ status: 507, json: { error: 'tenant_storage_quota_exceeded', message: message(5_000_000), ...numbers }, sent: 1000 });
    // A session's Upload-Length.
    const session = await checkedFetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { ...bearer(t), 'X-Svc-Upload-Session-Id': randomUUID(), 'Upload-Length': '900001' } });
    expect(session.status).toBe(507);
    expect(await session.json()).toEqual({ error: 'tenant_storage_quota_exceeded', message: message(900_001), ...numbers });
    // tus: a creation with upload, its body barely begun.
    const tus = await answeredBeforeBody(`${server.url}/files/`, 'POST', { ...bearer(t), 'Tus-Resumable': '1.0.0', 'Upload-Length': '2000000', 'Content-Type': 'application/offset+octet-stream' }, 2_000_000);
    expect(tus).toEqual({ status: 507, json: { error: 'tenant_storage_quota_exceeded', message: message(2_000_000), ...numbers }, sent: 1000 });
    // A document's bytes (PUT /v1/uploads/{id}/bytes).
    const doc = await fetch(`${server.url}/v1/documents`, { method: 'POST', headers: { ...bearer(t), 'Content-Type': 'application/json' }, body: '{}' });
    expect(doc.status).toBe(201);
    const { uploadId } = (await doc.json()) as { uploadId: string };
    const bytes = await answeredBeforeBody(`${server.url}/v1/uploads/${uploadId}/bytes`, 'PUT', bearer(t), 3_000_000);
    expect(bytes).toEqual({ status: 507, json: { error: 'tenant_storage_quota_exceeded', message: message(3_000_000), ...numbers }, sent: 1000 });
    // A session without Upload-Length: its part's end (offset + Content-Length) is what cannot fit.
    const open = randomUUID();
    expect((await checkedFetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { ...bearer(t), 'X-Svc-Upload-Session-Id': open } })).status).toBe(201);
    const part = await answeredBeforeBody(`${server.url}/api/v1/uploads/${open}`, 'PATCH', { ...bearer(t), 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() }, 1_500_000);
    expect(part).toEqual({ status: 507, json: { error: 'tenant_storage_quota_exceeded', message: message(1_500_000), ...numbers }, sent: 1000 });
    // tus: a PATCH's body, and a deferred Upload-Length given with a PATCH.
    const deferred = await checkedFetch(`${server.url}/files/`, { method: 'POST', headers: { ...bearer(t), 'Tus-Resumable': '1.0.0', 'Upload-Defer-Length': '1' } });
    expect(deferred.status).toBe(201);
    const at = `${server.url}${deferred.headers.get('location')}`;
    const tusPatch = await answeredBeforeBody(at, 'PATCH', { ...bearer(t), 'Tus-Resumable': '1.0.0', 'Upload-Offset': '0', 'Content-Type': 'application/offset+octet-stream' }, 1_200_000);
    expect(tusPatch).toEqual({ status: 507, json: { error: 'tenant_storage_quota_exceeded', message: message(1_200_000), ...numbers }, sent: 1000 });
    const tusLength = await answeredBeforeBody(at, 'PATCH', { ...bearer(t), 'Tus-Resumable': '1.0.0', 'Upload-Offset': '0', 'Upload-Length': '950000', 'Content-Type': 'application/offset+octet-stream' }, 2000);
    expect(tusLength).toMatchObject({ status: 507, json: { error: 'tenant_storage_quota_exceeded', message: message(950_000), ...numbers } });
    // What fits is taken: exactly the room left.
    expect((await upload(t, randomBytes(900_000))).status).toBe(201);
    expect(await usage(t)).toMatchObject({ retainedBytes: 1_000_000, objects: 2 });
  });
});
