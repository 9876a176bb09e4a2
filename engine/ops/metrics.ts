import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { OpsSource } from './source.js';

/** Prometheus metrics of one process: counters read from Stats at scrape time, plus HTTP timings. */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<'route' | 'status'>;
  readonly httpDuration: Histogram<'route'>;

  constructor(engine: Pick<OpsSource, 'stats' | 'memory' | 'pool'>) {
    const r = this.registry;
    const s = engine.stats;
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({ name, help, registers: [r], collect() { this.set(read()); } });
    gauge('svc_uptime_seconds', 'Seconds since the process started.', () => s.uptimeSeconds());
    gauge('svc_ingests_total', 'Blobs ingested by direct upload since start.', () => s.ingests);
    gauge('svc_ingested_bytes_total', 'Upload body bytes received since start, counted as they arrive.', () => s.bytesIngested);
    gauge('svc_fresh_blocks_total', 'Blocks written because they were new.', () => s.freshBlocks);
    gauge('svc_duplicate_blocks_total', 'Blocks found already stored (deduplicated).', () => s.duplicateBlocks);
    gauge('svc_fresh_block_bytes_total', 'Bytes of new blocks written.', () => s.freshBytes);
    gauge('svc_duplicate_block_bytes_total', 'Bytes of deduplicated blocks.', () => s.duplicateBytes);
    gauge('svc_dedup_ratio', 'Duplicate block bytes / all block bytes since start.', () => s.dedupRatio());
    gauge('svc_requests_total', 'HTTP requests answered or aborted.', () => s.requests);
    gauge('svc_request_errors_total', 'HTTP responses with a status of 400 or more.', () => s.errors);
    gauge('svc_reads_total', 'Blob bodies served.', () => s.reads);
    gauge('svc_served_bytes_total', 'Body bytes served.', () => s.bytesServed);
    gauge('svc_spilled_bytes_total', 'Upload bytes that waited on disk because their upload was full (uWS overshoot after pause).', () => s.spilledBytes);
    gauge('svc_corrupt_blocks', 'Distinct blocks that failed a checksum since start.', () => s.corruptBlocks.size);
    gauge('svc_transfers_in_flight', 'Uploads holding a memory reservation.', () => engine.memory.transfers);
    gauge('svc_transfers_queued', 'Uploads waiting for memory.', () => engine.memory.queued);
    gauge('svc_buffered_bytes', 'Bytes held in upload segments.', () => engine.memory.bufferedBytes);
    gauge('svc_buffer_limit_bytes', 'SVC_INGEST_BUFFER_BYTES.', () => engine.memory.limitBytes);
    gauge('svc_worker_threads', 'Threads in the worker pool.', () => engine.pool.threads.length);
    gauge('svc_worker_queue_size', 'Tasks waiting for a worker.', () => engine.pool.queueSize);
    gauge('svc_worker_utilization', 'Share of pool capacity used since start (0..1).', () => engine.pool.utilization);
    this.httpRequests = new Counter({ name: 'svc_http_requests_total', help: 'HTTP requests by route and status.', labelNames: ['route', 'status'], registers: [r] });
    this.httpDuration = new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'Time to the end of the response by route.',
      labelNames: ['route'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30],
      registers: [r],
    });
  }

  private readonly children = new Map<string, { count: { inc(): void }; time: { observe(v: number): void } }>();

  /** Counts one response. Label children are cached: looking labels up per request is costly. */
  observeHttp(route: string, status: number, seconds: number): void {
    const key = `${route} ${status}`;
    let child = this.children.get(key);
    if (!child) {
      child = { count: this.httpRequests.labels(route, String(status)), time: this.httpDuration.labels(route) };
      this.children.set(key, child);
    }
    child.count.inc();
    child.time.observe(seconds);
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
