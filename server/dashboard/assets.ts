import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { DASHBOARD_CSS, DASHBOARD_HTML, DASHBOARD_JS } from './page.js';

// The files of the /ops/ dashboard, all served by svc itself: the page, its script and style
// (page.ts), and uPlot's build taken from node_modules. Only these fixed names are answered.

interface DashboardAsset {
  body: string | Buffer;
  contentType: string;
  cacheControl: string;
  etag: string;
}

const HTML = 'text/html; charset=utf-8';
const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';
/** Our own files change with svc: revalidate each time (cheap with the ETag). */
const REVALIDATE = 'no-cache';
/** uPlot's files change only with the pinned package: a day, then revalidate. */
const LIBRARY = 'public, max-age=86400';

/** uPlot files by the name they are served under (/ops/assets/<name>). */
const UPLOT_FILES: Readonly<Record<string, string>> = {
  'uPlot.iife.min.js': JS,
  'uPlot.min.css': CSS,
};

const require = createRequire(import.meta.url);
const cache = new Map<string, DashboardAsset | null>();

function etagOf(body: string | Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
}

function own(body: string, contentType: string): DashboardAsset {
  return { body, contentType, cacheControl: REVALIDATE, etag: etagOf(body) };
}

function uplotFile(name: string): DashboardAsset | null {
  try {
    const dir = join(dirname(require.resolve('uplot/package.json')), 'dist');
    const body = readFileSync(join(dir, name));
    return { body, contentType: UPLOT_FILES[name]!, cacheControl: LIBRARY, etag: etagOf(body) };
  } catch {
    return null;
  }
}

/** The asset for a request path under /ops/, or null (404). */
export function dashboardAsset(url: string): DashboardAsset | null {
  const path = url.split(/[?#]/, 1)[0]!;
  if (cache.has(path)) return cache.get(path)!;
  let asset: DashboardAsset | null = null;
  if (path === '/ops/' || path === '/ops/index.html') asset = own(DASHBOARD_HTML, HTML);
  else if (path === '/ops/assets/dashboard.js') asset = own(DASHBOARD_JS, JS);
  else if (path === '/ops/assets/dashboard.css') asset = own(DASHBOARD_CSS, CSS);
  else if (path.startsWith('/ops/assets/')) {
    const name = path.slice('/ops/assets/'.length);
    if (Object.hasOwn(UPLOT_FILES, name)) asset = uplotFile(name);
  } else return null; // unknown paths are not cached (any number of them)
  cache.set(path, asset);
  return asset;
}
