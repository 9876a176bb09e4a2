// The catalog's schema in PostgreSQL, created and migrated by svc itself. `svc_schema` holds the
// version; every node runs `migrate` at start, and the advisory lock makes nodes that start at
// once apply each migration exactly once (the others wait, then find nothing to do).
import type { PgPool } from './pool.js';
import { V1_FUNCTIONS } from './schema-v1-functions.js';
import { V1_TABLES } from './schema-v1-tables.js';
import { V2_GC } from './schema-v2-gc.js';
import { V3_SESSIONS } from './schema-v3-sessions.js';
import { V4_JOURNAL } from './schema-v4-journal.js';
import { V5_GC_MARKING } from './schema-v5-gc-marking.js';
import { V6_MODEL_REGISTRY } from './schema-v6-model-registry.js';
import { V7_DEV_SECRET } from './schema-v7-dev-secret.js';
import { V8_ROOT_HOLDERS } from './schema-v8-root-holders.js';
import { V9_UNITS } from './schema-v9-units.js';
import { V10_NODE_SUMMARY } from './schema-v10-node-summary.js';
import { V11_UNIT_INSERT } from './schema-v11-unit-insert.js';
import { V12_UNIT_ADD } from './schema-v12-unit-add.js';
import { V13_UNIT_PUT_ABSENT } from './schema-v13-unit-put-absent.js';

/**
 * Applied in order; the schema's version is the number applied. Never edit one that shipped:
 * append. Each carries the version it brings the schema to, so that versions added on branches
 * merged in another order cannot silently apply out of order: a gap or a swap stops the start.
 */
export const MIGRATIONS: readonly string[] = inVersionOrder([
  [1, V1_TABLES + V1_FUNCTIONS],
  [2, V2_GC],
  [3, V3_SESSIONS],
  [4, V4_JOURNAL],
  [5, V5_GC_MARKING],
  [6, V6_MODEL_REGISTRY],
  [7, V7_DEV_SECRET],
  [8, V8_ROOT_HOLDERS],
  [9, V9_UNITS],
  [10, V10_NODE_SUMMARY],
  [11, V11_UNIT_INSERT],
  [12, V12_UNIT_ADD],
  [13, V13_UNIT_PUT_ABSENT],
]);

function inVersionOrder(numbered: ReadonlyArray<readonly [number, string]>): string[] {
  numbered.forEach(([version], i) => {
    if (version !== i + 1) throw new Error(`pg schema: migration to version ${version} is listed at position ${i + 1}: versions must run 1, 2, 3, … without a gap`);
  });
  return numbered.map(([, sql]) => sql);
}

export class SchemaTooNew extends Error {}

/** Brings the database's schema to the latest version; returns the versions before and after. */
export async function migrate(sql: PgPool): Promise<{ from: number; to: number }> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext('svc_schema'))`;
    await tx`CREATE TABLE IF NOT EXISTS svc_schema (
      only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
      version integer NOT NULL
    )`;
    const [row] = await tx<{ version: number }[]>`SELECT version FROM svc_schema`;
    const from = row?.version ?? 0;
    if (from > MIGRATIONS.length) {
      throw new SchemaTooNew(`the catalog's schema is version ${from}, newer than this svc knows (${MIGRATIONS.length}): upgrade svc`);
    }
    for (const migration of MIGRATIONS.slice(from)) await tx.unsafe(migration);
    await tx`INSERT INTO svc_schema (version) VALUES (${MIGRATIONS.length})
      ON CONFLICT (only_row) DO UPDATE SET version = excluded.version`;
    return { from, to: MIGRATIONS.length };
  }, { unbounded: true });
}
