// What the operator views (snapshot, node summary, metrics) read of the engine: a narrow view
// that engine.ts satisfies, so ops/ never depends on the composition root.

import type { Piscina } from 'piscina';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { BlobCatalog } from '../store/index.js';
import type { ClusterNodes } from './nodes.js';
import type { Stats } from './stats.js';

/** One dependency probe of readiness (catalog, block store, PostgreSQL, S3). */
export interface HealthCheck {
  name: string;
  status: 'ok' | 'failed';
  latencyMs: number;
  detail?: string;
}

/** The memory every transfer shares (engine/cas/transfer-memory.ts), as the views read it. */
export interface MemoryGauges {
  readonly transfers: number;
  readonly queued: number;
  readonly bufferedBytes: number;
  readonly limitBytes: number;
}

/** One tenant's line of the snapshot's usage table. */
export interface TenantUsageRow {
  tenant: string;
  retainedBytes: number;
  objects: number;
  quotaBytes: number | null;
}

export interface OpsSource {
  readonly nodeId: string;
  readonly stats: Stats;
  readonly memory: MemoryGauges;
  readonly pool: Pick<Piscina, 'threads' | 'queueSize' | 'utilization' | 'idleThreads'>;
  readonly config: Pick<Config, 'blobBackend' | 'durability' | 'fsRoot' | 'minFreeSpace'>;
  readonly log: Logger;
  /** Whether the catalog is shared by several nodes (pg-s3, s3). */
  readonly backend: { readonly shared?: unknown };
  readonly cluster: Pick<ClusterNodes, 'list'>;
  readonly manifests: Pick<BlobCatalog, 'totals'>;
  /** The outcome of the latest readiness checks. */
  readonly lastReadiness?: { at: number; failed: string[] };
  readiness(): Promise<HealthCheck[]>;
  /** pg-s3: this node's clock against the database's (warn past CLOCK_SKEW_WARN_MS); undefined elsewhere. */
  clockCheck(): { status: 'ok' | 'warn'; detail?: string } | undefined;
  /** The usage of the tenants the operator knows by name (the policy's; the default tenant with security off). */
  tenantsUsage(): Promise<TenantUsageRow[]>;
  nodes(): Promise<Array<{ nodeId: string; lastSeenAt: string; address: string }>>;
}
