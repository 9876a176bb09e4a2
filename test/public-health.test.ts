// Public health with security on (issue 36; decisions §5): readiness and liveness answer the
// status alone; their details (the dependencies, and what a failure names: hosts, ports, the
// database, the user, causes) only to a token that holds observability.read. Security off: as
// before, every detail to anyone.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startServer, type TestServer } from './helpers/server.js';

const SECRET = randomBytes(32).toString('base64url');

let secure: TestServer;
let open: TestServer;

async function token(scope: string): Promise<string> {
  const res = await fetch(`${secure.url}/dev/token`, { method: 'POST', body: JSON.stringify({ scope }) });
  return ((await res.json()) as { access_token: string }).access_token;
}

async function get(server: TestServer, path: string, bearer?: string): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(`${server.url}${path}`, { headers: bearer === undefined ? {} : { Authorization: `Bearer ${bearer}` } });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text), text };
}

beforeAll(async () => {
  [secure, open] = await Promise.all([
    startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: SECRET, SVC_DURABILITY: 'relaxed' }),
    startServer({ SVC_DURABILITY: 'relaxed' }),
  ]);
});

afterAll(async () => {
  await Promise.all([secure?.stop(), open?.stop()]);
});

describe('security on: health is public, its details are not', () => {
  test('without a token, readiness and liveness are the status alone', async () => {
    const ready = await get(secure, '/api/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready' });
    const live = await get(secure, '/api/health/live');
    expect(live.status).toBe(200);
    expect(live.body).toEqual({ status: 'ok' });
    for (const text of [ready.text, live.text]) expect(text).not.toMatch(/checks|catalog|blockStore|host|port|database|user|127\.0\.0\.1|version/i);
  });

  test('a token without observability.read, or one that does not verify, gets the status alone too (never 401)', async () => {
    for (const bearer of [await token('doc.read blob.read'), 'not.a.token', `${await token('observability.read')}x`]) {
      const ready = await get(secure, '/api/health/ready', bearer);
      expect([ready.status, ready.body]).toEqual([200, { status: 'ready' }]);
      const live = await get(secure, '/api/health/live', bearer);
      expect([live.status, live.body]).toEqual([200, { status: 'ok' }]);
    }
  });

  test('a token that holds observability.read gets the checks and the version', async () => {
    const bearer = await token('observability.read');
    // Twice: the first verifies the token, the second finds it cached.
    for (let i = 0; i < 2; i++) {
      const ready = await get(secure, '/api/health/ready', bearer);
      expect(ready.status).toBe(200);
      expect(ready.body.status).toBe('ready');
      expect(ready.body.checks.map((c: { name: string }) => c.name)).toEqual(['catalog', 'blockStore', 'diskSpace']);
      const live = await get(secure, '/api/health/live', bearer);
      expect(Object.keys(live.body).sort()).toEqual(['status', 'uptimeSeconds', 'version']);
    }
  });
});

describe('security off: health as before', () => {
  test('readiness names its checks and liveness its version to anyone', async () => {
    const ready = await get(open, '/api/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.body.checks.map((c: { name: string }) => c.name)).toEqual(['catalog', 'blockStore', 'diskSpace']);
    const live = await get(open, '/api/health/live');
    expect(Object.keys(live.body).sort()).toEqual(['status', 'uptimeSeconds', 'version']);
  });
});
