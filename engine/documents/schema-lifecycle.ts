// What a schema's lifecycle means for a write bound to it (decisions, "Schema lifecycle"):
// `draft` needs schema.write besides the write's own capability, `published` is open,
// `deprecated` is accepted and reported (the server answers with a Deprecation header), `retired`
// is refused with 422 schema_retired. Reads never change.

import type { Principal } from '../auth/index.js';
import { holds } from '../auth/index.js';
import { SvcError } from '../base/errors.js';
import { forbidden } from './model.js';
import type { SchemaRecord, SchemaRegistry } from './schemas.js';

/** A deprecated schema a write used, and since when. */
export interface DeprecatedSchema {
  schemaUrn: string;
  deprecatedAt: number;
}

/** The tenant of the platform's own maintenance jobs (re-checks of derived entries): no caller's. */
export const MAINTENANCE_TENANT = '#svc-maintenance';

/**
 * Checks the lifecycle of each schema `urns` names for a write by `principal`; the deprecated ones
 * are returned. With `allowUnregistered`, a URN not registered passes (a derived entry is then unverified).
 */
export async function checkLifecycles(schemas: SchemaRegistry, principal: Principal, urns: readonly string[], allowUnregistered = false): Promise<DeprecatedSchema[]> {
  const records: SchemaRecord[] = [];
  for (const urn of new Set(urns)) {
    const record = await schemas.get(urn);
    if (record) records.push(record);
    else if (!allowUnregistered) throw new SvcError('not_found', 'schema_not_found', `No schema ${urn}`);
  }
  return lifecycleRules(principal, records);
}

/** The same rules on schema records already read (with their current lifecycle). */
export function lifecycleRules(principal: Principal, records: readonly SchemaRecord[]): DeprecatedSchema[] {
  const deprecated: DeprecatedSchema[] = [];
  const seen = new Set<string>();
  for (const record of records) {
    const urn = record.schemaUrn;
    if (seen.has(urn)) continue;
    seen.add(urn);
    if (record.lifecycle === 'retired') throw new SvcError('unprocessable', 'schema_retired', `${urn} is retired: no entry may be written against it (use a newer version of the schema)`);
    if (record.lifecycle === 'draft' && !holds(principal, 'schema.write')) throw forbidden(`${urn} is a draft: writing entries against it needs schema.write`);
    if (record.lifecycle === 'deprecated') deprecated.push({ schemaUrn: urn, deprecatedAt: record.deprecatedAt ?? record.createdAt });
  }
  return deprecated;
}
