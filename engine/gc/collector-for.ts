// The collector a backend needs: the embedded one over its LMDB catalog and block files (fs), the
// shared one over a catalog the nodes share (pg-s3, s3). A backend with neither has none.
import type { BlockRoots } from '../base/block-roots.js';
import type { GcConfig } from '../base/config.js';
import type { Logger } from '../base/log.js';
import type { BlobBackend } from '../store/index.js';
import type { Collector } from './collector.js';
import { GarbageCollector } from './gc.js';
import { SharedCollector } from './shared-collector.js';

export interface CollectorOptions {
  config: GcConfig;
  /** Every reference to blocks outside published manifests (sessions, document content, views). */
  roots: readonly BlockRoots[];
  log: Logger;
  /** For a shared catalog's heartbeats: this node, where it listens, its TTL and what it says of itself. */
  nodeId: string;
  address: () => string;
  nodeTtlMs: number;
  summary: () => Record<string, unknown>;
}

export function collectorFor(backend: Pick<BlobBackend, 'kind' | 'embedded' | 'shared'>, o: CollectorOptions): Collector {
  const { config, roots, log } = o;
  if (backend.embedded) return new GarbageCollector({ config, catalog: backend.embedded.gc, manifests: backend.embedded.manifests, blocks: backend.embedded.blocks, roots, log });
  if (backend.shared) return new SharedCollector({ config, catalog: backend.shared.gc, blocks: backend.shared.blocks, roots, log, nodeId: o.nodeId, address: o.address, nodeTtlMs: o.nodeTtlMs, summary: o.summary });
  throw new Error(`the ${backend.kind} backend has no garbage collector`);
}
