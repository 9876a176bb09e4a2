import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Logger } from '../dist/engine/base/log.js';
import { Stats } from '../dist/engine/ops/stats.js';
import { OpsSnapshots, nodeIdOf } from '../dist/engine/ops/snapshot.js';
import { Exchange } from '../dist/server/exchange.js';
import { OpsEvents } from '../dist/engine/ops/events.js';
import { streamEvents } from '../dist/server/ops-api.js';
import { apiSurface } from '../dist/server/api-surface.js';
import { pythonHas } from './helpers/python.js';
import { checkedFetch, seededBytes, upload } from './helpers/http.js';
import { expectConforms } from './helpers/openapi.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

// The operator snapshot (decisions.md "Ops snapshot") and its event stream ("Events").

const TOP = ['sequence', 'observedAt', 'status', 'summary', 'checks', 'storage', 'placement', 'capacity', 'durability', 'dependencies', 'tenants', 'traffic'];
const keys = (o: object) => Object.keys(o).sort();

/** Exactly the fields decisions.md lists, each of its type; and the document's Snapshot schema (svc-api.json). */
function expectSnapshotShape(s: any): void {
  const answer = { status: 200, headers: new Headers({ 'Content-Type': 'application/json; charset=utf-8', 'X-Request-Id': 'r-1' }), text: JSON.stringify(s) };
  expectConforms(answer, 'GET', '/api/ops/v1/snapshot');
  expect(keys(s)).toEqual([...TOP].sort());
  expect(Number.isInteger(s.sequence) && s.sequence >= 1).toBe(true);
  expect(new Date(s.observedAt).toISOString()).toBe(s.observedAt);
  expect(['Ready', 'Degraded', 'Unavailable']).toContain(s.status);
  expect(typeof s.summary).toBe('string');
  expect(s.summary.length).toBeGreaterThan(0);
  expect(Array.isArray(s.checks) && s.checks.length > 0).toBe(true);
  for (const c of s.checks) {
    expect(keys(c)).toEqual(['detail', 'id', 'status']);
    expect(typeof c.id).toBe('string');
    expect(['ok', 'warn', 'failed']).toContain(c.status);
    expect(typeof c.detail).toBe('string');
  }
  expect(keys(s.storage)).toEqual(['availableBytes', 'backend', 'blobs', 'blocks', 'minFreeBytes', 'quarantinedBlocks', 'usedBytes']);
  expect(s.storage.backend).toBe('fs');
  for (const k of ['availableBytes', 'blobs', 'blocks', 'minFreeBytes', 'quarantinedBlocks', 'usedBytes']) expect(Number.isInteger(s.storage[k]) && s.storage[k] >= 0).toBe(true);
  expect(s.placement).toEqual({ mode: 'single-node', nodeId: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/), nodes: [] });
  expect(keys(s.capacity)).toEqual(['bufferedBytes', 'limitBytes', 'transfersInFlight', 'workerPool']);
  expect(keys(s.capacity.workerPool)).toEqual(['queued', 'running', 'threads']);
  for (const v of [s.capacity.bufferedBytes, s.capacity.limitBytes, s.capacity.transfersInFlight, s.capacity.workerPool.queued, s.capacity.workerPool.running, s.capacity.workerPool.threads]) {
    expect(Number.isInteger(v) && v >= 0).toBe(true);
  }
  const d = keys(s.durability);
  expect(d.length === 2 ? d : d.filter((k) => k !== 'lastGc')).toEqual(['corruptBlocksDetected', 'mode']);
  expect(['strict', 'relaxed']).toContain(s.durability.mode);
  expect(Number.isInteger(s.durability.corruptBlocksDetected)).toBe(true);
  expect(s.dependencies.map((x: any) => x.kind).sort()).toEqual(['blockStore', 'catalog']);
  for (const x of s.dependencies) {
    expect(keys(x)).toEqual(['kind', 'latencyMs', 'status']);
    expect(['ok', 'failed']).toContain(x.status);
    expect(typeof x.latencyMs === 'number' && x.latencyMs >= 0).toBe(true);
  }
  // Tenants' usage (the dashboard's table): with security off, the default tenant alone.
  expect(s.tenants).toEqual([{ tenant: '00000000-0000-4000-8000-000000000000', retainedBytes: expect.any(Number), objects: expect.any(Number), quotaBytes: null }]);
  expect(keys(s.traffic)).toEqual(['byteReusePercent', 'bytesIngested', 'bytesServed', 'duplicateBlocks', 'errors', 'freshBlocks', 'requests']);
  for (const [k, v] of Object.entries(s.traffic)) {
    if (k === 'byteReusePercent') expect(typeof v === 'number' && (v as number) >= 0 && (v as number) <= 100).toBe(true);
    else expect(Number.isInteger(v) && (v as number) >= 0).toBe(true);
  }
}

interface SseEvent {
  id?: string;
  event?: string;
  data: string;
  at: number;
}

/** A reading EventSource client on fetch: collects events until stop(). */
function follow(url: string) {
  const events: SseEvent[] = [];
  const controller = new AbortController();
  const waiters: Array<() => void> = [];
  let headers: Headers | undefined;
  const done = (async () => {
    const res = await fetch(url, { signal: controller.signal });
    headers = res.headers;
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const ev: SseEvent = { data: '', at: Date.now() };
        let hasData = false;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          const i = line.indexOf(':');
          const field = i < 0 ? line : line.slice(0, i);
          const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
          if (field === 'id') ev.id = value;
          else if (field === 'event') ev.event = value;
          else if (field === 'data') {
            ev.data += (hasData ? '\n' : '') + value;
            hasData = true;
          }
        }
        if (hasData) {
          events.push(ev);
          for (const w of waiters.splice(0)) w();
        }
      }
    }
  })().catch((err) => {
    if ((err as Error).name !== 'AbortError') throw err;
  });
  return {
    events,
    headers: () => headers,
    async waitFor(n: number, timeoutMs = 10_000): Promise<void> {
      const until = Date.now() + timeoutMs;
      while (events.length < n) {
        if (Date.now() > until) throw new Error(`only ${events.length} of ${n} events within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
    },
    async stop() {
      controller.abort();
      await done;
    },
  };
}

async function metric(server: TestServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  if (!m) throw new Error(`no metric ${name}`);
  return Number(m[1]);
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A uWS request as the Exchange reads it: a GET without a body. */
const GET_REQUEST = { getCaseSensitiveMethod: () => 'GET', getHeader: () => '' } as any;

describe('OpsSnapshots (no HTTP)', () => {
  function fakeEngine(root: string) {
    const stats = new Stats();
    const engine = {
      config: { fsRoot: root, blobBackend: 'fs', durability: 'relaxed' },
      backend: {},
      nodeId: nodeIdOf(root),
      liveNodes: { nodes: async (): Promise<Array<{ nodeId: string; lastSeenAt: string; address: string }>> => [] },
      tenantUsage: { tenantsUsage: async () => [{ tenant: '00000000-0000-4000-8000-000000000000', retainedBytes: 0, objects: 0, quotaBytes: null }] },
      stats,
      log: new Logger('silent'),
      manifests: { totals: async () => ({ blobs: 3, blocks: 7, storedBytes: 7 * 1024 * 1024 }) },
      pool: { threads: [{}, {}], queueSize: 0, idleThreads: 2 },
      memory: { transfers: 0, queued: 0, bufferedBytes: 0, limitBytes: 1 << 30 },
      health: {
        lastReadiness: undefined as { at: number; failed: string[] } | undefined,
        clockCheck: () => undefined,
        readiness: async () => [
          { name: 'catalog', status: 'ok', latencyMs: 0.5 },
          { name: 'blockStore', status: 'ok', latencyMs: 0.25 },
        ],
      },
    };
    return engine;
  }

  it('keeps the sequence while nothing changes and moves it by one on a change', async () => {
    const root = tempRoot();
    try {
      const engine = fakeEngine(root);
      // Fixed file system figures: the real ones move with any disk activity on the machine.
      const statfs = async () => ({ blocks: 1000, bfree: 600, bavail: 500, bsize: 4096 });
      const snaps = new OpsSnapshots(engine as any, { statfs });
      const a = await snaps.build();
      await sleep(5);
      const b = await snaps.build();
      expectSnapshotShape(a);
      expect(a.sequence).toBe(1);
      expect(b.sequence).toBe(1);
      expect(b.observedAt >= a.observedAt).toBe(true);
      engine.stats.recordBodyBytes(1000);
      engine.stats.recordPublication([{ size: 600, fresh: true }, { size: 400, fresh: false }]);
      const c = await snaps.build();
      expect(c.sequence).toBe(2);
      expect(c.traffic.byteReusePercent).toBe(40);
      // usedBytes is what svc stores, not the file system's use (400 * 4096 here).
      expect(c.storage).toEqual({ backend: 'fs', usedBytes: 7 * 1024 * 1024, availableBytes: 500 * 4096, minFreeBytes: 0, blobs: 3, blocks: 7, quarantinedBlocks: 0 });
      expect(c.durability).toEqual({ mode: 'relaxed', corruptBlocksDetected: 0 });
      // Concurrent callers share one read.
      const [d, e] = await Promise.all([snaps.build(), snaps.build()]);
      expect(d).toBe(e);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('derives the status from the checks and takes the GC state when there is one', async () => {
    const root = tempRoot();
    try {
      const engine = fakeEngine(root);
      let lastRun: unknown;
      const snaps = new OpsSnapshots(engine as any, { gc: { lastRun: () => lastRun, quarantinedBlocks: () => 4 } });
      expect((await snaps.build()).status).toBe('Ready');
      expect((await snaps.build()).durability).not.toHaveProperty('lastGc');
      lastRun = { finishedAt: '2026-01-01T00:00:00.000Z', deletedBlocks: 2 };
      const withGc = await snaps.build();
      expect(withGc.durability.lastGc).toEqual(lastRun);
      expect(withGc.storage.quarantinedBlocks).toBe(4);
      engine.stats.recordCorrupt('x');
      const degraded = await snaps.build();
      expect(degraded.status).toBe('Degraded');
      expect(degraded.summary).toContain('integrity');
      engine.health.readiness = async () => [
        { name: 'catalog', status: 'failed', latencyMs: 5000, detail: 'timed out after 5000 ms' } as any,
        { name: 'blockStore', status: 'ok', latencyMs: 0.25 },
      ];
      const down = await snaps.build();
      expect(down.status).toBe('Unavailable');
      expect(down.checks.find((c) => c.id === 'catalog')).toMatchObject({ status: 'failed', detail: expect.stringContaining('timed out') });
      expect(down.dependencies.find((d) => d.kind === 'catalog')).toEqual({ kind: 'catalog', status: 'failed', latencyMs: 5000 });
      // A GC that throws costs the field, never the snapshot.
      snaps.setGc({ lastRun: () => { throw new Error('boom'); } });
      expect((await snaps.build()).durability).not.toHaveProperty('lastGc');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('with a shared catalog: the cluster section, each node as its last heartbeat said, and the live totals (as the document describes it)', async () => {
    const root = tempRoot();
    try {
      const engine: any = fakeEngine(root);
      const at = '2026-11-27T10:00:00.000Z';
      const said = (requests: number) => ({
        at, health: 'ok',
        traffic: { requests, errors: 1, bytesIngested: 10, bytesServed: 20 },
        capacity: { workerThreads: 2, running: 0, queued: 0, transfersInFlight: 1, bufferedBytes: 0, limitBytes: 1024 },
      });
      engine.backend = { shared: {} };
      engine.health.lastReadiness = { at: Date.now(), failed: [] };
      engine.liveNodes.nodes = async () => [{ nodeId: engine.nodeId, lastSeenAt: at, address: '127.0.0.1:1' }, { nodeId: 'node-b', lastSeenAt: at, address: '127.0.0.1:2' }];
      engine.cluster = {
        list: async () => [
          { nodeId: engine.nodeId, address: '127.0.0.1:1', state: 'live', lastSeenAt: at, rootHolder: false, self: true },
          { nodeId: 'node-b', address: '127.0.0.1:2', state: 'live', lastSeenAt: at, rootHolder: true, rootHolderSince: at, self: false, summary: { ...said(5), health: { failed: ['s3'] } } },
          { nodeId: 'node-c', address: '', state: 'down', lastSeenAt: at, rootHolder: false, self: false, summary: said(7) },
        ],
      };
      const s = await new OpsSnapshots(engine, { statfs: async () => ({ blocks: 1000, bfree: 600, bavail: 500, bsize: 4096 }) }).build();
      expectConforms({ status: 200, headers: new Headers({ 'Content-Type': 'application/json; charset=utf-8', 'X-Request-Id': 'r-1' }), text: JSON.stringify(s) }, 'GET', '/api/ops/v1/snapshot');
      expect(s.placement.mode).toBe('multi-node');
      expect(s.cluster!.nodes.map((n) => [n.nodeId, n.state, n.health])).toEqual([
        [engine.nodeId, 'live', 'ok'],
        ['node-b', 'live', { failed: ['s3'] }],
        ['node-c', 'down', 'unknown'],
      ]);
      expect(s.cluster!.totals).toEqual({ nodes: 3, liveNodes: 2, requests: 5, errors: 1, bytesIngested: 10, bytesServed: 20, transfersInFlight: 1, workerThreads: 4 });
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('keeps the node id in the data directory', () => {
    const root = tempRoot();
    try {
      const id = nodeIdOf(root);
      expect(fs.readFileSync(`${root}/node-id`, 'utf8').trim()).toBe(id);
      expect(nodeIdOf(root)).toBe(id);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('OpsEvents subscribers (a scripted uWS response)', () => {
  /** Just what Exchange and OpsEvents use of an HttpResponse; `accept` decides what write() answers. */
  function fakeResponse() {
    const r = {
      accept: true,
      writes: [] as string[],
      status: '',
      headers: {} as Record<string, string>,
      aborted: undefined as undefined | (() => void),
      writable: undefined as undefined | ((offset: number) => boolean),
      closed: false,
      onAborted(h: () => void) { r.aborted = h; return r; },
      onWritable(h: (offset: number) => boolean) { r.writable = h; return r; },
      cork(cb: () => void) { cb(); return r; },
      writeStatus(s: string) { r.status = s; return r; },
      writeHeader(k: string, v: string) { r.headers[k] = v; return r; },
      write(text: string) { r.writes.push(text); return r.accept; },
      getWriteOffset() { return 0; },
      close() { r.closed = true; r.aborted?.(); return r; },
    };
    return r;
  }

  it('a backpressured subscriber gets nothing more until it drains, then only the newest event', async () => {
    let sequence = 0;
    let current: any;
    const snapshots = {
      get current() { return current; },
      async build() { current = { sequence: ++sequence, observedAt: new Date().toISOString() }; return current; },
      setGc() {},
    };
    const ctx: any = { engine: { stats: new Stats(), log: new Logger('silent'), config: { httpLingerBytes: 0 } }, metrics: { observeHttp() {} } };
    const events = new OpsEvents(snapshots as any, 3_600_000, ctx.engine.log);
    const res = fakeResponse();
    streamEvents(events, new Exchange(res as any, GET_REQUEST, '/api/ops/v1/events', apiSurface(ctx)));
    await until('the first event', async () => res.writes.some((w) => w.startsWith('id: 1\n')), 2000);
    expect(res.status).toBe('200 OK');
    expect(res.headers['Content-Type']).toBe('text/event-stream');
    expect(res.headers['Cache-Control']).toBe('no-store');
    expect(res.writes[1]).toMatch(/^id: 1\nevent: snapshot\ndata: \{.*\}\n\n$/);
    const refresh = () => (events as any).refresh() as Promise<unknown>;

    res.accept = false; // the socket is full from the next write on
    await refresh(); // event 2 goes into uWS's buffer; write() says so
    const written = res.writes.length;
    for (let i = 0; i < 10; i++) await refresh(); // 3..12: only the newest is kept
    expect(res.writes.length).toBe(written);
    expect(events.counters.dropped).toBe(9);
    // Writable while uWS still holds bytes: the probe comment fails, no event goes out.
    expect(res.writable!(0)).toBe(false);
    expect(res.writes.slice(written)).toEqual([':\n']);
    // Drained: the newest event, once, and nothing of 3..11.
    res.accept = true;
    expect(res.writable!(0)).toBe(true);
    const ids = res.writes.filter((w) => w.startsWith('id: ')).map((w) => Number(/^id: (\d+)/.exec(w)![1]));
    expect(ids).toEqual([1, 2, 12]);
    await refresh();
    expect(res.writes.at(-1)).toMatch(/^id: 13\n/);
    // Gone: removed, and the refresher stops with the last subscriber.
    res.aborted!();
    expect(events.subscriberCount).toBe(0);
    expect((events as any).timer).toBeUndefined();
    await refresh();
    expect(res.writes.at(-1)).toMatch(/^id: 13\n/);
  });
});

describe('OpsEvents with an unchanged state', () => {
  it('a subscriber joining gets the current snapshot at once even when nothing changed', async () => {
    let builds = 0;
    const fixed = { sequence: 1, observedAt: new Date().toISOString() };
    const snapshots = { current: fixed, async build() { builds++; return fixed; }, setGc() {} };
    const ctx: any = { engine: { stats: new Stats(), log: new Logger('silent'), config: { httpLingerBytes: 0 } }, metrics: { observeHttp() {} } };
    const events = new OpsEvents(snapshots as any, 10, ctx.engine.log);
    const responses = [fakeSse(), fakeSse()];
    streamEvents(events, new Exchange(responses[0] as any, GET_REQUEST, '/api/ops/v1/events', apiSurface(ctx)));
    await until('the first event', async () => responses[0].writes.some((w) => w.startsWith('id: 1\n')), 2000);
    await sleep(50); // several refreshes, all with sequence 1
    streamEvents(events, new Exchange(responses[1] as any, GET_REQUEST, '/api/ops/v1/events', apiSurface(ctx)));
    await until('the joining subscriber\'s event', async () => responses[1].writes.some((w) => w.startsWith('id: 1\n')), 2000);
    await sleep(50);
    expect(builds).toBeGreaterThan(3);
    // Each got sequence 1 once, however many refreshes found it unchanged.
    for (const r of responses) expect(r.writes.filter((w) => w.startsWith('id: '))).toHaveLength(1);
    for (const r of responses) r.aborted!();
    expect(events.subscriberCount).toBe(0);
  });
});

function fakeSse() {
  const r = {
    writes: [] as string[],
    aborted: undefined as undefined | (() => void),
    onAborted(h: () => void) { r.aborted = h; return r; },
    onWritable() { return r; },
    cork(cb: () => void) { cb(); return r; },
    writeStatus() { return r; },
    writeHeader() { return r; },
    write(text: string) { r.writes.push(text); return true; },
    close() { r.aborted?.(); return r; },
  };
  return r;
}

describe('GET /api/ops/v1/snapshot', () => {
  let server: TestServer;
  const root = tempRoot();
  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_OPS_REFRESH_MS: '20' }, root);
  });
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const snapshot = async () => {
    const res = await checkedFetch(`${server.url}/api/ops/v1/snapshot`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('cache-control')).toBe('no-store');
    return (await res.json()) as any;
  };

  it('has exactly the fields of decisions.md, each of its type', async () => {
    const s = await snapshot();
    expectSnapshotShape(s);
    expect(s.status).toBe('Ready');
    expect(s.durability.mode).toBe('relaxed');
    expect(s.checks.map((c: any) => c.id)).toEqual(expect.arrayContaining(['catalog', 'blockStore', 'diskSpace']));
  });

  it('moves its sequence on after an upload, with the traffic counted', async () => {
    const before = await snapshot();
    const body = seededBytes(3 * 1024 * 1024, 606);
    const up = await upload(server.url, body);
    expect(up.res.status).toBe(201);
    await sleep(30);
    const after = await snapshot();
    expect(after.sequence).toBeGreaterThan(before.sequence);
    expect(after.traffic.bytesIngested - before.traffic.bytesIngested).toBe(body.length);
    expect(after.traffic.freshBlocks).toBeGreaterThan(before.traffic.freshBlocks);
    expect(after.storage.blobs).toBe(before.storage.blobs + 1);
    expect(after.storage.blocks).toBeGreaterThan(before.storage.blocks);
    // The same bytes again: all blocks reused.
    await upload(server.url, body);
    await sleep(30);
    const again = await snapshot();
    expect(again.traffic.duplicateBlocks).toBeGreaterThan(after.traffic.duplicateBlocks);
    expect(again.traffic.byteReusePercent).toBeGreaterThan(0);
    // No tenant ids and no payload bytes: nothing but the listed fields (checked above) and no blob ids.
    expect(JSON.stringify(again)).not.toMatch(/sha-256:/);
  });

  it('carries the last garbage collection run once there is one', async () => {
    const gc = await checkedFetch(`${server.url}/api/ops/v1/gc?phase=run&apply=false`, { method: 'POST' });
    expect(gc.status).toBe(200);
    const report = (await gc.json()) as any;
    await sleep(30);
    const s = await snapshot();
    expectSnapshotShape(s);
    expect(s.durability.lastGc).toMatchObject({ runId: report.runId, phase: 'run', apply: false });
    expect(s.storage.quarantinedBlocks).toBe(0);
  });

  it('serves the dashboard and uPlot from fixed names, with types, caching and 304', async () => {
    const redirect = await fetch(`${server.url}/ops`, { redirect: 'manual' });
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('/ops/');
    const page = await fetch(`${server.url}/ops/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    expect(html).toContain('assets/uPlot.iife.min.js');
    expect(html).not.toMatch(/https?:\/\//); // nothing from elsewhere
    for (const [name, type, cache] of [
      ['uPlot.iife.min.js', 'text/javascript; charset=utf-8', 'public, max-age=86400'],
      ['uPlot.min.css', 'text/css; charset=utf-8', 'public, max-age=86400'],
      ['dashboard.js', 'text/javascript; charset=utf-8', 'no-cache'],
      ['dashboard.css', 'text/css; charset=utf-8', 'no-cache'],
    ]) {
      const res = await fetch(`${server.url}/ops/assets/${name}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(type);
      expect(res.headers.get('cache-control')).toBe(cache);
      const body = Buffer.from(await res.arrayBuffer());
      expect(body.length).toBeGreaterThan(500);
      const etag = res.headers.get('etag')!;
      expect((await fetch(`${server.url}/ops/assets/${name}`, { headers: { 'If-None-Match': etag } })).status).toBe(304);
      const head = await fetch(`${server.url}/ops/assets/${name}`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(Number(head.headers.get('content-length'))).toBe(body.length);
    }
    const uplot = await (await fetch(`${server.url}/ops/assets/uPlot.iife.min.js`)).text();
    expect(uplot).toBe(fs.readFileSync(new URL('../node_modules/uplot/dist/uPlot.iife.min.js', import.meta.url), 'utf8'));
    for (const bad of ['uPlot.cjs.js', '../package.json', '%2e%2e/package.json', 'nope.js']) {
      expect((await fetch(`${server.url}/ops/assets/${bad}`)).status).toBe(404);
    }
  });

  it('is Unavailable, naming the failed probe, when the block store is gone', async () => {
    const other = await startServer({ SVC_DURABILITY: 'relaxed', SVC_OPS_REFRESH_MS: '20' });
    try {
      fs.rmSync(`${other.root}/blocks`, { recursive: true, force: true });
      const s = (await (await checkedFetch(`${other.url}/api/ops/v1/snapshot`)).json()) as any;
      expectSnapshotShape(s);
      expect(s.status).toBe('Unavailable');
      expect(s.checks.find((c: any) => c.id === 'blockStore')).toMatchObject({ status: 'failed' });
      expect(s.dependencies.find((d: any) => d.kind === 'blockStore')).toMatchObject({ status: 'failed' });
      expect(s.summary).toMatch(/^Unavailable: .*blockStore/);
    } finally {
      await other.stop();
    }
  });

  it('keeps the node id across restarts of the same data directory', async () => {
    const first = (await snapshot()).placement.nodeId;
    await server.stop();
    server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_OPS_REFRESH_MS: '20' }, root);
    expect((await snapshot()).placement.nodeId).toBe(first);
  });
});

describe('GET /api/ops/v1/events', () => {
  it('sends the current snapshot at once, then each new one with a growing id', async () => {
    const server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_OPS_REFRESH_MS: '100' });
    const stream = follow(`${server.url}/api/ops/v1/events`);
    try {
      const started = Date.now();
      await stream.waitFor(1);
      expect(stream.events[0].at - started).toBeLessThan(2000);
      expect(stream.headers()!.get('content-type')).toBe('text/event-stream');
      expect(stream.headers()!.get('cache-control')).toBe('no-store');
      // Traffic meanwhile makes each refresh a new snapshot.
      await upload(server.url, seededBytes(200_000, 7));
      await stream.waitFor(4);
      let last = 0;
      for (const ev of stream.events) {
        expect(ev.event).toBe('snapshot');
        const s = JSON.parse(ev.data);
        expectSnapshotShape(s);
        expect(ev.id).toBe(String(s.sequence));
        expect(s.sequence).toBeGreaterThan(last);
        last = s.sequence;
      }
      expect(stream.events.some((e) => JSON.parse(e.data).traffic.bytesIngested === 200_000)).toBe(true);
      // A second subscriber gets the current snapshot at once too, from the same refresher.
      const second = follow(`${server.url}/api/ops/v1/events`);
      await second.waitFor(1, 2000);
      expect(Number(second.events[0].id)).toBeGreaterThanOrEqual(Number(stream.events[0].id));
      expect(await metric(server, 'svc_ops_subscribers')).toBe(2);
      await second.stop();
      await until('the second subscriber to be removed', async () => (await metric(server, 'svc_ops_subscribers')) === 1);
    } finally {
      await stream.stop();
      await server.stop();
    }
    expect(server.stderr()).not.toMatch(/"level":"error"/);
  });

  it('a subscriber that never reads costs bounded memory, does not slow others, and is removed when it goes', async () => {
    const server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_OPS_REFRESH_MS: '20' });
    let stuck: ChildProcess | net.Socket | undefined;
    const reader = follow(`${server.url}/api/ops/v1/events`);
    try {
      await reader.waitFor(1);
      // Warm the process (first uploads, JIT) before taking the baseline.
      for (let i = 0; i < 3; i++) await upload(server.url, seededBytes(300_000, 100 + i));
      await sleep(200);
      const rssBefore = server.rss();
      stuck = await neverReadingSubscriber(server.port);
      await until('the stuck subscriber', async () => (await metric(server, 'svc_ops_subscribers')) === 2);
      const eventsBefore = reader.events.length;
      // About 200 refreshes; each request changes the traffic counters, so every refresh is a new event.
      const latencies: number[] = [];
      const end = Date.now() + 200 * 20;
      let i = 0;
      while (Date.now() < end) {
        const t = performance.now();
        const res = await fetch(`${server.url}/api/health/live`);
        await res.arrayBuffer();
        latencies.push(performance.now() - t);
        if (++i % 50 === 0) await upload(server.url, seededBytes(100_000, 500 + i));
        await sleep(5);
      }
      latencies.sort((a, b) => a - b);
      const p95 = latencies[Math.floor(latencies.length * 0.95)];
      const refreshes = await metric(server, 'svc_ops_refreshes_total');
      const dropped = await metric(server, 'svc_ops_events_dropped_total');
      const rssAfter = server.rss();
      // The kernel takes a few MiB per socket before the server sees backpressure (then events are
      // dropped, as 'a backpressured subscriber ...' below shows); the process itself holds nothing more.
      expect(refreshes).toBeGreaterThan(100);
      expect(dropped).toBeGreaterThanOrEqual(0);
      expect(rssAfter - rssBefore).toBeLessThan(40 * 1024 * 1024);
      // The reading subscriber kept getting events and other requests stayed fast.
      expect(reader.events.length - eventsBefore).toBeGreaterThan(50);
      expect(p95).toBeLessThan(100);
      // It goes away: removed, nothing logged as an error.
      if (stuck instanceof net.Socket) stuck.destroy();
      else stuck.kill('SIGKILL');
      await until('the stuck subscriber to be removed', async () => (await metric(server, 'svc_ops_subscribers')) === 1);
    } finally {
      if (stuck instanceof net.Socket) stuck.destroy();
      else stuck?.kill('SIGKILL');
      await reader.stop();
      await server.stop();
    }
    expect(server.stderr()).not.toMatch(/"level":"error"/);
  });
});

/**
 * A client that sends the request and never reads. With python3, its receive buffer is made
 * small (SO_RCVBUF before connect) so the server's socket fills after a few events; otherwise a
 * paused Node socket (the kernel's larger buffers take longer to fill).
 */
async function neverReadingSubscriber(port: number): Promise<ChildProcess | net.Socket> {
  const request = 'GET /api/ops/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n';
  if (pythonHas('socket')) {
    const script = [
      'import socket, sys, time',
      's = socket.socket(socket.AF_INET, socket.SOCK_STREAM)',
      's.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)',
      `s.connect(("127.0.0.1", ${port}))`,
      `s.sendall(${JSON.stringify(request)}.encode())`,
      'print("sent", flush=True)',
      'time.sleep(600)',
    ].join('\n');
    const child = spawn('python3', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout!.once('data', () => resolve());
      child.once('exit', (code) => reject(new Error(`python client exited with ${code}`)));
    });
    return child;
  }
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.pause();
      socket.write(request, () => resolve(socket));
    });
    socket.on('error', () => {});
  });
}
