// Prometheus metrics of the model runtime listener, with the reference runtime's names, in the
// process's one registry (engine/ops/metrics.ts). The blob listener's /metrics shows them with
// the rest; the model listener's /metrics (no authentication on that surface) shows only these.

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ModelService } from '../engine/models/index.js';

/** Only these operations are measured, as in the reference runtime. */
const MEASURED = new Set(['load', 'unload', 'transform', 'rank']);

export class ModelMetrics {
  readonly registry: Registry;
  private readonly duration: Histogram<'endpoint' | 'status'>;
  private readonly responses: Counter<'service' | 'status'>;
  private readonly failures: Counter<'service' | 'error'>;

  constructor(service: ModelService, registry: Registry) {
    this.registry = registry;
    this.duration = new Histogram({
      name: 'http_requests_duration_millis',
      help: 'Duration of model runtime requests in milliseconds',
      labelNames: ['endpoint', 'status'] as const,
      buckets: [10, 25, 50, 75, 85, 95, 100, 125, 150, 175, 200, 225, 250, 275, 300, 325, 350, 400, 450, 500, 600, 700, 1000, 2000, 3000, 5000, 10000],
      registers: [this.registry],
    });
    this.responses = new Counter({
      name: 'total_reponse_count',
      help: 'Responses of model runtime requests (name as in the reference runtime)',
      labelNames: ['service', 'status'] as const,
      registers: [this.registry],
    });
    this.failures = new Counter({
      name: 'http_requests_total',
      help: 'Model runtime requests that ended in an error, by error name',
      labelNames: ['service', 'error'] as const,
      registers: [this.registry],
    });
    // Pools as the reference names them: `blocking` runs rows (the worker pool), `async` is the event loop.
    const poolGauge = (name: string, help: string, blocking: () => number, async: number) =>
      new Gauge({
        name,
        help,
        labelNames: ['pool'] as const,
        registers: [this.registry],
        collect() {
          this.set({ pool: 'blocking' }, blocking());
          this.set({ pool: 'async' }, async);
        },
      });
    poolGauge('workers_count', 'Threads of each pool', () => service.poolThreads, 1);
    poolGauge('pool_size', 'Row tasks running on each pool', () => service.runningTasks, 0);
    poolGauge('pool_tasks_enqueued', 'Tasks waiting for a thread of each pool', () => service.queueSize, 0);
  }

  /** The model runtime's metrics alone, in the Prometheus text format. */
  async render(): Promise<string> {
    const names = ['http_requests_duration_millis', 'total_reponse_count', 'http_requests_total', 'workers_count', 'pool_size', 'pool_tasks_enqueued'];
    return `${(await Promise.all(names.map((name) => this.registry.getSingleMetricAsString(name)))).join('\n')}\n`;
  }

  observe(service: string, status: number, millis: number, error?: string): void {
    if (!MEASURED.has(service)) return;
    this.duration.observe({ endpoint: service, status: String(status) }, millis);
    this.responses.inc({ service, status: String(status) });
    if (error) this.failures.inc({ service, error });
  }
}
