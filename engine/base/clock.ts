// The time by which leases, retries, expiry and nodes' TTLs are judged. One clock per process,
// handed to every module that compares times other nodes wrote (the job queue, upload sessions):
// the system clock where the data is this node's alone (fs), a ReferenceClock following the
// shared database's clock where nodes share the records (pg-s3: decisions §5), so that a node
// whose clock runs ahead neither takes over live leases nor skips a retry's backoff.

/** Milliseconds since the epoch, as the cluster counts them. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * One reading of the reference: its value (ms since the epoch, fractions allowed) and when the
 * request was sent and its answer received (this process's performance.now()). The reader times
 * the round trip itself, so that waiting for a connection is no part of it.
 */
export interface ClockReading {
  reference: number;
  sent: number;
  received: number;
}

/** A reading as followed: the reference's value, the moment (performance.now()) it stood so, and its round trip. */
interface Sample {
  reference: number;
  at: number;
  roundTripMs: number;
}

/** Samples kept; the one with the shortest round trip is followed (a slow answer says little about when it was read). */
const SAMPLES_KEPT = 4;

/**
 * A clock that follows a reference clock without asking it per call. A sample reads the reference
 * once and takes the reading to stand at the middle of the round trip (so its error is at most
 * half the round trip); `now()` is the best recent sample moved on by this process's monotonic
 * clock (`performance.now()`), so a step of the system clock changes nothing between samples.
 * `now()` never goes back: when a better sample puts the reference earlier, it holds still until
 * the reference catches up (a due time stamped just before then is not pushed into the future).
 * Before the first sample it is the system clock.
 */
export class ReferenceClock implements Clock {
  private readonly samples: Sample[] = [];
  private best?: Sample;
  private last = 0;
  private timer?: NodeJS.Timeout;

  /**
   * `read`: one reading of the reference (one round trip). `intervalMs`: how often start()
   * samples again; `onError`: a failed periodic sample (the last good one stays).
   */
  constructor(
    private readonly read: () => Promise<ClockReading>,
    private readonly options: { intervalMs: number; onError?: (err: unknown) => void },
  ) {}

  now(): number {
    const best = this.best;
    if (!best) return Date.now();
    const now = Math.floor(best.reference + (performance.now() - best.at));
    if (now > this.last) this.last = now;
    return this.last;
  }

  /** This process's system clock minus the reference (ms; positive: ahead); undefined before the first sample. */
  offsetMs(): number | undefined {
    return this.best ? Date.now() - (this.best.reference + (performance.now() - this.best.at)) : undefined;
  }

  /** The round trip of the sample followed (its reading's error is at most half of it); undefined before the first. */
  roundTripMs(): number | undefined {
    return this.best?.roundTripMs;
  }

  /** Reads the reference once. */
  async sample(): Promise<void> {
    const { reference, sent, received } = await this.read();
    if (!Number.isFinite(reference) || !(received >= sent)) throw new Error(`the reference clock read ${reference} (sent ${sent}, received ${received})`);
    this.samples.push({ reference, at: (sent + received) / 2, roundTripMs: received - sent });
    if (this.samples.length > SAMPLES_KEPT) this.samples.shift();
    this.best = this.samples.reduce((a, b) => (b.roundTripMs <= a.roundTripMs ? b : a));
  }

  /** Samples now (awaited: its failure is the caller's) and then every intervalMs until stop(). */
  async start(): Promise<void> {
    await this.sample();
    this.timer = setInterval(() => this.sample().catch((err) => this.options.onError?.(err)), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
