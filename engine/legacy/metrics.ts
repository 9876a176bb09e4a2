// Prometheus metrics of legacy reads, per configured repository, in the process's one registry
// (engine/ops/metrics.ts). Repository labels are configured names only; a request for an unknown
// repository is counted under `repo="-"`.

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { LegacyFailure } from './errors.js';

export const UNKNOWN_REPO_LABEL = '-';

export class LegacyMetrics {
  private readonly reads: Counter<'repo'>;
  private readonly bytes: Counter<'repo'>;
  private readonly failures: Counter<'repo' | 'reason'>;
  private readonly duration: Histogram<'repo' | 'outcome'>;
  private readonly builds: Counter<'repo' | 'tree'>;
  private readonly entries: Gauge<'repo' | 'tree'>;
  private readonly importRequests: Counter<'repo' | 'result'>;
  private readonly imports: Counter<'repo' | 'outcome'>;
  private readonly importFailures: Counter<'repo' | 'code'>;
  private readonly importedBytes: Counter<'repo'>;

  constructor(registry: Registry, repos: readonly string[]) {
    const registers = [registry];
    this.reads = new Counter({ name: 'svc_legacy_reads_total', help: 'Legacy reads answered 200 (GET with every byte written, HEAD), by repository.', labelNames: ['repo'], registers });
    this.bytes = new Counter({ name: 'svc_legacy_read_bytes_total', help: 'Legacy binary bytes written to clients, by repository.', labelNames: ['repo'], registers });
    this.failures = new Counter({ name: 'svc_legacy_read_failures_total', help: 'Legacy reads that failed, by repository and reason.', labelNames: ['repo', 'reason'], registers });
    this.duration = new Histogram({
      name: 'svc_legacy_read_duration_seconds',
      help: 'Time from a legacy read\'s start (token checked) to its last byte or its error, by repository and outcome (ok, failed).',
      labelNames: ['repo', 'outcome'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30, 120],
      registers,
    });
    this.builds = new Counter({ name: 'svc_legacy_index_builds_total', help: 'Builds of a legacy repository\'s fallback index (metadata or binaries tree).', labelNames: ['repo', 'tree'], registers });
    this.entries = new Gauge({ name: 'svc_legacy_index_entries', help: 'Entries of a legacy repository\'s fallback index once built.', labelNames: ['repo', 'tree'], registers });
    this.importRequests = new Counter({
      name: 'svc_legacy_import_requests_total',
      help: 'POST /v1/legacy/import answers, by repository and result (enqueued: a new import job; already_imported; in_progress: the job of an earlier request; rejected: unknown repository).',
      labelNames: ['repo', 'result'], registers,
    });
    this.imports = new Counter({
      name: 'svc_legacy_imports_total',
      help: 'Legacy import jobs ended, by repository and outcome (imported; failed: a final failure, its code in svc_legacy_import_failures_total).',
      labelNames: ['repo', 'outcome'], registers,
    });
    this.importFailures = new Counter({
      name: 'svc_legacy_import_failures_total',
      help: 'Failed legacy import attempts, by repository and code (the job error code of a final failure; "retried" for one that runs again).',
      labelNames: ['repo', 'code'], registers,
    });
    this.importedBytes = new Counter({ name: 'svc_legacy_import_bytes_total', help: 'Legacy binary bytes streamed into the store by import jobs, by repository.', labelNames: ['repo'], registers });
    // Every repository shows from the start, at zero.
    for (const repo of repos) {
      for (const outcome of ['imported', 'failed']) this.imports.labels(repo, outcome).inc(0);
      this.importedBytes.labels(repo).inc(0);
      this.reads.labels(repo).inc(0);
      this.bytes.labels(repo).inc(0);
      for (const tree of ['metadata', 'binaries']) this.builds.labels(repo, tree).inc(0);
    }
  }

  read(repo: string, bytes: number, seconds: number): void {
    this.reads.labels(repo).inc();
    if (bytes > 0) this.bytes.labels(repo).inc(bytes);
    this.duration.labels(repo, 'ok').observe(seconds);
  }

  /** A failed read; `bytes` already written (a stream cut after its status line). */
  failure(repo: string, reason: LegacyFailure, seconds: number, bytes = 0): void {
    this.failures.labels(repo, reason).inc();
    if (bytes > 0) this.bytes.labels(repo).inc(bytes);
    this.duration.labels(repo, 'failed').observe(seconds);
  }

  indexBuilt(repo: string, tree: 'metadata' | 'binaries', entries: number): void {
    this.builds.labels(repo, tree).inc();
    this.entries.labels(repo, tree).set(entries);
  }

  importRequest(repo: string | undefined, result: 'enqueued' | 'already_imported' | 'in_progress' | 'rejected'): void {
    this.importRequests.labels(repo ?? UNKNOWN_REPO_LABEL, result).inc();
  }

  /** An import job completed (`already_present`: its document existed, a no-op). */
  imported(repo: string, outcome: 'imported' | 'already_present'): void {
    this.imports.labels(repo, outcome).inc();
  }

  /** An import attempt failed: `code` of a final failure (the job is failed), `dead` (its last attempt), or `retried`. */
  importAttemptFailed(repo: string | undefined, code: string): void {
    const label = repo ?? UNKNOWN_REPO_LABEL;
    this.importFailures.labels(label, code).inc();
    if (code !== 'retried') this.imports.labels(label, 'failed').inc();
  }

  importBytes(repo: string, bytes: number): void {
    this.importedBytes.labels(repo).inc(bytes);
  }
}
