// Tenant policy and budgets with SVC_SECURITY_ENABLED=true (issue 18) over real HTTP: object
// limit, retained-byte quota, requests and bytes per minute, operations in flight, and a reload
// of the policy file on SIGHUP. Tokens are development tokens (an explicit SVC_DEV_SHARED_SECRET).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from './helpers/server.js';
import { TEST_BACKEND } from './helpers/backends.js';

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
  },
};

async function token(org: string): Promise<string> {
  const res = await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: org, scope: 'blob.read blob.write blob.delete' }) });
  return ((await res.json()) as { access_token: string }).access_token;
}

const bearer = (t: string) => ({ Authorization: `Bearer ${t}` });
const upload = (t: string, body: Buffer) => fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: bearer(t), body: new Uint8Array(body) });

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

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-policy-'));
  policyFile = path.join(dir, 'policy.json');
  fs.writeFileSync(policyFile, JSON.stringify(POLICY));
  server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_TENANT_POLICY_FILE: policyFile });
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
    const again = await upload(t, a);
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
    const slow = http.request(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { ...bearer(t), 'Content-Length': String(7 * 65536) } });
    const slowDone = new Promise<number>((resolve, reject) => {
      slow.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      slow.on('error', reject);
    });
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
    const slow = http.request(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { ...bearer(t), 'Content-Length': '20000' } });
    const slowDone = new Promise<number>((resolve, reject) => {
      slow.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      slow.on('error', reject);
    });
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
