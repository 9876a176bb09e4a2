// POST /dev/token with security on (issue 36; decisions §5): the secret is at least 32 bytes (a
// shorter one refuses the start: exit 2, one line naming SVC_DEV_SHARED_SECRET), the start logs
// one warning that development tokens are enabled, and only a direct loopback request is
// answered: one that carries a proxy's header (Forwarded, X-Forwarded-For, X-Real-IP), or that
// comes from another address, is 404 as if the route did not exist.
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startServer, type TestServer } from './helpers/server.js';

let server: TestServer;

beforeAll(async () => {
  // Every interface: a request to this host's own non-loopback address comes from that address.
  server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_HOST: '0.0.0.0', SVC_DURABILITY: 'relaxed' });
});

afterAll(async () => {
  await server?.stop();
});

const mint = (url: string, headers: Record<string, string> = {}) => fetch(`${url}/dev/token`, { method: 'POST', headers, body: '{}' });

describe('POST /dev/token with security on', () => {
  test('a direct loopback request gets a token', async () => {
    const res = await mint(server.url);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { token_type: string }).token_type).toBe('Bearer');
  });

  test('a loopback request that came through a proxy is 404, as if the route did not exist', async () => {
    for (const headers of <Array<Record<string, string>>>[{ Forwarded: 'for=203.0.113.7' }, { 'X-Forwarded-For': '203.0.113.7' }, { 'X-Real-IP': '203.0.113.7' }, { Forwarded: 'for=127.0.0.1', 'X-Forwarded-For': '127.0.0.1' }]) {
      const res = await mint(server.url, headers);
      expect([headers, res.status]).toEqual([headers, 404]);
      expect(await res.json()).toEqual({ error: 'not_found', message: 'No route POST /dev/token' });
    }
  });

  test('a request from another address is 404', async (ctx) => {
    const address = Object.values(os.networkInterfaces()).flat().find((i) => i && i.family === 'IPv4' && !i.internal)?.address;
    if (!address) return ctx.skip('this host has no non-loopback IPv4 address');
    const res = await mint(`http://${address}:${server.port}`);
    expect(res.status).toBe(404);
  });

  test('the start logged one warning line that development tokens are enabled', async () => {
    // Logged before the listening line, but stderr may arrive after stdout's.
    for (let i = 0; i < 50 && !server.stderr().includes('development tokens are enabled'); i++) await new Promise((r) => setTimeout(r, 100));
    const lines = server.stderr().split('\n').filter((l) => l.includes('development tokens are enabled'));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!).level).toBe('warn');
  });

  test('no warning when the endpoint is off', async () => {
    const off = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_DEV_TOKEN_ENDPOINT: 'off', SVC_DURABILITY: 'relaxed' });
    try {
      expect((await mint(off.url)).status).toBe(404);
      expect(off.stderr()).not.toContain('development tokens are enabled');
    } finally {
      await off.stop();
    }
  });

  test('a secret shorter than 32 bytes refuses the start: exit 2 and one line naming SVC_DEV_SHARED_SECRET', async () => {
    const short = 'x'.repeat(31);
    const failure = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: short }).then(
      async (s) => {
        await s.stop();
        return 'started';
      },
      (err: Error) => err.message,
    );
    expect(failure).toBe('server exited with 2: svc: SVC_DEV_SHARED_SECRET: with SVC_SECURITY_ENABLED=true the development secret must be at least 32 bytes (it has 31): generate one (openssl rand -hex 32), or set it to off\n');
    expect(failure).not.toContain(short);
  });

  test('32 bytes start, and so does a short secret with security off', async () => {
    for (const env of <Array<Record<string, string>>>[{ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 'y'.repeat(32) }, { SVC_DEV_SHARED_SECRET: 'short' }]) {
      const s = await startServer({ ...env, SVC_DURABILITY: 'relaxed' });
      try {
        expect((await mint(s.url)).status).toBe(200);
      } finally {
        await s.stop();
      }
    }
  });
});
