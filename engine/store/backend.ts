// A blob backend: where manifests and block bytes live. The engine depends on this and on the
// interfaces it names, never on an implementation. `fs` is embedded (block files + LMDB in the
// data directory); `pg-s3` keeps the catalog in PostgreSQL and the block bytes in S3; `s3` keeps
// everything in the bucket.
import type { Config } from '../base/config.js';
import type { BlobBackend, Dependency } from './blob-backend.js';
import { systemClock } from '../base/clock.js';
import { FsBlockStore } from './fs/block-store.js';
import { FileDevSecretStore } from './fs/dev-secret.js';
import { FsTailStaging } from './fs/staging.js';
import { LmdbBlobCatalog } from './lmdb/blob-catalog.js';
import type { CatalogEnv } from './lmdb/env.js';
import { LmdbGcCatalog } from './lmdb/gc-catalog.js';
import { LmdbModelRegistry } from './lmdb/model-registry.js';
import { LmdbUnitStore } from './lmdb/unit-store.js';
import { LmdbUploadCatalog } from './lmdb/upload-catalog.js';
import { UnitSecretStore } from './unit-secret.js';
import type { Logger } from '../base/log.js';

export type { BlobBackend, Dependency };

/**
 * Opens the configured backend. Only the process that holds the data directory's lock may call
 * this (the fs store cleans up its temp files). `env` is the node's embedded catalog, `nodeId`
 * the node's name (the S3-only backend announces it at open). Every store of the backend is
 * there: what a backend does not share lives in `env` and the data directory.
 */
export async function openBlobBackend(config: Config, env: CatalogEnv, nodeId: string, log: Logger): Promise<BlobBackend> {
  if (config.blobBackend === 'fs') {
    const { removedTempFiles } = FsBlockStore.prepare(config.fsRoot);
    const blocks = new FsBlockStore(config.fsRoot, config.durability);
    const manifests = new LmdbBlobCatalog(env);
    const units = new LmdbUnitStore(env);
    return {
      kind: 'fs',
      blocks,
      manifests,
      embedded: { blocks, manifests, gc: new LmdbGcCatalog(env) },
      sessions: { catalog: new LmdbUploadCatalog(env), staging: new FsTailStaging(config.fsRoot, config.durability) },
      models: new LmdbModelRegistry(env),
      devSecret: new FileDevSecretStore(config.fsRoot),
      units,
      cursorKey: new UnitSecretStore(units, 'cursor-key'),
      clock: systemClock,
      dependencies: [
        { name: 'catalog', probe: () => manifests.probe() },
        { name: 'blockStore', probe: () => blocks.probe() },
      ],
      removedTempFiles,
      close: async () => {},
    };
  }
  if (config.blobBackend === 's3') {
    const { openS3Only } = await import('./s3-only.js');
    return openS3Only(config, env, nodeId, log);
  }
  const { openPgS3 } = await import('./pg-s3.js');
  return openPgS3(config, log, nodeId);
}
