// The operator event stream (`GET /api/ops/v1/events`): one refresher of the ops snapshot for
// every subscriber, and per subscriber at most one event waiting. The server writes it out
// (server/ops-api.ts); this module owns its timers and subscribers.

import type { Logger } from '../base/log.js';
import type { GcState, OpsSnapshot, OpsSnapshots } from './snapshot.js';

/** Comment lines keep idle streams open through proxies. */
const KEEP_ALIVE_MS = 15_000;
/** A subscriber that has taken nothing for this long is closed (a dead peer that never sent RST). */
const STALLED_MS = 120_000;
/** An SSE comment: written when the socket drains, to learn whether uWS's buffer is empty. */
const PROBE = ':\n';

/** Where a subscriber's events go: the server's event stream. */
export interface EventSink {
  /** Writes `text`; false when the transport holds bytes it could not send yet. */
  write(text: string): boolean;
  /** Ends the stream (a stalled subscriber); the server then calls `gone`. */
  close(): void;
}

/** What the server tells the stream about one subscriber. */
export interface Subscription {
  /** The transport can take bytes again; false while it still cannot. */
  drained(): boolean;
  /** The subscriber went away. */
  gone(): void;
}

interface Subscriber {
  sink: EventSink;
  gone: boolean;
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
    private readonly log: Logger,
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

  /**
   * A new subscriber whose stream has begun (headers sent): it gets the `retry:` line, then the
   * current snapshot at once (the shared one when it is recent, else a new read), then each new one.
   */
  subscribe(sink: EventSink): Subscription {
    const s: Subscriber = { sink, gone: false, blocked: false, blockedSince: 0, pending: null, lastSequence: 0 };
    // The reconnection delay is one refresh period or more.
    if (!sink.write(`retry: ${Math.max(1000, this.refreshMs)}\n\n`)) this.block(s);
    this.subscribers.add(s);
    this.start();
    if (this.frame && Date.now() - this.lastBuiltAt < this.refreshMs) this.deliver(s);
    else this.tick();
    return { drained: () => this.drained(s), gone: () => this.remove(s) };
  }

  private block(s: Subscriber): void {
    s.blocked = true;
    s.blockedSince = Date.now();
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
          if (!this.refreshFailed) this.log.error('ops snapshot failed', { err: String((err as Error)?.stack ?? err) });
          this.refreshFailed = true;
        },
      );
    }
    const now = Date.now();
    for (const s of this.subscribers) {
      if (s.blocked && now - s.blockedSince > STALLED_MS) s.sink.close(); // the server then calls gone()
    }
  }

  private remove(s: Subscriber): void {
    s.gone = true;
    s.pending = null;
    this.subscribers.delete(s);
    if (this.subscribers.size === 0) this.stop();
  }

  /** Sends the newest frame unless this subscriber has it or cannot take it now. */
  private deliver(s: Subscriber): void {
    const frame = this.frame;
    if (!frame || frame.sequence === s.lastSequence || s.gone) return;
    s.lastSequence = frame.sequence;
    if (s.blocked) {
      if (s.pending !== null) this.counters.dropped++;
      s.pending = frame.text;
      return;
    }
    this.send(s, frame.text);
  }

  private send(s: Subscriber, text: string): void {
    this.counters.sent++;
    if (!s.sink.write(text)) this.block(s);
  }

  /**
   * The transport took bytes. uWS drains its own buffer only when written to, so write a two-byte
   * comment: it succeeds only once everything before it has gone out. Then the pending event.
   */
  private drained(s: Subscriber): boolean {
    if (!s.blocked || s.gone) return true;
    if (!s.sink.write(PROBE)) return false;
    s.blocked = false;
    const pending = s.pending;
    s.pending = null;
    if (pending !== null) this.send(s, pending);
    return true;
  }

  private keepAlive(): void {
    for (const s of this.subscribers) {
      if (s.blocked || s.gone) continue;
      if (!s.sink.write(': keep-alive\n\n')) this.block(s);
    }
  }
}
