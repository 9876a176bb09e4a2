import { Gauge } from 'prom-client';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { type GcState, type OpsSnapshot, OpsSnapshots } from '../engine/ops/snapshot.js';
import { dashboardAsset } from './dashboard/assets.js';
import { Exchange, header, type ServerContext } from './http.js';
import { VERSION } from '../engine/version.js';


export interface OpsApiOptions {
  /** Garbage collection's state for the snapshot (`durability.lastGc`, `storage.quarantinedBlocks`). */
  gc?: GcState;
}

export function mountOpsApi(app: TemplatedApp, ctx: ServerContext, options: OpsApiOptions = {}): OpsEvents {
  const { engine, metrics } = ctx;
  const ex = (res: HttpResponse, req: HttpRequest, path: string) => new Exchange(res, req, path, ctx);

  app.get('/api/health/live', (res, req) => {
    ex(res, req, '/api/health/live').json(200, { status: 'ok', version: VERSION, uptimeSeconds: engine.stats.uptimeSeconds() });
  });

  app.get('/api/health/ready', (res, req) => {
    const e = ex(res, req, '/api/health/ready');
    engine.readiness().then(
      (checks) => {
        const ready = checks.every((c) => c.status === 'ok');
        // Below the free-space floor the server still serves reads: degraded, not unready.
        const space = engine.spaceCheck();
        const status = !ready ? 'not_ready' : space.status === 'ok' ? 'ready' : 'degraded';
        e.json(ready ? 200 : 503, { status, checks: [...checks, space] });
      },
      (err) => e.error(err),
    );
  });

  app.get('/api/stats', (res, req) => {
    ex(res, req, '/api/stats').json(200, engine.stats.toJSON());
  });

  app.get('/metrics', (res, req) => {
    const e = ex(res, req, '/metrics');
    metrics.render().then(
      (text) => e.send(200, { 'Content-Type': metrics.registry.contentType }, text),
      (err) => e.error(err),
    );
  });

  const events = new OpsEvents(new OpsSnapshots(engine, { gc: options.gc ?? engine.gc }), engine.config.opsRefreshMs, ctx);
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({ name, help, registers: [metrics.registry], collect() { this.set(read()); } });
  gauge('svc_ops_subscribers', 'Open /api/ops/v1/events streams.', () => events.subscriberCount);
  gauge('svc_ops_refreshes_total', 'Operator snapshots read by the shared refresher or a GET.', () => events.counters.refreshes);
  gauge('svc_ops_events_sent_total', 'Snapshot events written to subscribers.', () => events.counters.sent);
  gauge('svc_ops_events_dropped_total', 'Snapshot events a backpressured subscriber never got (a newer one replaced them).', () => events.counters.dropped);

  app.get('/api/ops/v1/snapshot', (res, req) => {
    const e = ex(res, req, '/api/ops/v1/snapshot');
    events.fresh().then(
      (snapshot) => e.json(200, snapshot, { 'Cache-Control': 'no-store' }),
      (err) => e.error(err),
    );
  });

  // The last ten minutes of traffic, for a chart that starts filled (the event stream carries
  // snapshots only).
  app.get('/api/ops/v1/history', (res, req) => {
    ex(res, req, '/api/ops/v1/history').json(200, engine.traffic.recent(), { 'Cache-Control': 'no-store' });
  });

  app.get('/api/ops/v1/events', (res, req) => {
    events.subscribe(ex(res, req, '/api/ops/v1/events'));
  });

  // The dashboard: a page of our own and uPlot's files, all served from this process.
  app.get('/ops', (res, req) => redirectToDashboard(res, req, ctx));
  const asset = (res: HttpResponse, req: HttpRequest) => {
    const e = new Exchange(res, req, '/ops/*', ctx);
    const found = dashboardAsset(req.getUrl());
    if (!found) return e.json(404, { error: 'not_found', message: `No route for ${e.method} ${req.getUrl()}` });
    const headers = { 'Content-Type': found.contentType, 'Cache-Control': found.cacheControl, ETag: found.etag, 'X-Content-Type-Options': 'nosniff' };
    if (ifNoneMatch(req, found.etag)) return e.send(304, { ETag: found.etag, 'Cache-Control': found.cacheControl });
    e.send(200, headers, found.body);
  };
  app.get('/ops/*', asset);
  app.head('/ops/*', asset);

  return events;
}

/** 308 to /ops/: the page's relative URLs need the slash. */
function redirectToDashboard(res: HttpResponse, req: HttpRequest, ctx: ServerContext): void {
  new Exchange(res, req, '/ops', ctx).send(308, { Location: '/ops/', 'Content-Type': 'text/plain; charset=utf-8' }, 'see /ops/\n');
}

function ifNoneMatch(req: HttpRequest, etag: string): boolean {
  const v = header(req, 'if-none-match');
  return v !== undefined && v.split(',').some((t) => t.trim() === etag || t.trim() === '*');
}

/** Comment lines keep idle streams open through proxies. */
const KEEP_ALIVE_MS = 15_000;
/** A subscriber that has taken nothing for this long is closed (a dead peer that never sent RST). */
const STALLED_MS = 120_000;
/** An SSE comment: written when the socket drains, to learn whether uWS's buffer is empty. */
const PROBE = ':\n';

interface Subscriber {
  ex: Exchange;
  /** uWS holds bytes it could not send yet: write nothing more until it drains. */
  blocked: boolean;
  blockedSince: number;
  /** The newest event not sent because the socket was blocked (older ones are dropped). */
  pending: string | null;
  lastSequence: number;
}

/**
 * One refresher for every subscriber: while anyone listens, the snapshot is read once per
 * `SVC_OPS_REFRESH_MS` and each new one (a new sequence) is sent to all. A subscriber whose
 * socket is backpressured gets nothing more until it drains, then only the newest event: per
 * subscriber at most one event waits in uWS's buffer and one (shared) event string is pending.
 */
export class OpsEvents {
  private readonly subscribers = new Set<Subscriber>();
  private timer: NodeJS.Timeout | undefined;
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private frame: { sequence: number; text: string } | undefined;
  private lastBuiltAt = 0;
  /** Events sent (count of writes) and dropped (replaced while pending): for tests and metrics. */
  readonly counters = { sent: 0, dropped: 0, refreshes: 0 };
  private refreshFailed = false;

  constructor(
    readonly snapshots: OpsSnapshots,
    readonly refreshMs: number,
    private readonly ctx: ServerContext,
  ) {}

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  setGc(gc: GcState | undefined): void {
    this.snapshots.setGc(gc);
  }

  /** A snapshot no older than the refresh period: the shared one when recent, else a new read. */
  async fresh(): Promise<OpsSnapshot> {
    const current = this.snapshots.current;
    if (current && Date.now() - this.lastBuiltAt < this.refreshMs) return current;
    return this.refresh();
  }

  private refreshing: Promise<OpsSnapshot> | undefined;

  /** One read at a time, shared by the timer and GETs. */
  private refresh(): Promise<OpsSnapshot> {
    this.refreshing ??= this.read().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  private async read(): Promise<OpsSnapshot> {
    const snapshot = await this.snapshots.build();
    this.lastBuiltAt = Date.now();
    this.counters.refreshes++;
    if (!this.frame || this.frame.sequence !== snapshot.sequence) {
      this.frame = { sequence: snapshot.sequence, text: `id: ${snapshot.sequence}\nevent: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n` };
    }
    // Subscribers that have this sequence get nothing; one that joined meanwhile gets it now.
    for (const s of this.subscribers) this.deliver(s);
    return snapshot;
  }

  subscribe(ex: Exchange): void {
    const s: Subscriber = { ex, blocked: false, blockedSince: 0, pending: null, lastSequence: 0 };
    const res = ex.res;
    ex.onAbort(() => this.remove(s));
    res.onWritable(() => this.drained(s));
    ex.done = true; // the stream never ends by itself: Exchange must not answer it again
    res.cork(() => {
      ex.head(200, {
        'Content-Type': 'text/event-stream',
        'Cache-Control': 'no-store',
        'X-Accel-Buffering': 'no',
        'Access-Control-Allow-Origin': '*',
      });
      // The first write sends the headers; the reconnection delay is one refresh period or more.
      if (!res.write(`retry: ${Math.max(1000, this.refreshMs)}\n\n`)) {
        s.blocked = true;
        s.blockedSince = Date.now();
      }
    });
    this.subscribers.add(s);
    this.start();
    // The current snapshot at once: the shared one when it is recent, else a new read.
    if (this.frame && Date.now() - this.lastBuiltAt < this.refreshMs) this.deliver(s);
    else this.tick();
  }

  private start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), this.refreshMs);
    this.keepAliveTimer = setInterval(() => this.keepAlive(), KEEP_ALIVE_MS);
    this.timer.unref();
    this.keepAliveTimer.unref();
  }

  private stop(): void {
    clearInterval(this.timer);
    clearInterval(this.keepAliveTimer);
    this.timer = undefined;
    this.keepAliveTimer = undefined;
  }

  /** A tick that finds the previous read still running is skipped. */
  private tick(): void {
    if (!this.refreshing) {
      this.refresh().then(
        () => {
          this.refreshFailed = false;
        },
        (err) => {
          if (!this.refreshFailed) this.ctx.engine.log.error('ops snapshot failed', { err: String((err as Error)?.stack ?? err) });
          this.refreshFailed = true;
        },
      );
    }
    const now = Date.now();
    for (const s of this.subscribers) {
      if (s.blocked && now - s.blockedSince > STALLED_MS) s.ex.res.close(); // onAborted removes it
    }
  }

  private remove(s: Subscriber): void {
    s.pending = null;
    this.subscribers.delete(s);
    if (this.subscribers.size === 0) this.stop();
  }

  /** Sends the newest frame unless this subscriber has it or cannot take it now. */
  private deliver(s: Subscriber): void {
    const frame = this.frame;
    if (!frame || frame.sequence === s.lastSequence || s.ex.aborted) return;
    s.lastSequence = frame.sequence;
    if (s.blocked) {
      if (s.pending !== null) this.counters.dropped++;
      s.pending = frame.text;
      return;
    }
    this.send(s, frame.text);
  }

  private send(s: Subscriber, text: string): void {
    let ok = true;
    s.ex.res.cork(() => {
      ok = s.ex.res.write(text);
    });
    this.counters.sent++;
    if (!ok) {
      s.blocked = true;
      s.blockedSince = Date.now();
    }
  }

  /**
   * The socket took bytes. uWS drains its own buffer only when we write, so write a two-byte
   * comment: it succeeds only once everything before it has gone out. Then the pending event.
   */
  private drained(s: Subscriber): boolean {
    if (!s.blocked || s.ex.aborted) return true;
    let ok = true;
    s.ex.res.cork(() => {
      ok = s.ex.res.write(PROBE);
    });
    if (!ok) return false;
    s.blocked = false;
    const pending = s.pending;
    s.pending = null;
    if (pending !== null) this.send(s, pending);
    return true;
  }

  private keepAlive(): void {
    for (const s of this.subscribers) {
      if (s.blocked || s.ex.aborted) continue;
      let ok = true;
      s.ex.res.cork(() => {
        ok = s.ex.res.write(': keep-alive\n\n');
      });
      if (!ok) {
        s.blocked = true;
        s.blockedSince = Date.now();
      }
    }
  }
}
