// This node's health as readiness reports it (GET /api/health/ready, the snapshot, the heartbeat's
// summary): each of the backend's dependencies probed within SVC_HEALTH_TIMEOUT, free space
// against SVC_MIN_FREE_SPACE, and on pg-s3 this node's clock against the database's. With a
// shared catalog the dependencies are probed every HEALTH_PROBE_MS, so that the heartbeats say
// how this node is even when nobody asks it.
import { type Clock, ReferenceClock } from '../base/clock.js';
import { CLOCK_SKEW_WARN_MS } from '../base/limits.js';
import type { Dependency, DiskSpace } from '../store/index.js';

/** One dependency probe of readiness (catalog, block store, PostgreSQL, S3). */
export interface HealthCheck {
  name: string;
  status: 'ok' | 'failed';
  latencyMs: number;
  detail?: string;
}

export interface HealthDeps {
  dependencies: readonly Dependency[];
  /** SVC_HEALTH_TIMEOUT: each probe's bound. */
  timeoutMs: number;
  space: Pick<DiskSpace, 'shortage'>;
  /** The clock the cluster's records are judged by: a ReferenceClock (pg-s3) is checked against this node's. */
  clock: Clock;
}

/** How often a node of a shared catalog probes its dependencies for its heartbeats. */
const HEALTH_PROBE_MS = 5000;

/** A check that warns rather than fails: readiness says `degraded`. */
export type WarningCheck = Omit<HealthCheck, 'status'> & { status: 'ok' | 'warn' };

export class Health {
  /** The last readiness checks' outcome (the heartbeat's summary; with a shared catalog probed every 5 s). */
  lastReadiness?: { at: number; failed: string[] };
  private probe?: NodeJS.Timeout;

  constructor(private readonly deps: HealthDeps) {}

  /** Readiness: each of the backend's dependencies (catalog and block store), each bounded by the health timeout. */
  async readiness(): Promise<HealthCheck[]> {
    const checks = await Promise.all(this.deps.dependencies.map((d) => this.check(d.name, () => d.probe())));
    this.lastReadiness = { at: Date.now(), failed: checks.filter((c) => c.status !== 'ok').map((c) => c.name) };
    return checks;
  }

  /** Probes now and every HEALTH_PROBE_MS until stop() (the health this node tells the others at its heartbeats). */
  startProbe(): void {
    this.probe = setInterval(() => void this.readiness().catch(() => {}), HEALTH_PROBE_MS);
    this.probe.unref();
    void this.readiness().catch(() => {});
  }

  stop(): void {
    clearInterval(this.probe);
  }

  /** Free space against SVC_MIN_FREE_SPACE: `warn` below it (uploads are refused, reads go on). */
  spaceCheck(): WarningCheck {
    const started = performance.now();
    const shortage = this.deps.space.shortage();
    const latencyMs = round(performance.now() - started);
    return shortage ? { name: 'diskSpace', status: 'warn', latencyMs, detail: `${shortage}: uploads are refused (507)` } : { name: 'diskSpace', status: 'ok', latencyMs };
  }

  /**
   * On pg-s3, this node's clock against the database's, which judges leases, retries and expiry:
   * `warn` (readiness: degraded) past CLOCK_SKEW_WARN_MS, naming the offset; undefined elsewhere.
   */
  clockCheck(): (WarningCheck & { offsetMs: number }) | undefined {
    const { clock } = this.deps;
    if (!(clock instanceof ReferenceClock)) return undefined;
    const offset = clock.offsetMs();
    if (offset === undefined) return undefined;
    const offsetMs = Math.round(offset);
    const seconds = `${(Math.abs(offset) / 1000).toFixed(1)} s`;
    const uncertainty = `±${((clock.roundTripMs() ?? 0) / 2).toFixed(1)} ms`;
    if (Math.abs(offset) <= CLOCK_SKEW_WARN_MS) return { name: 'clock', status: 'ok', latencyMs: 0, offsetMs, detail: `this node's clock is within ${seconds} of PostgreSQL's (${uncertainty})` };
    return {
      name: 'clock', status: 'warn', latencyMs: 0, offsetMs,
      detail: `this node's clock is ${seconds} ${offset > 0 ? 'ahead of' : 'behind'} PostgreSQL's (more than ${CLOCK_SKEW_WARN_MS / 1000} s): leases, retries and expiry follow PostgreSQL's clock, but this node's logs and tokens do not; repair its time synchronization`,
    };
  }

  private async check(name: string, probe: () => Promise<void>): Promise<HealthCheck> {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${this.deps.timeoutMs} ms`)), this.deps.timeoutMs);
    });
    try {
      await Promise.race([probe(), timeout]);
      return { name, status: 'ok', latencyMs: round(performance.now() - started) };
    } catch (err) {
      return { name, status: 'failed', latencyMs: round(performance.now() - started), detail: (err as Error).message };
    } finally {
      clearTimeout(timer);
    }
  }
}

const round = (ms: number) => Math.round(ms * 1000) / 1000;
