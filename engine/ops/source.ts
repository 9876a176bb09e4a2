// What the operator views (snapshot, node summary, metrics) read of the engine: a narrow view
// that engine.ts satisfies, so ops/ never depends on the composition root (nor on the services
// of engine/tenancy and engine/locality, named here by the shapes it reads).

import type { Piscina } from 'piscina';
import type { Config } from '../base/config.js';
import type { Logger } from '../base/log.js';
import type { BlobCatalog } from '../store/index.js';
import type { Health, HealthCheck } from './health.js';
import type { ClusterNodes } from './nodes.js';
import type { Stats } from './stats.js';

export type { HealthCheck };

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
  /** Readiness, its latest outcome, and on pg-s3 this node's clock against the database's (engine/ops/health.ts). */
  readonly health: Pick<Health, 'lastReadiness' | 'readiness' | 'clockCheck'>;
  /** The usage of the tenants the operator knows by name (the policy's; the default tenant with security off): engine/tenancy/tenant-usage.ts. */
  readonly tenantUsage: { tenantsUsage(): Promise<TenantUsageRow[]> };
  /** The live nodes sharing the catalog (engine/locality/live-nodes.ts). */
  readonly liveNodes: { nodes(): Promise<Array<{ nodeId: string; lastSeenAt: string; address: string }>> };
}
