// The S3-only backend (SVC_BLOB_BACKEND=s3): manifests, inventory, ledgers, heartbeats and GC's
// lease as objects beside the block objects in one bucket (engine/store/s3-only). Resumable
// sessions too (s3-only/upload-catalog.ts; staged tails under staging/, as pg-s3's): a part, a
// commit or a cancel may reach any node. Documents stay in one node's embedded LMDB: the holder of
// a lease in the bucket serves them (documents-node.ts).
//
// At start svc probes whether the server honours conditional writes (s3/preconditions.ts).
// Several nodes rely on them (publish once, compare-and-swap of the ledgers, the GC lease); on a
// server that ignores them, a node refuses to start while another node's heartbeat is live.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../base/config.js';
import { systemClock } from '../base/clock.js';
import type { BlobBackend } from './blob-backend.js';
import { FileDevSecretStore } from './fs/dev-secret.js';
import type { CatalogEnv } from './lmdb/env.js';
import { LmdbModelRegistry } from './lmdb/model-registry.js';
import { LmdbUnitStore } from './lmdb/unit-store.js';
import { isS3Failure, s3StartRefused } from './dependency-failure.js';
import { S3BlockStore } from './s3/block-store.js';
import { S3TailStaging } from './s3/staging.js';
import { type ConditionalWrites, probeConditionalWrites } from './s3/preconditions.js';
import { S3OnlyBlobCatalog } from './s3-only/catalog.js';
import { S3OnlyGcCatalog } from './s3-only/gc-catalog.js';
import { S3OnlyKeys } from './s3-only/keys.js';
import { NodeRegistry } from './s3-only/nodes.js';
import { ObjectIo } from './s3-only/objects.js';
import { S3OnlyRefused } from './s3-only/refused.js';
import { S3OnlyUploadCatalog } from './s3-only/upload-catalog.js';
import { S3DocumentsClaim } from './s3-only/documents-node.js';
import type { Logger } from '../base/log.js';
import { S3KeptSecret } from './s3-only/kept-secret.js';


/** `env`: this node's LMDB, which keeps what the bucket does not share (units of work, models, the development secret). */
export async function openS3Only(config: Config, env: CatalogEnv, nodeId: string, log?: Logger): Promise<BlobBackend> {
  // This process holds the data directory's lock: a spill left by an earlier run is nobody's.
  const scratchDir = path.join(config.fsRoot, 'scratch');
  fs.rmSync(scratchDir, { recursive: true, force: true });
  fs.mkdirSync(scratchDir, { recursive: true });
  const blocks = new S3BlockStore({ kind: 's3', ...config.s3 }, scratchDir);
  try {
    // A bucket that is missing or refuses these credentials stops the start naming the variable.
    await blocks.checkAtStart();
    const { manifests, gc, nodes, conditions, io, keys, sessions } = await openS3OnlyCatalog(blocks, nodeId, config.nodeTtlMs).catch(refusedAtStart(blocks));
    await admit(nodes, conditions, config).catch(refusedAtStart(blocks));
    const documents = new S3DocumentsClaim({
      io, keys, nodeId, boot: nodes.boot, leaseMs: config.documentsLeaseMs, log,
      nodeLive: async (id) => (await nodes.nodes()).some((n) => n.nodeId === id),
    });
    await documents.start().catch(refusedAtStart(blocks));
    return {
      kind: 's3',
      documents,
      get documentsNode() {
        return documents.holderId();
      },
      // The documents are one node's, but any node answers the blob inventory: its cursors' key is the bucket's.
      cursorKey: new S3KeptSecret(io, keys.secret('cursor-key')),
      blocks,
      manifests,
      shared: { blocks, gc },
      // Shared through the bucket by compare-and-swap: any node takes a session's next step.
      sessions: { catalog: sessions, staging: new S3TailStaging(blocks.client, blocks.location) },
      // The documents' units of work, the model registry and the development secret are this node's.
      units: new LmdbUnitStore(env),
      models: new LmdbModelRegistry(env),
      devSecret: new FileDevSecretStore(config.fsRoot),
      clock: systemClock,
      dependencies: [{ name: 's3', probe: () => blocks.probe() }],
      removedTempFiles: 0,
      close: async () => {
        await documents.stop();
        await nodes.leave().catch(() => {});
        await blocks.close();
      },
    };
  } catch (err) {
    await blocks.close();
    throw err;
  }
}

/** An S3 failure of the writes and reads made at start (the bucket answered HeadBucket), as a StartRefused. */
function refusedAtStart(blocks: S3BlockStore) {
  return (err: unknown): never => {
    throw isS3Failure(err) ? s3StartRefused(err, 'the reads and writes svc makes at start', blocks.location) : err;
  };
}

/**
 * The catalog side of the backend over `blocks`' bucket and client, for `nodeId` (also what the
 * catalog tests open): the server's conditional writes probed, a new boot of the node.
 */
export async function openS3OnlyCatalog(blocks: S3BlockStore, nodeId: string, nodeTtlMs: number) {
  const { bucket, prefix } = blocks.location;
  const conditions = await probeConditionalWrites(blocks.client, bucket, prefix);
  // Block PUTs are conditional too where the server honours it: one request per fresh block.
  blocks.location.conditionalPut = conditions.ifNoneMatch;
  const io = new ObjectIo(blocks.client, bucket, conditions);
  const keys = new S3OnlyKeys(prefix);
  const nodes = new NodeRegistry(io, keys, nodeId, randomUUID(), nodeTtlMs);
  const manifests = new S3OnlyBlobCatalog(io, keys, nodes, (after) => blocks.list('blocks', after));
  const sessions = new S3OnlyUploadCatalog(io, keys);
  const gc = new S3OnlyGcCatalog(io, keys, nodes, {
    listQuarantine: (after) => blocks.list('quarantine', after),
    restore: (hex, size) => blocks.restore(hex, size),
  }, sessions);
  return { manifests, gc, nodes, conditions, io, keys, sessions };
}

/**
 * Announces this node (a first heartbeat) and, where the server ignores preconditions, makes
 * sure it is alone: two nodes starting at once both see the other and both refuse.
 */
async function admit(nodes: NodeRegistry, conditions: ConditionalWrites, config: Config): Promise<void> {
  // Until its first sweep of its roots (gc-catalog.ts) the node holds back every purge.
  await nodes.heartbeat('', 0);
  if (conditions.ifNoneMatch && conditions.ifMatch) return;
  const others = (await nodes.nodes()).filter((n) => n.nodeId !== nodes.nodeId);
  if (others.length === 0) return;
  await nodes.leave().catch(() => {});
  const missing = [conditions.ifNoneMatch ? '' : 'If-None-Match: *', conditions.ifMatch ? '' : 'If-Match'].filter(Boolean).join(' and ');
  throw new S3OnlyRefused(
    `SVC_BLOB_BACKEND=s3: the S3 server at ${config.s3.endpoint || 'the AWS default endpoint'} (bucket ${config.s3.bucket}) ignores conditional writes (${missing}), ` +
      `so only one S3-only node may use it, and node ${others.map((n) => n.nodeId).join(', ')} is live (heartbeat within SVC_NODE_TTL). ` +
      'Stop the other node, or use a server that honours If-None-Match and If-Match (e.g. Ceph radosgw, AWS S3).',
  );
}
