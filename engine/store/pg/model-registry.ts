// The model registry in PostgreSQL (pg-s3, schema v6): one table every node reads, so a model
// registered on one node is served by all. Each write is one transaction that takes a new
// generation and notifies `svc_models`; nodes LISTEN on a connection of their own and, as a
// safety net for a notification lost with a connection, read the registry again every RESYNC_MS.
import type { ModelRegistration, ModelRegistry, RegistryWatch, RemoveOutcome } from '../model-registry.js';
import type { PgPool, PgSql } from './pool.js';

export const MODELS_CHANNEL = 'svc_models';

/**
 * How often a watcher is told to read again without a notification. Together with one read, it
 * bounds how late a node learns of a change whose notification it missed (the decision: within 5 s).
 */
export const RESYNC_MS = 2000;

/** How soon a lost LISTEN connection is opened again. */
const RECONNECT_MS = 1000;

interface Row {
  model_name: string;
  uri: string;
  registered_at: Date;
  generation: number;
}

const registrationOf = (row: Row): ModelRegistration => ({
  modelName: row.model_name,
  uri: row.uri,
  registeredAt: row.registered_at.toISOString(),
  generation: row.generation,
});

export interface WatchOptions {
  /** Told of a watch's lost connection (the node logs it). */
  onWatchLost?: (err: Error) => void;
  /** RESYNC_MS unless given (the tests of notifications alone make it long). */
  resyncMs?: number;
}

export class PgModelRegistry implements ModelRegistry {
  constructor(
    private readonly sql: PgPool,
    private readonly options: WatchOptions = {},
  ) {}

  async list(): Promise<ModelRegistration[]> {
    const rows = await this.sql<Row[]>`SELECT model_name, uri, registered_at, generation FROM model_registrations ORDER BY model_name COLLATE "C"`;
    return rows.map(registrationOf);
  }

  put(name: string, uri: string, registeredAt: string): Promise<{ registration: ModelRegistration; created: boolean }> {
    return this.sql.begin(async (tx) => {
      // Insert, else update: whichever lands says whether the name was free at commit. A row
      // removed between the two (by another node) sends the loop round again.
      for (;;) {
        const [inserted] = await tx<Row[]>`INSERT INTO model_registrations (model_name, uri, registered_at, generation)
          VALUES (${name}, ${uri}, ${registeredAt}, nextval('model_generations'))
          ON CONFLICT (model_name) DO NOTHING
          RETURNING model_name, uri, registered_at, generation`;
        const [updated] = inserted
          ? [undefined]
          : await tx<Row[]>`UPDATE model_registrations SET uri = ${uri}, registered_at = ${registeredAt}, generation = nextval('model_generations')
              WHERE model_name = ${name}
              RETURNING model_name, uri, registered_at, generation`;
        const row = inserted ?? updated;
        if (!row) continue;
        await notify(tx, name);
        return { registration: registrationOf(row), created: inserted !== undefined };
      }
    });
  }

  remove(name: string, generation: number): Promise<RemoveOutcome> {
    return this.sql.begin(async (tx) => {
      const [removed] = await tx<Row[]>`DELETE FROM model_registrations WHERE model_name = ${name} AND generation = ${generation}
        RETURNING model_name, uri, registered_at, generation`;
      if (removed) {
        await notify(tx, name);
        return { removed: registrationOf(removed) };
      }
      const [current] = await tx<Row[]>`SELECT model_name, uri, registered_at, generation FROM model_registrations WHERE model_name = ${name}`;
      return { current: current && registrationOf(current) };
    });
  }

  watch(onChange: () => void): RegistryWatch {
    const { onWatchLost = () => {}, resyncMs = RESYNC_MS } = this.options;
    const listening = this.sql.listen(MODELS_CHANNEL, { onNotify: onChange, onListening: onChange, onLost: onWatchLost }, RECONNECT_MS);
    const resync = setInterval(onChange, resyncMs);
    resync.unref();
    return {
      async close() {
        clearInterval(resync);
        await listening.close();
      },
    };
  }
}

/** Delivered to every listener when the transaction commits, not before (nor at all on rollback). */
async function notify(tx: PgSql, name: string): Promise<void> {
  await tx`SELECT pg_notify(${MODELS_CHANNEL}, ${name})`;
}
