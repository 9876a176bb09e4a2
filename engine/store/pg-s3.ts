// The pg-s3 backend: the blob catalog in PostgreSQL (engine/store/pg), block bytes in S3, one
// object per block, and a journal of every tenant's holdings (engine/store/s3/journal.ts: what a rebuild reads).
// Resumable sessions, the model registry, the generated development secret and units of work in PostgreSQL, staged tails in the bucket. Spills of uploads go to
// a scratch directory of this node.
import fs from 'node:fs';
import path from 'node:path';
import { ReferenceClock } from '../base/clock.js';
import type { Config } from '../base/config.js';
import type { Logger } from '../base/log.js';
import type { BlobBackend } from './blob-backend.js';
import { StartRefused, describePgFailure, isPgConnectionFailure } from './dependency-failure.js';
import { PgBlobCatalog } from './pg/blob-catalog.js';
import { SchemaTooNew } from './pg/schema.js';
import { S3BlockStore } from './s3/block-store.js';
import { S3Journal } from './s3/journal.js';
import { S3TailStaging } from './s3/staging.js';
import { UnitSecretStore } from './unit-secret.js';

/** How often a node reads the database's clock again (its offset drifts by milliseconds per hour at most). */
const CLOCK_SAMPLE_MS = 5000;

export async function openPgS3(config: Config, log: Logger, nodeId?: string): Promise<BlobBackend> {
  // This process holds the data directory's lock: a spill left by an earlier run is nobody's.
  const scratchDir = path.join(config.fsRoot, 'scratch');
  fs.rmSync(scratchDir, { recursive: true, force: true });
  fs.mkdirSync(scratchDir, { recursive: true });
  const blocks = new S3BlockStore({ kind: 's3', ...config.s3 }, scratchDir);
  let manifests: PgBlobCatalog;
  try {
    // A bucket that is missing or refuses these credentials, or a PostgreSQL that cannot be
    // reached, stops the start naming the variable (StartRefused); later, readiness says it.
    await blocks.checkAtStart();
    // One request per fresh block where the server honours If-None-Match (radosgw, AWS S3); a
    // probe that fails leaves the HEAD before each PUT (the first upload says what is wrong).
    await blocks.useConditionalPuts().catch((err: unknown) => log.warn('pg-s3: the probe of conditional PUTs failed; blocks are written after a HEAD', { err: String(err) }));
    // The catalog journals every tenant's holdings to the bucket: it alone suffices to rebuild the catalog.
    manifests = await PgBlobCatalog.open(config.pg.url, { poolSize: config.pg.pool, statementTimeoutMs: config.pg.statementTimeoutMs, nodeId, journal: new S3Journal(blocks.client, blocks.location),
      onJournalError: (err) => log.warn('pg-s3: journal segment not written; its entries wait in the catalog', { err: String(err) }),
    }).catch((err: unknown) => {
      if (err instanceof SchemaTooNew) throw new StartRefused('SVC_PG_URL', err.message);
      throw isPgConnectionFailure(err) ? new StartRefused('SVC_PG_URL', describePgFailure(err, config.pg.url)) : err;
    });
  } catch (err) {
    await blocks.close();
    throw err;
  }
  // Leases, retries, expiry and nodes' TTLs are judged by the database's clock: sampled now and
  // every CLOCK_SAMPLE_MS, never per operation.
  const clock = new ReferenceClock(() => manifests.clockReading(), {
    intervalMs: CLOCK_SAMPLE_MS,
    onError: (err) => log.warn('pg-s3: the database\'s clock was not read; the last reading goes on', { err: String(err) }),
  });
  try {
    await clock.start();
  } catch (err) {
    await manifests.close();
    await blocks.close();
    throw err;
  }
  const units = manifests.unitStore({ onWatchLost: (err) => log.warn('units: the connection that listens for other nodes\' commits was lost; reconnecting (every watcher is called once it is back)', { err: String(err) }) });
  return {
    kind: 'pg-s3',
    blocks,
    manifests,
    shared: { blocks, gc: manifests.gcCatalog() },
    // Sessions are shared too: a part, a commit or a cancel may reach any node.
    sessions: { catalog: manifests.uploadCatalog(), staging: new S3TailStaging(blocks.client, blocks.location) },
    // So are registrations: a model registered on one node is served by every node.
    devSecret: manifests.devSecret(),
    // And units of work (documents, jobs, views, workflow runs...): every node commits on the same rows.
    units,
    // Kept where every node reads it: a cursor one node gave opens on any other, and after a restart.
    cursorKey: new UnitSecretStore(units, 'cursor-key'),
    models: manifests.modelRegistry({ onWatchLost: (err) => log.warn('models: the connection that listens for registry changes was lost; reconnecting (the registry is read every few seconds meanwhile)', { err: String(err) }) }),
    clock,
    dependencies: [
      {
        name: 'postgres',
        probe: async () => {
          await manifests.probe().catch((err: unknown) => Promise.reject(new Error(describePgFailure(err, config.pg.url), { cause: err })));
          // A newer node upgraded the catalog: this one no longer writes, and says so.
          await units.checkCatalogSchema();
        },
      },
      { name: 's3', probe: () => blocks.probe() },
    ],
    removedTempFiles: 0,
    close: async () => {
      clock.stop();
      await units.close();
      await manifests.close();
      await blocks.close();
    },
  };
}
