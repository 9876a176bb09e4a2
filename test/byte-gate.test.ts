// The tenant's byte limits at their one gate (engine/tenancy/tenant-gate.ts), over real HTTP with
// security on: tus concatenation within the object limit, the quota and the byte budget (a partial
// at most once in a final); open uploads' declared lengths reserve their room in the quota
// (`stagedBytes`), released at commit, abort and expiry; bodies without a declared length
// (chunked) and JSON bodies charged to the byte budget as they stream. After every refusal
// nothing grew: usage unchanged, no blob published, nothing staged.
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkedFetch } from './helpers/http.js';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;
/** A server whose sessions live 3 s (SVC_UPLOAD_TTL): reservations released by expiry. */
let shortLived: TestServer;

const POLICY = {
  default: { requestsPerMinute: 10_000 },
  tenants: {
    'g-object': { maxObjectBytes: 100_000 },
    'g-concat-quota': { quotaBytes: 200_000 },
    'g-concat-budget': { bytesPerMinute: 1_000_000 },
    'g-reserve': { quotaBytes: 1_000_000 },
    'g-expiry': { quotaBytes: 1_000_000 },
    'g-chunked': { bytesPerMinute: 1_000_000 },
    'g-json': { bytesPerMinute: 10_000 },
  },
};
const SCOPE = 'blob.read blob.write blob.delete doc.create doc.read doc.write';

interface Usage {
  retainedBytes: number;
  objects: number;
  stagedBytes: number;
  budgets: { bytes: { remaining: number | null } };
}

async function token(org: string, sub = 'alice', url = server.url): Promise<string> {
  const res = await fetch(`${url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: org, sub, scope: SCOPE }) });
  return ((await res.json()) as { access_token: string }).access_token;
}

const bearer = (t: string) => ({ Authorization: `Bearer ${t}` });
const TUS = { 'Tus-Resumable': '1.0.0' };

async function usage(t: string, url = server.url): Promise<Usage> {
  const res = await checkedFetch(`${url}/api/v1/usage`, { headers: bearer(t) });
  expect(res.status).toBe(200);
  return (await res.json()) as Usage;
}

/** A finished tus partial upload of `bytes`: its path (/files/{id}). */
async function partial(t: string, bytes: Buffer): Promise<string> {
  const res = await checkedFetch(`${server.url}/files/`, {
    method: 'POST',
    headers: { ...bearer(t), ...TUS, 'Upload-Concat': 'partial', 'Upload-Length': String(bytes.length), 'Content-Type': 'application/offset+octet-stream' },
    body: new Uint8Array(bytes),
  });
  expect(res.status).toBe(201);
  expect(res.headers.get('upload-offset')).toBe(String(bytes.length));
  return res.headers.get('location')!;
}

const final = (t: string, partials: string[]) =>
  checkedFetch(`${server.url}/files/`, { method: 'POST', headers: { ...bearer(t), ...TUS, 'Upload-Concat': `final;${partials.join(' ')}` } });

const tusCreate = (t: string, length: number, url = server.url) =>
  checkedFetch(`${url}/files/`, { method: 'POST', headers: { ...bearer(t), ...TUS, 'Upload-Length': String(length) } });

const session = (t: string, length?: number, id = randomUUID(), url = server.url) =>
  checkedFetch(`${url}/api/v1/uploads`, { method: 'POST', headers: { ...bearer(t), 'X-Svc-Upload-Session-Id': id, ...(length === undefined ? {} : { 'Upload-Length': String(length) }) } });

/**
 * A body of `total` random bytes sent without a declared length (chunked), 64 KiB at a time, until
 * it is sent or the server answers: the answer (a refusal may come while the body streams).
 */
function chunked(url: string, method: string, headers: Record<string, string>, total: number): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers });
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode!, json: text === '' ? undefined : JSON.parse(text) });
      });
    });
    // The server may close while the rest is still being written: the answer is what counts.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    let sent = 0;
    const more = () => {
      while (sent < total && !answered) {
        const size = Math.min(65_536, total - sent);
        sent += size;
        if (!req.write(randomBytes(size))) return void req.once('drain', more);
      }
      if (!answered) req.end();
    };
    more();
  });
}

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-byte-gate-'));
  const policyFile = path.join(dir, 'policy.json');
  fs.writeFileSync(policyFile, JSON.stringify(POLICY));
  const secure = { SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_TENANT_POLICY_FILE: policyFile };
  [server, shortLived] = await Promise.all([startServer(secure), startServer({ ...secure, SVC_UPLOAD_TTL: '3s' })]);
});

afterAll(async () => {
  await Promise.all([server?.stop(), shortLived?.stop()]);
});

describe('tus concatenation', () => {
  it('a partial appears at most once in a final (400); a final past the object limit is 413, nothing published', async () => {
    const t = await token('g-object');
    const p = await partial(t, randomBytes(60_000));
    const q = await partial(t, randomBytes(60_000));
    const before = await usage(t);
    expect(before).toMatchObject({ retainedBytes: 120_000, objects: 2, stagedBytes: 0 });
    const twice = await final(t, [p, p]);
    expect(twice.status).toBe(400);
    expect(await twice.json()).toMatchObject({ error: 'invalid_upload', message: expect.stringContaining('more than once') });
    const large = await final(t, [p, q]);
    expect(large.status).toBe(413);
    expect(await large.json()).toEqual({ error: 'tenant_object_limit_exceeded', message: "The object exceeds the tenant's limit of 100000 bytes (maxObjectBytes 100000)", maxObjectBytes: 100_000 });
    expect(await usage(t)).toMatchObject({ retainedBytes: 120_000, objects: 2, stagedBytes: 0 });
  });

  it('a final obeys the quota (507) and is charged its length to the byte budget (429), nothing published', async () => {
    const q = await token('g-concat-quota');
    const [a, b] = [await partial(q, randomBytes(60_000)), await partial(q, randomBytes(60_000))];
    const over = await final(q, [a, b]);
    expect(over.status).toBe(507);
    expect(await over.json()).toMatchObject({ error: 'tenant_storage_quota_exceeded', quotaBytes: 200_000, retainedBytes: 120_000 });
    expect(await usage(q)).toMatchObject({ retainedBytes: 120_000, objects: 2 });

    // The partials are alice's (her budget paid for them); bob assembles them: a final's length is his to pay.
    const alice = await token('g-concat-budget', 'alice');
    const bob = await token('g-concat-budget', 'bob');
    const parts = [await partial(alice, randomBytes(300_000)), await partial(alice, randomBytes(300_000))];
    const first = await final(bob, parts);
    expect(first.status).toBe(201);
    // Charged 600,000 (it refills at 16,667 bytes a second).
    expect((await usage(bob)).budgets.bytes.remaining).toBeLessThanOrEqual(1_000_000 - 600_000 + 100_000);
    const before = await usage(bob);
    // Listed the other way round: another object, 600,000 more bytes, past what is left.
    const second = await final(bob, [parts[1]!, parts[0]!]);
    expect(second.status).toBe(429);
    expect(await second.json()).toMatchObject({ error: 'rate_limited' });
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await usage(bob)).toMatchObject({ retainedBytes: before.retainedBytes, objects: before.objects });
  });
});

describe('open uploads reserve their declared length in the quota', () => {
  it('a second upload past what the first reserves is 507 (tus and contract sessions); commit and abort release', async () => {
    const t = await token('g-reserve');
    const first = await tusCreate(t, 899_999);
    expect(first.status).toBe(201);
    expect(await usage(t)).toMatchObject({ retainedBytes: 0, stagedBytes: 899_999 });
    const numbers = { quotaBytes: 1_000_000, retainedBytes: 0, stagedBytes: 899_999 };
    const tus = await tusCreate(t, 900_000);
    expect(tus.status).toBe(507);
    expect(await tus.json()).toMatchObject({ error: 'tenant_storage_quota_exceeded', ...numbers });
    const contract = await session(t, 900_000);
    expect(contract.status).toBe(507);
    expect(await contract.json()).toMatchObject({ error: 'tenant_storage_quota_exceeded', ...numbers });
    // Exactly the room left fits; one byte more does not.
    expect((await session(t, 100_002)).status).toBe(507);
    const fits = randomUUID();
    expect((await session(t, 100_001, fits)).status).toBe(201);
    expect(await usage(t)).toMatchObject({ stagedBytes: 1_000_000 });
    // A blob's declared length finds no room either, and a deferred tus length declared later.
    const blob = await checkedFetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), body: new Uint8Array(randomBytes(10)) });
    expect(blob.status).toBe(507);
    const deferred = await checkedFetch(`${server.url}/files/`, { method: 'POST', headers: { ...bearer(t), ...TUS, 'Upload-Defer-Length': '1' } });
    expect(deferred.status).toBe(201);
    const declare = await checkedFetch(`${server.url}${deferred.headers.get('location')}`, { method: 'PATCH', headers: { ...bearer(t), ...TUS, 'Upload-Offset': '0', 'Upload-Length': '10', 'Content-Type': 'application/offset+octet-stream' }, body: new Uint8Array(0) });
    expect(declare.status).toBe(507);
    // tus termination releases the first: its room is free again.
    expect((await checkedFetch(`${server.url}${first.headers.get('location')}`, { method: 'DELETE', headers: { ...bearer(t), ...TUS } })).status).toBe(204);
    expect(await usage(t)).toMatchObject({ stagedBytes: 100_001 });
    // The contract session's parts fill its own reservation, and its commit turns it into retained bytes.
    const bytes = randomBytes(100_001);
    const part = await checkedFetch(`${server.url}/api/v1/uploads/${fits}`, { method: 'PATCH', headers: { ...bearer(t), 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() }, body: new Uint8Array(bytes) });
    expect(part.status).toBe(204);
    expect(await usage(t)).toMatchObject({ stagedBytes: 100_001, retainedBytes: 0 });
    expect((await checkedFetch(`${server.url}/api/v1/uploads/${fits}/commit`, { method: 'POST', headers: bearer(t) })).status).toBe(200);
    expect(await usage(t)).toMatchObject({ stagedBytes: 0, retainedBytes: 100_001, objects: 1 });
    // A contract session's DELETE releases, and a session without a declared length holds what it received.
    const held = randomUUID();
    expect((await session(t, 899_999, held)).status).toBe(201);
    expect((await session(t, 1)).status).toBe(507);
    expect((await checkedFetch(`${server.url}/api/v1/uploads/${held}`, { method: 'DELETE', headers: bearer(t) })).status).toBe(204);
    const undeclared = randomUUID();
    expect((await session(t, undefined, undeclared)).status).toBe(201);
    expect((await checkedFetch(`${server.url}/api/v1/uploads/${undeclared}`, { method: 'PATCH', headers: { ...bearer(t), 'Upload-Offset': '0', 'Upload-Part-Id': randomUUID() }, body: new Uint8Array(randomBytes(30_000)) })).status).toBe(204);
    expect(await usage(t)).toMatchObject({ stagedBytes: 30_000, retainedBytes: 100_001 });
    expect((await session(t, 900_000)).status).toBe(507);
    expect((await checkedFetch(`${server.url}/api/v1/uploads/${undeclared}`, { method: 'DELETE', headers: bearer(t) })).status).toBe(204);
    expect(await usage(t)).toMatchObject({ stagedBytes: 0, retainedBytes: 100_001, objects: 1 });
  });

  it('an expired upload holds nothing', async () => {
    const t = await token('g-expiry', 'alice', shortLived.url);
    const created = Date.now();
    expect((await tusCreate(t, 600_000, shortLived.url)).status).toBe(201);
    expect((await session(t, 300_000, randomUUID(), shortLived.url)).status).toBe(201);
    // Both uploads exist by now: each expires at most 3 s from this moment (on a slow backend the second came well after `created`).
    const bothCreated = Date.now();
    const held = await usage(t, shortLived.url);
    const refused = await tusCreate(t, 600_000, shortLived.url);
    // Both reservations held while the uploads lived (a machine too busy to ask within their 3 s proves nothing).
    if (Date.now() - created < 2500) {
      expect(held).toMatchObject({ stagedBytes: 900_000 });
      expect(refused.status).toBe(507);
    }
    // Past their expiry, before any cleanup runs (SVC_UPLOAD_CLEANUP_INTERVAL is 15 min): nothing held.
    await new Promise((r) => setTimeout(r, Math.max(0, bothCreated + 3200 - Date.now())));
    expect(await usage(t, shortLived.url)).toMatchObject({ stagedBytes: 0, retainedBytes: 0 });
    expect((await tusCreate(t, 900_000, shortLived.url)).status).toBe(201);
  });
});

describe('bodies without a declared length are charged as they stream', () => {
  it('chunked blob uploads: once the byte budget is spent, 429 and nothing published', async () => {
    const t = await token('g-chunked', 'carol');
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await chunked(`${server.url}/api/v1/blobs`, 'POST', bearer(t), 600_000);
      statuses.push(r.status);
      if (r.status === 429) expect(r.json).toMatchObject({ error: 'rate_limited' });
    }
    expect(statuses).toEqual([201, 429, 429, 429]);
    expect(await usage(t)).toMatchObject({ retainedBytes: 600_000, objects: 1, stagedBytes: 0 });
  });

  it('a document\'s chunked bytes: 429 once the budget is spent, nothing recorded', async () => {
    const t = await token('g-chunked', 'dave');
    const uploads: string[] = [];
    for (let i = 0; i < 2; i++) {
      const doc = await fetch(`${server.url}/v1/documents`, { method: 'POST', headers: { ...bearer(t), 'Content-Type': 'application/json' }, body: '{}' });
      expect(doc.status).toBe(201);
      uploads.push(((await doc.json()) as { uploadId: string }).uploadId);
    }
    const before = await usage(t);
    expect((await chunked(`${server.url}/v1/uploads/${uploads[0]}/bytes`, 'PUT', bearer(t), 600_000)).status).toBe(204);
    const refused = await chunked(`${server.url}/v1/uploads/${uploads[1]}/bytes`, 'PUT', bearer(t), 600_000);
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ error: 'rate_limited' });
    const finalize = await fetch(`${server.url}/v1/uploads/${uploads[1]}/finalize`, { method: 'POST', headers: { ...bearer(t), 'Content-Type': 'application/json' }, body: '{}' });
    expect(finalize.status).toBe(409);
    expect(await usage(t)).toMatchObject({ retainedBytes: before.retainedBytes + 600_000 });
  });

  it('JSON request bodies are charged to the byte budget', async () => {
    const t = await token('g-json');
    // A JSON document of 6,000 bytes (whitespace is JSON too): the budget holds one of them a minute.
    const body = `{}${' '.repeat(5998)}`;
    const post = () => fetch(`${server.url}/v1/documents`, { method: 'POST', headers: { ...bearer(t), 'Content-Type': 'application/json' }, body });
    expect((await post()).status).toBe(201);
    const refused = await post();
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ error: 'rate_limited' });
    // At least the first body was charged (it refills at 167 bytes a second).
    expect((await usage(t)).budgets.bytes.remaining).toBeLessThan(10_000 - 3000);
  });
});
