// Metadata schemas: registration (idempotent by canonical hash), lookup, and validation of
// metadata data with ajv against JSON Schema 2020-12. Owner of the `schemas` table.

import { createHash } from 'node:crypto';
import { SvcError } from '../errors.js';
import type { KeyedCatalog } from '../store/index.js';
import { badRequest, canonicalJson, isNamespaceUrn, isPlainObject, isSchemaUrn, onlyKeys } from './model.js';
import { compileRegisteredSchema, compileSchema, SchemaPatternError, SchemaTooCostly, type ValidationIssue } from './validator.js';

export type { ValidationIssue };

interface SchemaRecord {
  schemaUrn: string;
  namespaceUrn: string;
  lifecycle: string;
  jsonSchema: Record<string, unknown>;
  /** SHA-256 of the registration's canonical JSON. */
  hash: string;
  createdAt: number;
}

const LIFECYCLES = ['draft', 'published', 'deprecated', 'retired'];

export const schemaNotFound = (urn: string) => new SvcError(404, 'schema_not_found', `No schema ${urn}`);

export class SchemaRegistry {
  private readonly compiled = new Map<string, (data: unknown) => ValidationIssue[]>();

  constructor(private readonly schemas: KeyedCatalog<SchemaRecord>) {}

  get(urn: string): Promise<SchemaRecord | undefined> {
    return this.schemas.get(urn);
  }

  /** GET /v1/schemas: registrations in URN order, of one namespace when given, after URN `after`. */
  async list(namespaceUrn: string | undefined, limit: number, after?: string): Promise<{ schemas: SchemaRecord[]; next?: string }> {
    const { records: schemas, more } = await this.schemas.page(after, limit, (record) => namespaceUrn === undefined || record.namespaceUrn === namespaceUrn);
    return more ? { schemas, next: schemas[schemas.length - 1]!.schemaUrn } : { schemas };
  }

  /** Registers a schema: `created` false for an identical re-registration; 409 for a different body. */
  async register(body: unknown): Promise<{ record: SchemaRecord; created: boolean }> {
    if (!isPlainObject(body)) throw badRequest('The body must be a schema registration object');
    onlyKeys(body, ['schemaUrn', 'namespaceUrn', 'lifecycle', 'jsonSchema'], 'schema registration');
    const { schemaUrn, namespaceUrn, lifecycle, jsonSchema } = body;
    if (!isSchemaUrn(schemaUrn)) throw badRequest('schemaUrn must be urn:svc:schema:<name>@<semver>');
    if (!isNamespaceUrn(namespaceUrn)) throw badRequest('namespaceUrn must be urn:svc:<name>');
    if (typeof lifecycle !== 'string' || !LIFECYCLES.includes(lifecycle)) throw badRequest(`lifecycle must be one of ${LIFECYCLES.join(', ')}`);
    if (!isPlainObject(jsonSchema) || jsonSchema.type !== 'object') throw badRequest('jsonSchema must be a JSON Schema object with "type": "object"');
    if (jsonSchema.$schema !== undefined && jsonSchema.$schema !== 'https://json-schema.org/draft/2020-12/schema') {
      throw badRequest('jsonSchema must use the JSON Schema 2020-12 dialect ($schema absent or https://json-schema.org/draft/2020-12/schema)');
    }
    let validate: (data: unknown) => ValidationIssue[];
    try {
      validate = compileSchema(jsonSchema);
    } catch (err) {
      if ((err instanceof SchemaPatternError && err.kind === 'unsupported') || err instanceof SchemaTooCostly) {
        throw new SvcError(422, 'schema_unsupported', `jsonSchema cannot be used: ${err.message}`);
      }
      throw badRequest(`jsonSchema does not compile: ${(err as Error).message}`);
    }
    const canonical = { schemaUrn, namespaceUrn, lifecycle, jsonSchema };
    const hash = createHash('sha256').update(canonicalJson(canonical)).digest('hex');
    const fresh: SchemaRecord = { schemaUrn, namespaceUrn, lifecycle, jsonSchema, hash, createdAt: Date.now() };
    const { record, created } = await this.schemas.putIfAbsent(schemaUrn, fresh);
    if (record.hash !== hash) throw new SvcError(409, 'schema_conflict', `${schemaUrn} is registered with a different body; register a new version`);
    this.compiled.set(schemaUrn, validate);
    return { record, created };
  }

  /** Issues of `data` against the schema (empty: valid). The schema must exist. */
  async validate(schemaUrn: string, data: unknown): Promise<ValidationIssue[]> {
    const record = await this.get(schemaUrn);
    if (!record) return [{ path: '', code: 'schema_not_found', message: `No schema ${schemaUrn} is registered` }];
    let validate = this.compiled.get(schemaUrn);
    if (!validate) {
      validate = compileRegisteredSchema(record.jsonSchema);
      this.compiled.set(schemaUrn, validate);
    }
    return validate(data);
  }
}
