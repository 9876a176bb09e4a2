import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededBytes, upload } from './helpers/http.js';
import { type TestServer, startServer } from './helpers/server.js';

// The /ops/ dashboard in a real headless Chromium (Debian's package, driven by playwright-core,
// which downloads no browser). .ci/run installs chromium when it can; without it this is skipped.

/** Debian's chromium; SVC_TEST_CHROMIUM names another binary. */
const CHROMIUM = process.env.SVC_TEST_CHROMIUM ?? '/usr/bin/chromium';
const hasChromium = fs.existsSync(CHROMIUM);
const ARTIFACTS = fileURLToPath(new URL('../test-artifacts/', import.meta.url));

if (!hasChromium) console.warn(`dashboard test skipped: ${CHROMIUM} is absent (apt-get install chromium)`);

describe.skipIf(!hasChromium)('the /ops/ dashboard in Chromium', () => {
  let server: TestServer;
  let browser: Browser;
  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_OPS_REFRESH_MS: '200' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it('loads without console errors, shows Ready, and its throughput chart moves while data is uploaded', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    page.on('requestfailed', (r) => {
      // The stream is cut when the page closes: not a failure of the page.
      if (!r.url().includes('/api/ops/v1/events')) problems.push(`requestfailed: ${r.url()}`);
    });
    const assets: Array<{ url: string; status: number; type: string | undefined }> = [];
    page.on('response', (r) => assets.push({ url: r.url(), status: r.status(), type: r.headers()['content-type'] }));

    await page.goto(`${server.url}/ops/`);
    await page.waitForSelector('#status[data-status="Ready"]', { timeout: 15_000 });
    expect(await page.textContent('#status')).toBe('Ready');
    expect(await page.getAttribute('#connection', 'data-state')).toBe('live');
    // uPlot came from svc itself, with its types.
    const uplot = assets.find((a) => a.url.endsWith('/ops/assets/uPlot.iife.min.js'));
    expect(uplot).toMatchObject({ status: 200, type: 'text/javascript; charset=utf-8' });
    expect(assets.find((a) => a.url.endsWith('/ops/assets/uPlot.min.css'))).toMatchObject({ status: 200, type: 'text/css; charset=utf-8' });
    expect(assets.every((a) => a.url.startsWith(server.url))).toBe(true);
    expect(await page.locator('#throughput canvas').count()).toBeGreaterThan(0);
    expect(await page.locator('#checks tbody tr').count()).toBeGreaterThanOrEqual(3);

    const chartState = () =>
      page.$eval('#throughput', (el) => ({ points: Number(el.getAttribute('data-points')), ingested: Number(el.getAttribute('data-ingest-bytes')) }));
    const canvas = () => page.$eval('#throughput canvas', (c) => (c as HTMLCanvasElement).toDataURL());
    const before = await chartState();
    const canvasBefore = await canvas();

    // Upload for a while: a few MiB per refresh period.
    let uploaded = 0;
    const end = Date.now() + 2500;
    for (let i = 0; Date.now() < end; i++) {
      const body = seededBytes(2 * 1024 * 1024, 9000 + i);
      const up = await upload(server.url, body);
      expect(up.res.status).toBe(201);
      uploaded += body.length;
    }
    await page.waitForFunction(
      (want) => Number(document.getElementById('throughput')!.getAttribute('data-ingest-bytes')) >= want,
      before.ingested + uploaded,
      { timeout: 10_000 },
    );
    const after = await chartState();
    expect(after.points).toBeGreaterThan(before.points);
    expect(after.ingested - before.ingested).toBe(uploaded);
    expect(await canvas()).not.toBe(canvasBefore);
    expect(Number(await page.textContent('#blobs'))).toBeGreaterThan(0);
    expect(await page.textContent('#durability-mode')).toBe('relaxed');

    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard.png'), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
    expect(server.stderr()).not.toMatch(/"level":"error"/);
  });

  for (const viewport of [{ width: 1280, height: 800 }, { width: 1920, height: 1080 }]) {
    it(`at ${viewport.width}×${viewport.height}: the Nodes panel has room of its own, the time axis's labels do not overlap, tenants' usage shows`, async () => {
      expect((await upload(server.url, seededBytes(300_000, 9900 + viewport.width))).res.status).toBe(201);
      const page = await browser.newPage({ viewport });
      await page.goto(`${server.url}/ops/`);
      await page.waitForSelector('#status[data-status="Ready"]', { timeout: 15_000 });
      // A few seconds of points, so that the time axis has several labels.
      await page.waitForFunction(() => Number(document.getElementById('throughput')!.getAttribute('data-points')) >= 3, undefined, { timeout: 15_000 });
      await page.waitForFunction(() => Number(document.querySelector('#tenants tbody tr')?.children[2]?.textContent) > 0, undefined, { timeout: 15_000 });
      fs.mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: path.join(ARTIFACTS, `dashboard-${viewport.width}x${viewport.height}.png`), fullPage: true });

      // Panels: the Nodes panel is as wide as the page's grid, tall enough for its table, and overlaps no other panel.
      const panels = await page.$$eval('main > section', (els) => els.map((el) => {
        const r = el.getBoundingClientRect();
        return { id: el.id || el.querySelector('h2')?.textContent || '', x: r.x, y: r.y, width: r.width, height: r.height };
      }));
      const nodes = panels.find((p) => p.id === 'nodes-card')!;
      const main = await page.$eval('main', (el) => el.getBoundingClientRect().width);
      expect(nodes.width).toBeGreaterThanOrEqual(main - 2);
      expect(nodes.height).toBeGreaterThanOrEqual(80);
      const table = await page.$eval('#nodes', (el) => el.getBoundingClientRect().width);
      expect(table).toBeLessThanOrEqual(nodes.width);
      const overlaps = (a: (typeof panels)[number], b: (typeof panels)[number]) =>
        a.x < b.x + b.width - 0.5 && b.x < a.x + a.width - 0.5 && a.y < b.y + b.height - 0.5 && b.y < a.y + a.height - 0.5;
      for (let i = 0; i < panels.length; i++) for (let j = i + 1; j < panels.length; j++) expect(overlaps(panels[i]!, panels[j]!), `${panels[i]!.id} overlaps ${panels[j]!.id}`).toBe(false);

      // The time axis: at least two labels, each clear of the next.
      const labels = JSON.parse((await page.getAttribute('#throughput', 'data-x-labels')) ?? '[]') as Array<[number, number]>;
      expect(labels.length).toBeGreaterThanOrEqual(2);
      labels.sort((a, b) => a[0] - b[0]);
      for (let i = 1; i < labels.length; i++) expect(labels[i]![0], `label ${i} starts before label ${i - 1} ends`).toBeGreaterThan(labels[i - 1]![1]);

      // Tenants' usage: with security off, the default tenant and what it retains.
      const tenants = await page.$$eval('#tenants tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
      expect(tenants[0]![0]).toBe('00000000-0000-4000-8000-000000000000');
      expect(Number(tenants[0]![2])).toBeGreaterThan(0);
      expect(tenants[0]![3]).toBe('none');
      await page.close();
    });
  }

  it('opens on the last minutes of traffic, and shows the last GC run as a list of figures', async () => {
    // Traffic from before the page was opened (in the history once a sample, every second, has
    // counted it: waited for, a fixed pause was too short when timers ran late), then a GC run.
    const recorded = async () => {
      const history = (await (await fetch(`${server.url}/api/ops/v1/history`)).json()) as { points: Array<{ ingestedBytes: number }> };
      return { history, sent: history.points.reduce((n, p) => n + p.ingestedBytes, 0) };
    };
    const earlier = (await recorded()).sent;
    for (let i = 0; i < 3; i++) expect((await upload(server.url, seededBytes(1024 * 1024, 9500 + i))).res.status).toBe(201);
    let { history, sent } = await recorded();
    for (const until = Date.now() + 15_000; sent < earlier + 3 * 1024 * 1024 && Date.now() < until; await new Promise((r) => setTimeout(r, 100))) ({ history, sent } = await recorded());
    expect(sent).toBeGreaterThanOrEqual(earlier + 3 * 1024 * 1024);
    expect((await fetch(`${server.url}/api/ops/v1/gc?phase=mark&apply=false`, { method: 'POST' })).status).toBe(200);

    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    await page.goto(`${server.url}/ops/`);
    // Before a second snapshot could add a live point, the history is on the chart.
    await page.waitForSelector('#status[data-status="Ready"]', { timeout: 15_000 });
    const chart = await page.$eval('#throughput', (el) => ({ points: Number(el.getAttribute('data-points')), ingested: Number(el.getAttribute('data-ingest-bytes')) }));
    expect(chart.points).toBeGreaterThanOrEqual(history.points.length);
    expect(chart.ingested).toBeGreaterThanOrEqual(sent);
    // The list as label=value pairs, read in one evaluation from the list's children in order; waited
    // for until it names the run asked for (a CI run under load once read the labels without values).
    const gcPairs = () => {
      const items = [...document.querySelectorAll('#gc > *')];
      const pairs: string[] = [];
      for (let i = 0; i + 1 < items.length; i += 2) pairs.push(`${items[i]!.textContent}=${items[i + 1]!.textContent}`);
      return pairs;
    };
    await page.waitForFunction(`(${gcPairs.toString()})().includes('phase=mark')`, undefined, { timeout: 10_000 });
    const gc = await page.evaluate(gcPairs);
    expect(gc).toContain('phase=mark');
    expect(gc).toContain('apply=no');
    expect(gc.join(' ')).not.toMatch(/[{}"]/);
    expect(await page.textContent('#used-bytes')).not.toBe('–');
    await page.close();
  });
});

describe.skipIf(!hasChromium)('the /ops/ dashboard with security on', () => {
  let server: TestServer;
  let browser: Browser;
  beforeAll(async () => {
    const policy = path.join(fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'svc-dashboard-')), 'policy.json');
    fs.writeFileSync(policy, JSON.stringify({ tenants: { acme: { quotaBytes: 1_000_000 }, idle: {} } }));
    server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_OPS_REFRESH_MS: '200', SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 'dashboard-test-secret-0123456789abcdef', SVC_TENANT_POLICY_FILE: policy });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  const mint = async (scope: string, org = 'ops') =>
    ((await (await fetch(`${server.url}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: org, scope }) })).json()) as { access_token: string }).access_token;

  it('asks for a token, then follows the stream with one given as #token=, which it keeps out of the address', async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/ops/`);
    await page.waitForSelector('#connection[data-state="token needed"]', { timeout: 15_000 });
    expect(await page.isVisible('#token-form')).toBe(true);
    const token = await mint('observability.read');
    await page.goto(`${server.url}/ops/#token=${token}`);
    await page.waitForSelector('#status[data-status="Ready"]', { timeout: 15_000 });
    expect(await page.getAttribute('#connection', 'data-state')).toBe('live');
    expect(page.url()).toBe(`${server.url}/ops/`);
    // A new snapshot arrives through the stream (the sequence moves with traffic).
    const first = await page.textContent('#sequence');
    await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { Authorization: `Bearer ${await mint('blob.write')}` }, body: new Uint8Array(seededBytes(50_000, 9)) });
    await page.waitForFunction((before) => document.querySelector('#sequence')?.textContent !== before, first, { timeout: 15_000 });
    await page.close();
  });

  it("shows the policy's tenants' usage to a holder of observability.read", async () => {
    const stored = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: { Authorization: `Bearer ${await mint('blob.write', 'acme')}` }, body: new Uint8Array(seededBytes(50_000, 77)) });
    expect(stored.status).toBe(201);
    const page = await browser.newPage();
    const token = await mint('observability.read');
    await page.goto(`${server.url}/ops/#token=${token}`);
    await page.waitForSelector('#status[data-status="Ready"]', { timeout: 15_000 });
    // The table is read at most every 5 s: until it shows the blob.
    await page.waitForFunction(() => [...document.querySelectorAll('#tenants tbody tr')].some((tr) => tr.children[0]?.textContent === 'acme' && tr.children[2]?.textContent === '1'), undefined, { timeout: 15_000 });
    const rows = await page.$$eval('#tenants tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    const acme = rows.find((r) => r[0] === 'acme')!;
    expect(acme[2]).toBe('1');
    expect(acme[3]).toMatch(/ \(5 %\)$/);
    // A tenant the policy names that stores nothing: a row of zeros, no quota.
    expect(rows.find((r) => r[0] === 'idle')!.slice(2)).toEqual(['0', 'none']);
    await page.close();
  });

  it('says so when the token does not grant observability.read', async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/ops/#token=${await mint('blob.read')}`);
    await page.waitForSelector('#connection[data-state="token needed"]', { timeout: 15_000 });
    expect(await page.textContent('#token-message')).toContain('observability.read');
    await page.close();
  });
});
