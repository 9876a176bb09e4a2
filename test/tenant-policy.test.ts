// Tenant policy and budgets with SVC_SECURITY_ENABLED=true (issue 18) over real HTTP: object
// limit, retained-byte quota, requests and bytes per minute, operations in flight, and a reload
// of the policy file on SIGHUP; the same on the document platform and legacy repositories (issue
// 26): document content within the object limit, one quota over blobs and document content,
// budgets and slots of /v1 and /legacy requests, legacy imports within the tenant's limits.
// Tokens are development tokens (an explicit SVC_DEV_SHARED_SECRET).
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from './helpers/server.js';
import { TEST_BACKEND } from './helpers/backends.js';
import { Api, type Reply, reply } from './helpers/docs-client.js';

let server: TestServer;
let policyFile: string;

const POLICY = {
  default: { requestsPerMinute: 10_000 },
  tenants: {
    small: { maxObjectBytes: 100_000, quotaBytes: 250_000 },
    slow: { requestsPerMinute: 3 },
    bytes: { bytesPerMinute: 100_000 },
    ranges: { bytesPerMinute: 50_000 },
    one: { maxConcurrent: 1, maxQueued: 0 },
    queued: { maxConcurrent: 1, maxQueued: 1 },
    reload: {},
    'doc-small': { maxObjectBytes: 100_000, quotaBytes: 250_000 },
    'doc-slow': { requestsPerMinute: 3 },
    'doc-bytes': { bytesPerMinute: 100_000 },
    'doc-one': { maxConcurrent: 1, maxQueued: 0 },
    'legacy-small': { maxObjectBytes: 100_000, quotaBytes: 150_000 },
  },
};

/** Every capability of the document platform. */
const DOC_SCOPE = 'doc.create doc.read doc.write meta.read meta.write:* meta.patch:* schema.write job.read legacy.read legacy.import';
/** The legacy repository `policy` (SVC_LEGACY_REPOS): document id → its bytes. */
const LEGACY = { 'memo-90k': randomBytes(90_000), 'memo-150k': randomBytes(150_000), 'memo-90k-b': randomBytes(90_000) };

async function token(org: string): Promise<string> {
  const res = await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: org, scope: 'blob.read blob.write blob.delete' }) });
  return ((await res.json()) as { access_token: string }).access_token;
}

const bearer = (t: string) => ({ Authorization: `Bearer ${t}` });
const upload = (t: string, body: Buffer) => fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), body: new Uint8Array(body) });
/** An upload without Content-Length (chunked): judged at its publication only. */
const uploadChunked = (t: string, body: Buffer) =>
  fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), duplex: 'half', body: new ReadableStream({ start: (c) => { c.enqueue(new Uint8Array(body)); c.close(); } }) } as RequestInit);

/**
 * Until the gauge `name` of the server at `url` is at least `min`: an upload the router admitted
 * (its tenant's slot taken) holds a memory reservation (svc_transfers_in_flight) or waits for one
 * (svc_transfers_queued). A fixed pause for that was too short when the machine was busy.
 */
async function gaugeReaches(url: string, name: string, min: number): Promise<void> {
  const minted = await fetch(`${url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: 'ops', scope: 'observability.read' }) });
  const { access_token: ops } = (await minted.json()) as { access_token: string };
  for (const until = Date.now() + 10_000; ; await new Promise((resolve) => setTimeout(resolve, 20))) {
    const text = await (await fetch(`${url}/metrics`, { headers: bearer(ops) })).text();
    const value = Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    if (value >= min) return;
    if (Date.now() > until) throw new Error(`${name} is ${value}, not ${min} or more, after 10 s`);
  }
}

/** A request whose body is still being sent (it holds a slot of its tenant): `done` is its answer's status once `req.end()`. */
function heldRequest(url: string, options: http.RequestOptions): { req: http.ClientRequest; done: Promise<number> } {
  const req = http.request(url, options);
  const done = new Promise<number>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
  });
  return { req, done };
}

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-policy-'));
  policyFile = path.join(dir, 'policy.json');
  fs.writeFileSync(policyFile, JSON.stringify(POLICY));
  const legacy = path.join(dir, 'legacy');
  for (const [id, bytes] of Object.entries(LEGACY)) {
    const hash = createHash('sha256').update(bytes).digest('hex');
    fs.mkdirSync(path.join(legacy, 'binaries'), { recursive: true });
    fs.mkdirSync(path.join(legacy, 'metadata'), { recursive: true });
    fs.writeFileSync(path.join(legacy, 'binaries', hash), bytes);
    fs.writeFileSync(path.join(legacy, 'metadata', `${id}.xml`), `<record><binaryHash>${hash}</binaryHash><length>${bytes.length}</length></record>`);
  }
  server = await startServer({
    SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_TENANT_POLICY_FILE: policyFile, SVC_LEGACY_REPOS: `policy=${legacy}`,
  });
});

afterAll(async () => {
  await server?.stop();
});

describe('tenant policy', () => {
  it('an object past the tenant\'s limit is 413 tenant_object_limit_exceeded, declared or streamed, and nothing is published', async () => {
    const t = await token('small');
    const declared = await upload(t, randomBytes(150_000));
    expect(declared.status).toBe(413);
    expect(((await declared.json()) as { error: string }).error).toBe('tenant_object_limit_exceeded');
    // Chunked: refused while streaming.
    const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { ...bearer(t), 'Transfer-Encoding': 'chunked' } }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      for (let i = 0; i < 15; i++) req.write(randomBytes(10_000));
      req.end();
    });
    expect(streamed.status).toBe(413);
    expect(JSON.parse(streamed.body).error).toBe('tenant_object_limit_exceeded');
    const session = await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { ...bearer(t), 'X-Svc-Upload-Session-Id': '0193b3a0-0000-7000-8000-00000000a001', 'Upload-Length': '150000' } });
    expect(session.status).toBe(413);
    const list = (await (await fetch(`${server.url}/api/v1/blobs`, { headers: bearer(t) })).json()) as { blobs: unknown[] };
    expect(list.blobs).toEqual([]);
  });

  it('publishing past the retained-byte quota is 507 tenant_storage_quota_exceeded; a repeat is free; deleting frees at once', async () => {
    const t = await token('small');
    const [a, b, c] = [randomBytes(90_000), randomBytes(90_000), randomBytes(90_000)];
    expect((await upload(t, a)).status).toBe(201);
    expect((await upload(t, b)).status).toBe(201);
    const over = await upload(t, c);
    expect(over.status).toBe(507);
    expect(((await over.json()) as { error: string }).error).toBe('tenant_storage_quota_exceeded');
    const list = (await (await fetch(`${server.url}/api/v1/blobs`, { headers: bearer(t) })).json()) as { blobs: Array<{ id: string }> };
    expect(list.blobs).toHaveLength(2);
    // Sent without a declared length: a declared one past the room left is refused at once, repeat or not (docs/security.md).
    const again = await uploadChunked(t, a);
    expect(again.status).toBe(201);
    const aId = ((await again.json()) as { blob: { id: string } }).blob.id;
    expect((await fetch(`${server.url}/api/v1/blobs/${aId}`, { method: 'DELETE', headers: bearer(t) })).status).toBe(204);
    expect((await upload(t, c)).status).toBe(201);
    // Another tenant's quota is its own.
    expect((await upload(await token('other'), randomBytes(300_000))).status).toBe(201);
  });

  it('requests per minute of a principal: 429 rate_limited with Retry-After', async () => {
    const t = await token('slow');
    for (let i = 0; i < 3; i++) expect((await fetch(`${server.url}/api/v1/blobs`, { headers: bearer(t) })).status).toBe(200);
    const refused = await fetch(`${server.url}/api/v1/blobs`, { headers: bearer(t) });
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: string }).error).toBe('rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('bytes per minute of a principal: 429 rate_limited once the budget is spent', async () => {
    const t = await token('bytes');
    expect((await upload(t, randomBytes(60_000))).status).toBe(201);
    expect((await upload(t, randomBytes(30_000))).status).toBe(201);
    const refused = await upload(t, randomBytes(30_000));
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: string }).error).toBe('rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('a download is charged the bytes it serves: a range only those', async () => {
    const t = await token('ranges');
    const put = await upload(t, randomBytes(40_000));
    const id = ((await put.json()) as { blob: { id: string } }).blob.id;
    const range = await fetch(`${server.url}/api/v1/blobs/${id}`, { headers: { ...bearer(t), Range: 'bytes=0-999' } });
    expect(range.status).toBe(206);
    expect((await range.arrayBuffer()).byteLength).toBe(1000);
    const whole = await fetch(`${server.url}/api/v1/blobs/${id}`, { headers: bearer(t) });
    expect(whole.status).toBe(429);
    expect(((await whole.json()) as { error: string }).error).toBe('rate_limited');
  });

  it('an upload that waits in its tenant\'s queue longer than the idle timeout (10 s) is not reset', async () => {
    const t = await token('queued');
    // The slot's holder sends 64 KiB every 2 s for 13 s (uWS cuts a client that sends less than
    // about 16 KiB in 10 s: slowloris protection).
    const { req: slow, done: slowDone } = heldRequest(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { ...bearer(t), 'Content-Length': String(7 * 65536) } });
    slow.write(randomBytes(65536));
    await gaugeReaches(server.url, 'svc_transfers_in_flight', 1);
    // Its body is held (the socket paused) while it waits for the slot.
    const started = Date.now();
    const waiting = upload(t, randomBytes(1024 * 1024));
    for (let i = 0; i < 6; i++) {
      await new Promise((resolve) => setTimeout(resolve, 2000));
      slow.write(randomBytes(65536));
    }
    slow.end();
    expect(await slowDone).toBe(201);
    const queued = await waiting;
    expect(queued.status).toBe(201);
    expect(Date.now() - started).toBeGreaterThan(11_000);
  }, 30_000);

  it('operations in flight per tenant: beyond maxConcurrent and its queue, 429 tenant_concurrency_exceeded', async () => {
    const t = await token('one');
    // An upload that holds the tenant's one slot: its body is not finished yet.
    const { req: slow, done: slowDone } = heldRequest(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { ...bearer(t), 'Content-Length': '20000' } });
    slow.write(randomBytes(10_000));
    await gaugeReaches(server.url, 'svc_transfers_in_flight', 1);
    const refused = await upload(t, randomBytes(1000));
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: string }).error).toBe('tenant_concurrency_exceeded');
    expect(refused.headers.get('retry-after')).toBe('1');
    // Another tenant is not held back.
    expect((await upload(await token('two'), randomBytes(1000))).status).toBe(201);
    slow.end(randomBytes(10_000));
    expect(await slowDone).toBe(201);
    expect((await upload(t, randomBytes(1000))).status).toBe(201);
  });

  it('SIGHUP reads the policy file again; an invalid file keeps the policy in force', async () => {
    const t = await token('reload');
    expect((await upload(t, randomBytes(5000))).status).toBe(201);
    fs.writeFileSync(policyFile, JSON.stringify({ ...POLICY, tenants: { ...POLICY.tenants, reload: { maxObjectBytes: 1000 } } }));
    server.proc.kill('SIGHUP');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const limited = await upload(t, randomBytes(5000));
    expect(limited.status).toBe(413);
    fs.writeFileSync(policyFile, '{ not json');
    server.proc.kill('SIGHUP');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await upload(t, randomBytes(5000))).status).toBe(413);
    expect(server.stderr()).toContain('tenant policy not reloaded');
  });
});

/** A principal of `org` on the document platform. */
async function docs(org: string, sub = 'alice'): Promise<Api> {
  const res = await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: org, sub, scope: DOC_SCOPE }) });
  return new Api(server.url, ((await res.json()) as { access_token: string }).access_token);
}

/** A new document's upload id. */
async function newUpload(api: Api): Promise<string> {
  const created = await api.post('/v1/documents', {});
  expect(created.status, created.text).toBe(201);
  return created.json.uploadId as string;
}

/** Exactly this status, `{ error: code, message }` (JSON) and no other field. */
function expectEnvelope(r: Reply, status: number, error: string, message: string | RegExp): void {
  expect([r.status, r.headers.get('content-type')], r.text).toEqual([status, 'application/json; charset=utf-8']);
  // A tenant's limit refusal carries its numbers beside the message.
  const numbers = error === 'tenant_storage_quota_exceeded' ? ['quotaBytes', 'retainedBytes'] : error === 'tenant_object_limit_exceeded' ? ['maxObjectBytes'] : [];
  expect(Object.keys(r.json).sort()).toEqual(['error', 'message', ...numbers].sort());
  for (const field of numbers) expect(Number.isSafeInteger(r.json[field]), field).toBe(true);
  expect(r.json.error).toBe(error);
  if (typeof message === 'string') expect(r.json.message).toBe(message);
  else expect(r.json.message).toMatch(message);
}

/** PUT of a document's bytes in chunks of unknown total length (Transfer-Encoding: chunked). */
function putChunked(api: Api, uploadId: string, chunks: Buffer[]): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}/v1/uploads/${uploadId}/bytes`, { method: 'PUT', headers: { Authorization: `Bearer ${api.token}`, 'Transfer-Encoding': 'chunked' } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: new Headers(res.headers as Record<string, string>), text, json: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

const OBJECT_LIMIT = "The object exceeds the tenant's limit of 100000 bytes (maxObjectBytes 100000)";
/** A quota refusal: at the record, or at once for a declared length that cannot fit (the numbers: usage.test.ts). */
const DOC_QUOTA = /^(Storing this document content|The declared length) would take the tenant past its retained-byte quota: \d+ more bytes on \d+ retained of a quota of \d+ bytes \(\d+ left\)$/;
const BLOB_QUOTA = /^(Publishing this blob|The declared length) would take the tenant past its retained-byte quota: \d+ more bytes on \d+ retained of a quota of \d+ bytes \(\d+ left\)$/;

describe('tenant policy on the document platform and legacy repositories', () => {
  it('document content past the tenant\'s object limit is 413 tenant_object_limit_exceeded, declared or streamed, and nothing is stored', async () => {
    const api = await docs('doc-small');
    const uploadId = await newUpload(api);
    expectEnvelope(await api.putBytes(uploadId, randomBytes(150_000)), 413, 'tenant_object_limit_exceeded', OBJECT_LIMIT);
    // Chunked: refused while streaming, as soon as the bytes pass the limit.
    expectEnvelope(await putChunked(api, uploadId, Array.from({ length: 15 }, () => randomBytes(10_000))), 413, 'tenant_object_limit_exceeded', OBJECT_LIMIT);
    // Nothing is stored: the upload has no bytes to finalize, and the quota is untouched (next test).
    expectEnvelope(await api.post(`/v1/uploads/${uploadId}/finalize`, {}), 409, 'upload_incomplete', 'PUT the bytes of the upload before finalizing it');
    // At the limit it is accepted.
    expect((await api.putBytes(uploadId, randomBytes(100_000))).status).toBe(204);
    expect((await api.post(`/v1/uploads/${uploadId}/finalize`, {})).status).toBe(201);
  });

  it('one quota over blobs and document content: past it 507 tenant_storage_quota_exceeded on either surface, nothing stored; a repeat is free; a blob deleted frees room for a document', async () => {
    // doc-small: quotaBytes 250000, of which the previous test's document holds 100000.
    const api = await docs('doc-small');
    const blobToken = await token('doc-small');
    const first = randomBytes(60_000);
    const a = await newUpload(api);
    expect((await api.putBytes(a, first)).status).toBe(204);
    const blob = await upload(blobToken, randomBytes(60_000));
    expect(blob.status).toBe(201);
    const blobId = ((await blob.json()) as { blob: { id: string } }).blob.id;
    // Held: 100000 + 60000 (document) + 60000 (blob) = 220000; room 30000.
    const c = await newUpload(api);
    const over = randomBytes(30_001);
    expectEnvelope(await api.putBytes(c, over), 507, 'tenant_storage_quota_exceeded', DOC_QUOTA);
    expectEnvelope(await api.post(`/v1/uploads/${c}/finalize`, {}), 409, 'upload_incomplete', 'PUT the bytes of the upload before finalizing it');
    const refusedBlob = await reply(await upload(blobToken, randomBytes(30_001)));
    expectEnvelope(refusedBlob, 507, 'tenant_storage_quota_exceeded', BLOB_QUOTA);
    // Content the tenant already holds is free, in another document too (sent without a declared
    // length: a declared one past the room left is refused at once, repeat or not).
    const again = await newUpload(api);
    expect((await api.putBytes(again, [first])).status).toBe(204);
    expect((await api.post(`/v1/uploads/${again}/finalize`, {})).status).toBe(201);
    // Deleting the blob frees its bytes at once: the refused content now fits, exactly.
    expect((await fetch(`${server.url}/api/v1/blobs/${blobId}`, { method: 'DELETE', headers: bearer(blobToken) })).status).toBe(204);
    expect((await api.putBytes(c, randomBytes(90_000))).status).toBe(204);
    expect((await api.post(`/v1/uploads/${c}/finalize`, {})).status).toBe(201);
    expectEnvelope(await reply(await upload(blobToken, randomBytes(1))), 507, 'tenant_storage_quota_exceeded', BLOB_QUOTA);
  });

  it('requests per minute of a principal hold on /v1 and /legacy as on the blob API: 429 rate_limited with Retry-After (metadata writes in their rejected form)', async () => {
    const api = await docs('doc-slow');
    for (let i = 0; i < 3; i++) expect((await api.get('/v1/documents')).status).toBe(200);
    const refusals = [
      await api.get('/v1/documents'),
      await api.post('/v1/documents', {}),
      await api.get('/legacy/policy'),
      await api.get('/legacy/policy/memo-90k'),
    ];
    for (const r of refusals) {
      const retryAfter = r.headers.get('retry-after');
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      expectEnvelope(r, 429, 'rate_limited', `The request budget of this principal is spent; retry in ${retryAfter} s`);
    }
    const write = await api.writeCanonical('0193b3a0-0000-7000-8000-000000000001', {});
    const retryAfter = write.headers.get('retry-after');
    expect([write.status, write.json]).toEqual([429, { status: 'rejected', error: { code: 'rate_limited', message: `The request budget of this principal is spent; retry in ${retryAfter} s` } }]);
    // The budget is the principal's: another of the tenant's is not held back.
    expect((await (await docs('doc-slow', 'bob')).get('/v1/documents')).status).toBe(200);
  });

  it('bytes per minute of a principal: a document\'s declared length and the content it serves are charged, a range only its bytes', async () => {
    const api = await docs('doc-bytes');
    const bytes = randomBytes(60_000);
    const uploadId = await newUpload(api);
    expect((await api.putBytes(uploadId, bytes)).status).toBe(204);
    const documentId = (await api.post(`/v1/uploads/${uploadId}/finalize`, {})).json.documentId as string;
    const range = await api.get(`/v1/documents/${documentId}/content`, { Range: 'bytes=0-999' });
    expect([range.status, range.headers.get('content-length')]).toEqual([206, '1000']);
    // 100000 - 60000 - 1000 = 39000 left (refilled at 1667 a second): the whole content is refused before any byte is sent.
    const whole = await api.get(`/v1/documents/${documentId}/content`);
    expectEnvelope(whole, 429, 'rate_limited', /^The byte budget of this principal is spent; retry in \d+ s$/);
    expect(Number(whole.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // A declared length is charged before the body: 50000 does not fit the 39000 left (and what refills meanwhile).
    const declared = await api.putBytes(await newUpload(api), randomBytes(50_000));
    expectEnvelope(declared, 429, 'rate_limited', /^The byte budget of this principal is spent; retry in \d+ s$/);
  });

  it('a document upload and a download each take one of the tenant\'s slots: beyond maxConcurrent, 429 tenant_concurrency_exceeded', async () => {
    const api = await docs('doc-one');
    const done = await newUpload(api);
    expect((await api.putBytes(done, randomBytes(1000))).status).toBe(204);
    const documentId = (await api.post(`/v1/uploads/${done}/finalize`, {})).json.documentId as string;
    // An upload that holds the tenant's one slot: its body is not finished yet.
    const slowUpload = await newUpload(api);
    const { req: slow, done: slowDone } = heldRequest(`${server.url}/v1/uploads/${slowUpload}/bytes`, { method: 'PUT', headers: { Authorization: `Bearer ${api.token}`, 'Content-Length': '20000' } });
    slow.write(randomBytes(10_000));
    await gaugeReaches(server.url, 'svc_transfers_in_flight', 1);
    const refusals = [await api.putBytes(await newUpload(api), randomBytes(1000)), await api.get(`/v1/documents/${documentId}/content`)];
    for (const r of refusals) {
      expectEnvelope(r, 429, 'tenant_concurrency_exceeded', 'The tenant has as many operations in flight and waiting as its policy allows');
      expect(r.headers.get('retry-after')).toBe('1');
    }
    // Requests that are not transfers do not take a slot.
    expect((await api.get(`/v1/documents/${documentId}`)).status).toBe(200);
    slow.end(randomBytes(10_000));
    expect(await slowDone).toBe(204);
    expect((await api.get(`/v1/documents/${documentId}/content`)).status).toBe(200);
  });

  it('a legacy import stores its bytes under the tenant: past its object limit or quota the job fails with that code and no document is made', async () => {
    const api = await docs('legacy-small');
    const importDoc = async (legacyDocId: string) => {
      const r = await api.post('/v1/legacy/import', { repo: 'policy', legacyDocId });
      expect(r.status, r.text).toBe(202);
      return { job: await api.settled(r.json.jobId as string), documentId: r.json.documentId as string };
    };
    const large = await importDoc('memo-150k');
    expect(large.job.json).toMatchObject({ state: 'failed', attempts: 1, error: { code: 'tenant_object_limit_exceeded', message: OBJECT_LIMIT } });
    expectEnvelope(await api.get(`/v1/documents/${large.documentId}`), 404, 'document_not_found', `No document ${large.documentId}`);
    const first = await importDoc('memo-90k');
    expect(first.job.json).toMatchObject({ state: 'completed' });
    // 90000 held of 150000: another 90000 does not fit, and is not retried (a new request after room is freed starts a new job).
    const second = await importDoc('memo-90k-b');
    expect(second.job.json).toMatchObject({ state: 'failed', attempts: 1, error: { code: 'tenant_storage_quota_exceeded', message: expect.stringMatching(DOC_QUOTA) } });
    expect((await api.get(`/v1/documents/${second.documentId}`)).status).toBe(404);
  });
});

describe('quota accounting across kill -9', () => {
  it('retained bytes stay exact: after a crash mid-uploads and deletes, the quota admits exactly what the listing leaves room for', async () => {
    const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-crash-'));
    const file = path.join(dir, 'policy.json');
    const QUOTA = 4_000_000;
    fs.writeFileSync(file, JSON.stringify({ tenants: { crash: { quotaBytes: QUOTA } } }));
    const env = { SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_TENANT_POLICY_FILE: file, SVC_DURABILITY: 'strict' };
    let s = await startServer(env);
    const mint = async () =>
      ((await (await fetch(`${s.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: 'crash', scope: 'blob.read blob.write blob.delete' }) })).json()) as { access_token: string }).access_token;
    let t = await mint();
    // Some blobs published and deleted before, then uploads and deletes in flight when the process dies.
    const first: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${s.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), body: new Uint8Array(randomBytes(40_000 + i)) });
      first.push(((await res.json()) as { blob: { id: string } }).blob.id);
    }
    const inFlight: Array<Promise<unknown>> = [];
    for (let i = 0; i < 24; i++) {
      inFlight.push(fetch(`${s.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), body: new Uint8Array(randomBytes(30_000 + i * 997)) }).catch(() => undefined));
      if (i < first.length) inFlight.push(fetch(`${s.url}/api/v1/blobs/${first[i]}`, { method: 'DELETE', headers: bearer(t) }).catch(() => undefined));
    }
    await new Promise((resolve) => setTimeout(resolve, 40));
    await s.kill9();
    await Promise.all(inFlight);
    s = await startServer(env, s.root);
    try {
      t = await mint();
      const list = (await (await fetch(`${s.url}/api/v1/blobs?limit=1000`, { headers: bearer(t) })).json()) as { blobs: Array<{ size: number }> };
      const retained = list.blobs.reduce((n, b) => n + b.size, 0);
      const room = QUOTA - retained;
      expect(room).toBeGreaterThan(1000);
      const tooMuch = await fetch(`${s.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), body: new Uint8Array(randomBytes(room + 1)) });
      expect(tooMuch.status).toBe(507);
      const exact = await fetch(`${s.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), body: new Uint8Array(randomBytes(room)) });
      expect(exact.status).toBe(201);
    } finally {
      await s.stop();
      fs.rmSync(s.root, { recursive: true, force: true });
    }
  });
});

describe('garbage collection with tenants', () => {
  it('marks from every tenant: a blob one tenant deleted stays whole for the other, and goes when both have deleted it', async () => {
    const s = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_GC_MIN_AGE: '0s', SVC_GC_QUARANTINE_AGE: '0s' });
    try {
      const mint = async (org: string, scope: string) =>
        ((await (await fetch(`${s.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: org, scope }) })).json()) as { access_token: string }).access_token;
      const a = await mint('gc-a', 'blob.read blob.write blob.delete');
      const b = await mint('gc-b', 'blob.read blob.write blob.delete');
      const ops = await mint('gc-ops', 'gc.run observability.read');
      const body = new Uint8Array(randomBytes(2 * 1024 * 1024 + 5));
      const id = ((await (await fetch(`${s.url}/api/v1/blobs`, { method: 'POST', headers: bearer(a), body })).json()) as { blob: { id: string } }).blob.id;
      expect((await fetch(`${s.url}/api/v1/blobs`, { method: 'POST', headers: bearer(b), body })).status).toBe(201);
      const gc = async () => {
        const res = await fetch(`${s.url}/api/ops/v1/gc?phase=run&apply=true`, { method: 'POST', headers: bearer(ops) });
        expect(res.status).toBe(200);
        return (await res.json()) as { quarantined: { count: number }; purged: { count: number } };
      };
      expect((await fetch(`${s.url}/api/v1/blobs/${id}`, { method: 'DELETE', headers: bearer(a) })).status).toBe(204);
      const first = await gc();
      expect(first.quarantined.count).toBe(0);
      const verify = await fetch(`${s.url}/api/v1/blobs/${id}/verify`, { method: 'POST', headers: bearer(b) });
      expect(await verify.json()).toMatchObject({ id, verified: true });
      expect((await fetch(`${s.url}/api/v1/blobs/${id}`, { method: 'DELETE', headers: bearer(b) })).status).toBe(204);
      const second = await gc();
      expect(second.quarantined.count).toBeGreaterThan(0);
    } finally {
      await s.stop();
    }
  });
});

describe('admission when the server cannot queue safely', () => {
  it('an operation that would wait in its tenant\'s queue while uploads wait for memory is 503 tenant_admission_unavailable', async () => {
    const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-admission-'));
    const file = path.join(dir, 'policy.json');
    fs.writeFileSync(file, JSON.stringify({ tenants: { m: { maxConcurrent: 1, maxQueued: 5 } } }));
    const s = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_TENANT_POLICY_FILE: file, SVC_INGEST_BUFFER_BYTES: '16MiB' });
    const open: http.ClientRequest[] = [];
    try {
      const mint = async (org: string) =>
        ((await (await fetch(`${s.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: org, scope: 'blob.read blob.write' }) })).json()) as { access_token: string }).access_token;
      const x = await mint('x');
      const m = await mint('m');
      // A body of unknown length reserves the whole transfer budget; the next one waits for memory.
      const chunked = (t: string) => {
        const req = http.request(`${s.url}/api/v1/blobs`, { method: 'POST', headers: { ...bearer(t), 'Transfer-Encoding': 'chunked' } });
        req.on('error', () => {});
        req.write(randomBytes(1000));
        open.push(req);
      };
      chunked(x);
      await gaugeReaches(s.url, 'svc_transfers_in_flight', 1);
      chunked(m); // holds m's one slot, its ingest waiting for memory
      await gaugeReaches(s.url, 'svc_transfers_queued', 1);
      const refused = await fetch(`${s.url}/api/v1/blobs/sha-256:${'0'.repeat(64)}:1`, { headers: bearer(m) });
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: string }).error).toBe('tenant_admission_unavailable');
      expect(refused.headers.get('retry-after')).toBe('1');
    } finally {
      for (const req of open) req.destroy();
      await s.stop();
    }
  });
});
