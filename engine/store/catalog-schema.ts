// The catalog's schema version: the layout of the records every node writes in units of work
// (documents, their indexes, jobs...), kept in the catalog itself (a row of the unit store: in
// PostgreSQL with pg-s3, in LMDB with fs and s3), so that a node that does not know a change
// cannot write beside one that does: an older node would write documents the search index never
// sees. A change that older nodes would miss raises CATALOG_SCHEMA_VERSION here.
//
// At start a node refuses a catalog of a newer version (StartRefused: exit 2, one line) and brings
// an older one to its own. A running node learns of a newer version at its next commit (pg-s3:
// every commit checks the row it pinned, PgUnitStore.pinCatalogSchema) or its next readiness
// probe (every 5 s): it then writes nothing more and is not ready.
import { SvcError } from '../base/errors.js';
import { type UnitStore, table } from './unit-store.js';

/**
 * Versions: 1, a catalog from before versions (no row); 2, the search index (doc_meta_index),
 * written in the unit of every canonical version and valid derived entry.
 */
export const CATALOG_SCHEMA_VERSION = 2;

/** The one row: `schema` → its version. */
export const CATALOG_SCHEMA = table<{ version: number }, 'schema'>('catalog_schema');
export const CATALOG_SCHEMA_KEY = 'schema';

/** The version a stored row says (no row: 1). */
export const versionOf = (value: unknown): number => (value as { version?: number } | undefined)?.version ?? 1;

export const tooNewWords = (found: number) =>
  `the catalog's schema is version ${found}, newer than this svc knows (${CATALOG_SCHEMA_VERSION}): upgrade svc`;

/** The catalog was upgraded by a newer node while this one ran: it writes nothing more (503). */
export const catalogTooNew = (found: number) =>
  new SvcError('unavailable', 'catalog_schema_newer', `This node no longer writes: ${tooNewWords(found)} on this node`, { retryAfterSeconds: 5 });

/** Found at start: the catalog was written by a newer svc. */
export class CatalogSchemaTooNew extends Error {
  constructor(readonly found: number) {
    super(tooNewWords(found));
    this.name = 'CatalogSchemaTooNew';
  }
}

/**
 * Checks the catalog's version at start and raises it to this svc's, before any other write
 * (so that an older node still running stops writing before the index is built). Throws
 * CatalogSchemaTooNew for a newer catalog.
 */
export async function openCatalogSchema(units: UnitStore): Promise<{ from: number; to: number }> {
  const from = await units.run(async (unit) => {
    const found = versionOf(await unit.get(CATALOG_SCHEMA, CATALOG_SCHEMA_KEY));
    if (found > CATALOG_SCHEMA_VERSION) throw new CatalogSchemaTooNew(found);
    if (found < CATALOG_SCHEMA_VERSION) unit.put(CATALOG_SCHEMA, CATALOG_SCHEMA_KEY, { version: CATALOG_SCHEMA_VERSION });
    return found;
  });
  await units.pinCatalogSchema?.(CATALOG_SCHEMA_VERSION);
  return { from, to: CATALOG_SCHEMA_VERSION };
}
