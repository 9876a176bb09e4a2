// The operator event stream with security on (issue 36; decisions §5): it obeys the CORS
// allow-list like every other route (it answered `Access-Control-Allow-Origin: *`), and one
// principal holds at most SVC_OPS_MAX_STREAMS (4) open streams: the next is 429 with Retry-After
// until one closes.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startServer, type TestServer } from './helpers/server.js';

const SECRET = randomBytes(32).toString('base64url');
const ORIGIN = 'https://app.example';

let server: TestServer;

async function token(sub: string): Promise<string> {
  const res = await fetch(`${server.url}/dev/token`, { method: 'POST', body: JSON.stringify({ sub, scope: 'observability.read' }) });
  return ((await res.json()) as { access_token: string }).access_token;
}

interface Stream {
  status: number;
  headers: Headers;
  close(): void;
}

/** GET /api/ops/v1/events; an accepted stream is read until its first bytes and kept open. */
async function open(bearer: string, origin?: string): Promise<Stream> {
  const abort = new AbortController();
  const res = await fetch(`${server.url}/api/ops/v1/events`, { headers: { Authorization: `Bearer ${bearer}`, ...(origin ? { Origin: origin } : {}) }, signal: abort.signal });
  if (res.status === 200) await res.body!.getReader().read();
  else await res.text();
  return { status: res.status, headers: res.headers, close: () => abort.abort() };
}

beforeAll(async () => {
  server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: SECRET, SVC_SECURITY_CORS_ALLOWED_ORIGINS: ORIGIN, SVC_DURABILITY: 'relaxed' });
});

afterAll(async () => {
  await server?.stop();
});

describe('GET /api/ops/v1/events with security on', () => {
  test('a listed Origin is granted, another gets no grant (no *)', async () => {
    const bearer = await token('cors');
    const listed = await open(bearer, ORIGIN);
    const other = await open(bearer, 'https://evil.example');
    const none = await open(bearer);
    try {
      expect([listed.status, other.status, none.status]).toEqual([200, 200, 200]);
      expect(listed.headers.get('access-control-allow-origin')).toBe(ORIGIN);
      expect(listed.headers.get('content-type')).toBe('text/event-stream');
      expect(other.headers.get('access-control-allow-origin')).toBeNull();
      expect(none.headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      for (const s of [listed, other, none]) s.close();
    }
  });

  test('a principal holds at most 4 open streams: the 5th is 429 with Retry-After, accepted once one closes; another principal is not held back', async () => {
    const bearer = await token('watcher');
    const streams: Stream[] = [];
    try {
      for (let i = 0; i < 4; i++) streams.push(await open(bearer));
      expect(streams.map((s) => s.status)).toEqual([200, 200, 200, 200]);
      const fifth = await fetch(`${server.url}/api/ops/v1/events`, { headers: { Authorization: `Bearer ${bearer}` } });
      expect(fifth.status).toBe(429);
      expect(fifth.headers.get('retry-after')).toBe('1');
      expect(((await fifth.json()) as { error: string }).error).toBe('too_many_streams');
      const other = await open(await token('someone-else'));
      expect(other.status).toBe(200);
      other.close();
      streams.shift()!.close();
      // The server sees the closed socket at once; poll briefly for it.
      let again: Stream | undefined;
      for (const until = Date.now() + 5000; Date.now() < until;) {
        again = await open(bearer);
        if (again.status === 200) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(again!.status).toBe(200);
      streams.push(again!);
      const sixth = await fetch(`${server.url}/api/ops/v1/events`, { headers: { Authorization: `Bearer ${bearer}` } });
      expect(sixth.status).toBe(429);
      await sixth.text();
    } finally {
      for (const s of streams) s.close();
    }
  });
});
