// Schema and migration requests parsed into typed commands (engine/documents/commands.ts):
// registering a schema, moving its lifecycle, registering a migration. Whether a jsonSchema
// compiles, who owns a schema and whether a migration is invertible are the engine's to check.

import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { LIFECYCLES, type Lifecycle, type LifecycleMove, type MigrationRegistration, type PatchSpec, type SchemaRegistration } from '../../engine/documents/commands.js';
import { badRequest, isNamespaceUrn, isPlainObject, isSchemaUrn, onlyKeys } from '../../engine/documents/model.js';
import { MIGRATION_MAX_OPS } from '../../engine/base/limits.js';
import { bodyUrns } from './urns.js';

const { validate: validatePatch } = fastJsonPatch;

const isLifecycle = (v: unknown): v is Lifecycle => typeof v === 'string' && LIFECYCLES.includes(v as Lifecycle);

/** POST /v1/schemas: `{ schemaUrn, namespaceUrn, lifecycle, jsonSchema }`, jsonSchema of the 2020-12 dialect with "type": "object". */
export function parseSchemaRegistration(body: unknown): SchemaRegistration {
  bodyUrns(body, ['schemaUrn', 'namespaceUrn']);
  if (!isPlainObject(body)) throw badRequest('The body must be a schema registration object');
  onlyKeys(body, ['schemaUrn', 'namespaceUrn', 'lifecycle', 'jsonSchema'], 'schema registration');
  const { schemaUrn, namespaceUrn, lifecycle, jsonSchema } = body;
  if (!isSchemaUrn(schemaUrn)) throw badRequest('schemaUrn must be urn:svc:schema:<name>@<semver>');
  if (!isNamespaceUrn(namespaceUrn)) throw badRequest('namespaceUrn must be urn:svc:<name>');
  if (!isLifecycle(lifecycle)) throw badRequest(`lifecycle must be one of ${LIFECYCLES.join(', ')}`);
  if (!isPlainObject(jsonSchema) || jsonSchema.type !== 'object') throw badRequest('jsonSchema must be a JSON Schema object with "type": "object"');
  if (jsonSchema.$schema !== undefined && jsonSchema.$schema !== 'https://json-schema.org/draft/2020-12/schema') {
    throw badRequest('jsonSchema must use the JSON Schema 2020-12 dialect ($schema absent or https://json-schema.org/draft/2020-12/schema)');
  }
  return { schemaUrn, namespaceUrn, lifecycle, jsonSchema };
}

/** PATCH /v1/schemas/{urn}: `{ lifecycle }`. */
export function parseLifecycleMove(body: unknown): LifecycleMove {
  if (!isPlainObject(body)) throw badRequest('The body must be { lifecycle }');
  onlyKeys(body, ['lifecycle'], 'lifecycle change');
  if (!isLifecycle(body.lifecycle)) throw badRequest(`lifecycle must be one of ${LIFECYCLES.join(', ')}`);
  return { lifecycle: body.lifecycle };
}

/** POST /v1/migrations: `{ fromSchemaUrn, toSchemaUrn, forward, inverse }`, two different schemas, two JSON Patch transforms. */
export function parseMigrationRegistration(body: unknown): MigrationRegistration {
  bodyUrns(body, ['fromSchemaUrn', 'toSchemaUrn']);
  if (!isPlainObject(body)) throw badRequest('The body must be { fromSchemaUrn, toSchemaUrn, forward, inverse }');
  onlyKeys(body, ['fromSchemaUrn', 'toSchemaUrn', 'forward', 'inverse'], 'migration');
  const { fromSchemaUrn, toSchemaUrn } = body;
  if (!isSchemaUrn(fromSchemaUrn) || !isSchemaUrn(toSchemaUrn)) throw badRequest('fromSchemaUrn and toSchemaUrn must be urn:svc:schema:<name>@<semver>');
  if (fromSchemaUrn === toSchemaUrn) throw badRequest('A migration goes from one schema to another');
  return { fromSchemaUrn, toSchemaUrn, forward: patchSpec(body.forward, 'forward'), inverse: patchSpec(body.inverse, 'inverse') };
}

function patchSpec(v: unknown, name: string): PatchSpec {
  if (!isPlainObject(v) || v.type !== 'jsonpatch' || !Array.isArray(v.ops)) throw badRequest(`${name} must be { type: "jsonpatch", ops: [RFC 6902 operations] }`);
  onlyKeys(v, ['type', 'ops'], name);
  if (v.ops.length > MIGRATION_MAX_OPS) throw badRequest(`${name} has more than ${MIGRATION_MAX_OPS} operations`);
  const error = validatePatch(v.ops as Operation[]);
  if (error) throw badRequest(`${name}.ops[${error.index}] is not a valid RFC 6902 operation: ${error.name}`);
  return { type: 'jsonpatch', ops: v.ops as Operation[] };
}
