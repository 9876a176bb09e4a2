// Uppy's tus plugin in a real headless Chromium (Debian's package, driven by playwright-core),
// from a page of another origin, against svc with security on: the browser's preflights and
// the exposed headers are what CORS allows; the uploaded file is the blob its last answer names.
// An origin that is not allowed gets nothing through. .ci/run installs chromium when it can;
// without it this is skipped.

import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contentId } from './helpers/http.js';
import { startServer, type TestServer } from './helpers/server.js';

const CHROMIUM = process.env.SVC_TEST_CHROMIUM ?? '/usr/bin/chromium';
const hasChromium = fs.existsSync(CHROMIUM);
if (!hasChromium) console.warn(`tus browser test skipped: ${CHROMIUM} is absent (apt-get install chromium)`);
const UPPY = path.resolve(import.meta.dirname, '../node_modules/uppy/dist/uppy.min.js');

/** The page's bytes, made the same way in the browser (see PAGE). */
function fileBytes(size: number): Buffer {
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + (i >> 11)) & 255;
  return out;
}

const PAGE = `<!doctype html><meta charset="utf-8"><title>uppy</title>
<script src="/uppy.min.js"></script>
<script>
window.upload = async (endpoint, token, size) => {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + (i >> 11)) & 255;
  const blobIds = [];
  const uppy = new Uppy.Uppy({ autoProceed: false });
  uppy.use(Uppy.Tus, {
    endpoint,
    headers: { Authorization: 'Bearer ' + token },
    chunkSize: 1024 * 1024,
    retryDelays: [],
    onAfterResponse: (req, res) => { const id = res.getHeader('X-Svc-Blob-Id'); if (id) blobIds.push(id); },
  });
  uppy.addFile({ name: 'data.bin', type: 'application/octet-stream', data: new Blob([bytes]) });
  const result = await uppy.upload();
  return {
    uploadURLs: result.successful.map((f) => f.tus && f.tus.uploadUrl || f.uploadURL),
    failed: result.failed.map((f) => String(f.error)),
    blobIds,
  };
};
</script>`;

let server: TestServer;
let app: http.Server;
let appOrigin = '';
let browser: Browser | undefined;

describe.skipIf(!hasChromium)('Uppy (tus) in Chromium from another origin', () => {
  beforeAll(async () => {
    // The app's own origin: a page and Uppy's bundle, as a site would serve them.
    app = http.createServer((req, res) => {
      if (req.url === '/uppy.min.js') return void res.writeHead(200, { 'Content-Type': 'text/javascript' }).end(fs.readFileSync(UPPY));
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(PAGE);
    });
    await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
    appOrigin = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
    server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), SVC_SECURITY_CORS_ALLOWED_ORIGINS: appOrigin });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await new Promise((resolve) => app?.close(resolve));
  });

  async function token(): Promise<string> {
    const res = await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: 'browser', scope: 'blob.read blob.write' }) });
    return ((await res.json()) as { access_token: string }).access_token;
  }

  it('uploads a 3 MiB file in 1 MiB chunks through CORS; the last answer names the blob', async () => {
    const page = await browser!.newPage();
    try {
      await page.goto(`${appOrigin}/`);
      const size = 3 * 1024 * 1024 + 99;
      const t = await token();
      const result = await page.evaluate(([endpoint, tk, n]) => (window as any).upload(endpoint, tk, n), [`${server.url}/files/`, t, size] as const);
      expect(result.failed).toEqual([]);
      const id = contentId(fileBytes(size));
      expect(result.blobIds).toEqual([id]);
      expect(result.uploadURLs).toHaveLength(1);
      const head = await fetch(result.uploadURLs[0], { method: 'HEAD', headers: { 'Tus-Resumable': '1.0.0', Authorization: `Bearer ${t}` } });
      expect(head.headers.get('x-svc-blob-id')).toBe(id);
      const blob = Buffer.from(await (await fetch(`${server.url}/api/v1/blobs/${id}`, { headers: { Authorization: `Bearer ${t}` } })).arrayBuffer());
      expect(blob.equals(fileBytes(size))).toBe(true);
    } finally {
      await page.close();
    }
  }, 60_000);

  it('from an origin that is not allowed, the preflight is refused and nothing is created', async () => {
    const page = await browser!.newPage();
    try {
      // The same page under another origin (localhost is not 127.0.0.1 to a browser).
      await page.goto(appOrigin.replace('127.0.0.1', 'localhost') + '/');
      const t = await token();
      const result = await page.evaluate(([endpoint, tk]) => (window as any).upload(endpoint, tk, 1000), [`${server.url}/files/`, t] as const);
      expect(result.failed).toHaveLength(1);
      expect(result.blobIds).toEqual([]);
    } finally {
      await page.close();
    }
  }, 60_000);
});
