// Operations: counters, Prometheus metrics, the ops snapshot, its event stream, traffic history.
export { type EventSink, OpsEvents, type Subscription } from './events.js';
export { Health, type HealthDeps, type WarningCheck } from './health.js';
export { Metrics } from './metrics.js';
export { ClusterNodes, type Forgotten, type NodeView } from './nodes.js';
export type { DocumentsReleased } from './documents-release.js';
export { formatBytes } from '../base/bytes.js';
export { type GcState, type NodeSummary, nodeIdOf, nodeSummary, OpsSnapshots } from './snapshot.js';
export { Stats } from './stats.js';
export { StreamBound } from './stream-bound.js';
export { TrafficHistory } from './traffic-history.js';
export type { HealthCheck, MemoryGauges, OpsSource, TenantUsageRow } from './source.js';
