import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestServer, startServer } from './helpers/server.js';

// Both listeners' Swagger UI pages (/docs) in a real headless Chromium (Debian's package, driven
// by playwright-core, as test/dashboard.test.ts): each renders its document's operations with no
// error or warning box (Swagger UI's `.errors-wrapper`, e.g. its red "OpenAPI.jsonSchemaDialect
// field contains a value different from the default"). Screenshots go to test-artifacts/.

/** Debian's chromium; SVC_TEST_CHROMIUM names another binary. */
const CHROMIUM = process.env.SVC_TEST_CHROMIUM ?? '/usr/bin/chromium';
const hasChromium = fs.existsSync(CHROMIUM);
const ARTIFACTS = fileURLToPath(new URL('../test-artifacts/', import.meta.url));

if (!hasChromium) console.warn(`Swagger UI test skipped: ${CHROMIUM} is absent (apt-get install chromium)`);

describe.skipIf(!hasChromium)('Swagger UI of both listeners in Chromium', () => {
  let server: TestServer;
  let browser: Browser;
  beforeAll(async () => {
    server = await startServer();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  const pages = [
    { name: 'blob listener', url: () => `${server.url}/docs`, title: 'svc', shot: 'swagger-ui-svc.png' },
    { name: 'model runtime', url: () => `${server.modelUrl}/docs`, title: 'svc model runtime', shot: 'swagger-ui-model-runtime.png' },
  ];

  for (const { name, url, title, shot } of pages) {
    it(`the ${name}'s /docs renders its operations with no error or warning box`, async () => {
      const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(`console: ${m.text()}`);
      });
      await page.goto(url(), { waitUntil: 'networkidle' });
      await page.waitForSelector('.information-container .title', { timeout: 20_000 });
      await page.waitForSelector('.opblock', { timeout: 20_000 });
      // The info section (where the dialect warning sits) and the operations are both drawn by now.
      expect((await page.textContent('.information-container .title'))?.startsWith(title)).toBe(true);
      expect(await page.locator('.opblock').count()).toBeGreaterThan(5);
      fs.mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: path.join(ARTIFACTS, shot), fullPage: false });
      const boxes = await page.locator('.errors-wrapper').allTextContents();
      expect(boxes).toEqual([]);
      expect(await page.locator('.swagger-ui .loading-container .loading').count()).toBe(0);
      expect(problems).toEqual([]);
      await page.close();
    });
  }
});
