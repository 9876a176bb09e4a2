// SVC_GC_INTERVAL: a run every interval (off when 0), the next one armed when the last has ended,
// so runs never overlap and a slow run delays the next instead of stacking up.
import type { Logger } from '../base/log.js';

export class GcSchedule {
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** When the next run starts (ms), while armed. */
  nextAt?: number;

  constructor(
    private readonly intervalMs: number,
    private readonly runOnce: () => Promise<unknown>,
    private readonly log: Logger,
  ) {}

  start(): void {
    if (this.intervalMs <= 0 || this.stopped) return;
    this.nextAt = Date.now() + this.intervalMs;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.runOnce()
        .catch((err) => this.log.error('gc: scheduled run failed', { err: String(err) }))
        .finally(() => this.start());
    }, this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.nextAt = undefined;
  }
}
