// The last minutes of traffic, sampled from the counters whether or not anyone watches, so an
// operator who opens the dashboard sees them at once instead of an empty chart.
import type { Stats } from './stats.js';

/** Bytes moved in one interval that ended at `at` (ms since the epoch). */
interface TrafficPoint {
  at: number;
  ingestedBytes: number;
  servedBytes: number;
}

/** How far back the history goes, and the most points it holds. */
const KEEP_MS = 10 * 60_000;
const MAX_POINTS = 600;

export class TrafficHistory {
  readonly intervalMs: number;
  private readonly points: TrafficPoint[] = [];
  private last: { ingested: number; served: number };
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly stats: Stats,
    /** The dashboard's refresh period: the history is no finer than the live chart, and holds at most MAX_POINTS. */
    refreshMs: number,
  ) {
    this.intervalMs = Math.max(refreshMs, Math.ceil(KEEP_MS / MAX_POINTS));
    this.last = { ingested: stats.bytesIngested, served: stats.bytesServed };
  }

  start(): void {
    this.timer ??= setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The points of the last ten minutes, oldest first. */
  recent(): { intervalMs: number; points: TrafficPoint[] } {
    return { intervalMs: this.intervalMs, points: [...this.points] };
  }

  private sample(): void {
    const { bytesIngested, bytesServed } = this.stats;
    this.points.push({ at: Date.now(), ingestedBytes: bytesIngested - this.last.ingested, servedBytes: bytesServed - this.last.served });
    this.last = { ingested: bytesIngested, served: bytesServed };
    if (this.points.length > MAX_POINTS) this.points.shift();
  }
}
