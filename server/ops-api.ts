// The operator endpoints: health, stats, Prometheus metrics, the ops snapshot, its history and
// event stream, and the dashboard's files.

import { Gauge } from 'prom-client';
import { type EventSink, OpsEvents, type Subscription } from '../engine/ops/index.js';
import { OpsSnapshots, StreamBound } from '../engine/ops/index.js';
import { VERSION } from '../engine/base/version.js';
import type { ServerContext } from './server-context.js';
import { dashboardAsset } from './dashboard/assets.js';
import { type Exchange, header, type RequestHead } from './exchange.js';
import type { Router } from './router.js';
import { holds } from '../engine/auth/index.js';

/** The operator endpoints' capability (health stays public). */
const OBSERVE = { capability: 'observability.read' };

export function mountOpsApi(router: Router, { engine, metrics, health }: ServerContext): void {
  /**
   * Whether a health answer may carry its details: always with security off; with security on
   * only to a token that holds observability.read (the checks name dependencies, and their
   * failures hosts, ports, databases and users). Health stays public: without such a token the
   * answer is the status alone, never a 401.
   */
  const detailsFor = (req: RequestHead): boolean | Promise<boolean> => {
    if (!engine.config.securityEnabled) return true;
    const authorization = header(req, 'authorization');
    if (authorization === undefined) return false;
    const known = engine.tokens.cached(authorization);
    if (known) return holds(known, OBSERVE.capability);
    return engine.tokens.verify(authorization).then((p) => holds(p, OBSERVE.capability), () => false);
  };

  router.on('GET', '/api/health/live', async ({ ex, req }) => {
    const details = await detailsFor(req);
    ex.json(200, details ? { status: 'ok', version: VERSION, uptimeSeconds: engine.stats.uptimeSeconds() } : { status: 'ok' });
  });

  router.on('GET', '/api/health/ready', async ({ ex, req }) => {
    const details = detailsFor(req);
    const checks = await health.readiness();
    const ready = checks.every((c) => c.status === 'ok');
    // Below the free-space floor the server still serves reads, and a node whose clock strays
    // from PostgreSQL's still judges leases by PostgreSQL's: degraded, not unready.
    const warnings = [health.spaceCheck(), health.clockCheck()].filter((c) => c !== undefined);
    const status = !ready ? 'not_ready' : warnings.every((c) => c.status === 'ok') ? 'ready' : 'degraded';
    ex.json(ready ? 200 : 503, (await details) ? { status, checks: [...checks, ...warnings] } : { status });
  });

  router.on('GET', '/api/stats', ({ ex }) => ex.json(200, engine.stats.toJSON()), OBSERVE);

  router.on('GET', '/metrics', async ({ ex }) => ex.send(200, { 'Content-Type': metrics.registry.contentType }, await metrics.render()), OBSERVE);

  const events = new OpsEvents(new OpsSnapshots(engine, { gc: engine.gc }), engine.config.opsRefreshMs, engine.log);
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({ name, help, registers: [metrics.registry], collect() { this.set(read()); } });
  gauge('svc_ops_subscribers', 'Open /api/ops/v1/events streams.', () => events.subscriberCount);
  gauge('svc_ops_refreshes_total', 'Operator snapshots read by the shared refresher or a GET.', () => events.counters.refreshes);
  gauge('svc_ops_events_sent_total', 'Snapshot events written to subscribers.', () => events.counters.sent);
  gauge('svc_ops_events_dropped_total', 'Snapshot events a backpressured subscriber never got (a newer one replaced them).', () => events.counters.dropped);

  router.on('GET', '/api/ops/v1/snapshot', async ({ ex }) => ex.json(200, await events.fresh(), { 'Cache-Control': 'no-store' }), OBSERVE);

  // The last ten minutes of traffic, for a chart that starts filled (the event stream carries
  // snapshots only).
  router.on('GET', '/api/ops/v1/history', ({ ex }) => ex.json(200, engine.traffic.recent(), { 'Cache-Control': 'no-store' }), OBSERVE);

  // With security on, each principal holds at most SVC_OPS_MAX_STREAMS streams (429 past it).
  const streams = new StreamBound(engine.config.opsMaxStreams);
  router.on('GET', '/api/ops/v1/events', ({ ex, principal }) => {
    const release = principal ? streams.take(`${principal.tenant}\0${principal.subject}`) : undefined;
    streamEvents(events, ex, release);
  }, OBSERVE);

  // The dashboard: a page of our own and uPlot's files, all served from this process.
  router.on('GET', '/ops', ({ ex }) => ex.send(308, { Location: '/ops/', 'Content-Type': 'text/plain; charset=utf-8' }, 'see /ops/\n'));
  router.on(['GET', 'HEAD'], '/ops/*', ({ ex, req }) => {
    const found = dashboardAsset(req.getUrl());
    if (!found) return ex.json(404, { error: 'not_found', message: `No route for ${ex.method} ${req.getUrl()}` });
    const headers = { 'Content-Type': found.contentType, 'Cache-Control': found.cacheControl, ETag: found.etag, 'X-Content-Type-Options': 'nosniff' };
    if (ifNoneMatch(req, found.etag)) return ex.send(304, { ETag: found.etag, 'Cache-Control': found.cacheControl });
    ex.send(200, headers, found.body);
  });
}

/**
 * Writes the event stream to one subscriber: the headers here (CORS: the router's grant, as for
 * every route), the events from engine/ops/events.ts. `closed` runs once the stream ends.
 */
export function streamEvents(events: OpsEvents, ex: Exchange, closed?: () => void): void {
  const res = ex.res;
  ex.done = true; // the stream never ends by itself: the exchange must not answer it again
  const sink: EventSink = {
    write(text) {
      let ok = true;
      res.cork(() => {
        ok = res.write(text);
      });
      return ok;
    },
    close: () => {
      closed?.();
      res.close();
    },
  };
  let subscription: Subscription | undefined;
  res.cork(() => {
    ex.head(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
    // The first write (the subscription's retry line) sends the headers.
    subscription = events.subscribe(sink);
  });
  ex.onAbort(() => {
    closed?.();
    subscription!.gone();
  });
  res.onWritable(() => subscription!.drained());
}

function ifNoneMatch(req: RequestHead, etag: string): boolean {
  const v = header(req, 'if-none-match');
  return v !== undefined && v.split(',').some((t) => t.trim() === etag || t.trim() === '*');
}

