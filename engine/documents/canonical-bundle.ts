// A bundle of canonical metadata as a write stores it (POST /v1/documents' initialMetadata, a
// canonical metadata write): each namespace needs meta.write:<ns>, each entry's schema must be
// registered, of that namespace, and validate its data; entries get new ids and the request's receipt.

import type { Principal } from '../auth/index.js';
import type { BundleRequest } from './commands.js';
import { MetadataRejection } from './metadata.js';
import { type Bundle, type RequestInfo, newMetadataId, receiptOf } from './model.js';
import { requireCapability } from './permissions.js';
import { type DeprecatedSchema, lifecycleRules } from './schema-lifecycle.js';
import type { SchemaRecord, SchemaRegistry } from './schemas.js';

/** `entries` checked (their schemas' lifecycles included) and made entries; the deprecated schemas they use. */
export async function canonicalBundle(schemas: SchemaRegistry, principal: Principal, entries: BundleRequest, request: RequestInfo): Promise<{ bundle: Bundle; deprecated: DeprecatedSchema[] }> {
  for (const ns of Object.keys(entries)) requireCapability(principal, `meta.write:${ns}`);
  const issues = [];
  const records: SchemaRecord[] = [];
  for (const [ns, e] of Object.entries(entries)) {
    const schema = await schemas.get(e.schema);
    if (schema) records.push(schema);
    if (!schema) {
      issues.push({ path: `/namespaces/${ns}/schema`, code: 'schema_not_found', message: `No schema ${e.schema} is registered` });
      continue;
    }
    if (schema.namespaceUrn !== ns) {
      issues.push({ path: `/namespaces/${ns}/schema`, code: 'schema_namespace_mismatch', message: `${e.schema} is a schema of ${schema.namespaceUrn}` });
      continue;
    }
    for (const i of await schemas.validate(e.schema, e.data)) issues.push({ ...i, path: `/namespaces/${ns}/data${i.path === '/' ? '' : i.path}` });
  }
  if (issues.length) throw MetadataRejection.invalid(issues);
  // The records read above carry their lifecycle: not read again.
  const deprecated = lifecycleRules(principal, records);
  const receipt = receiptOf(principal, request);
  return { bundle: Object.fromEntries(Object.entries(entries).map(([ns, e]) => [ns, { schema: e.schema, id: newMetadataId(), data: e.data, receipt }])), deprecated };
}
