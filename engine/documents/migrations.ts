// Schema migrations: registered explicitly with forward and inverse JSON Patch transforms, and
// accepted only when a probe shows them invertible: for instances of the source schema (its
// `examples` plus instances generated from it), forward(x) validates against the target schema
// and inverse(forward(x)) equals x. Owner of the `migrations` database.

import fastJsonPatch, { type Operation } from 'fast-json-patch';
import type { MigrationRegistration, PatchSpec } from './commands.js';
import { SvcError } from '../base/errors.js';
import type { KeyedCatalog } from '../store/index.js';
import { badRequest, canonicalJson, isPlainObject } from './model.js';
import type { Principal } from '../auth/index.js';
import { requireSchemaOwner, schemaNotFound, type SchemaRegistry } from './schemas.js';
import { compileRegisteredSchema } from './validator.js';

const { applyPatch, deepClone } = fastJsonPatch;

interface MigrationRecord {
  fromSchemaUrn: string;
  toSchemaUrn: string;
  namespaceUrn: string;
  forward: PatchSpec;
  inverse: PatchSpec;
  probedInstances: number;
  createdAt: number;
}

const notInvertible = (message: string) => new SvcError('unprocessable', 'migration_not_invertible', message);

/** `data` after the JSON Patch `ops` (paths relative to the data object); throws when an op cannot apply. */
export function transform(data: unknown, ops: Operation[]): unknown {
  const doc = { data: deepClone(data) };
  applyPatch(doc, ops.map((op) => prefixed(op)), true, true, true);
  return doc.data;
}

function prefixed(op: Operation): Operation {
  const out = { ...op, path: `/data${op.path}` } as Operation;
  if ('from' in op && typeof op.from === 'string') (out as { from: string }).from = `/data${op.from}`;
  return out;
}

export class MigrationRegistry {
  constructor(
    private readonly migrations: KeyedCatalog<MigrationRecord>,
    private readonly schemas: SchemaRegistry,
  ) {}

  get(fromSchemaUrn: string, toSchemaUrn: string): Promise<MigrationRecord | undefined> {
    return this.migrations.get(`${fromSchemaUrn} ${toSchemaUrn}`);
  }

  /** POST /v1/migrations: both schemas must be the principal's tenant's (or it holds schema.admin). */
  async register(principal: Principal, registration: MigrationRegistration): Promise<{ record: MigrationRecord; created: boolean }> {
    const { fromSchemaUrn, toSchemaUrn, forward, inverse } = registration;
    const [from, to] = await Promise.all([this.schemas.get(fromSchemaUrn), this.schemas.get(toSchemaUrn)]);
    if (!from) throw schemaNotFound(fromSchemaUrn);
    if (!to) throw schemaNotFound(toSchemaUrn);
    requireSchemaOwner(principal, from, 'registering a migration from it');
    requireSchemaOwner(principal, to, 'registering a migration to it');
    if (from.namespaceUrn !== to.namespaceUrn) throw badRequest(`Both schemas must belong to one namespace (${from.namespaceUrn} ≠ ${to.namespaceUrn})`);
    const probed = probe(from.jsonSchema, to.jsonSchema, forward.ops, inverse.ops);
    const fresh: MigrationRecord = { fromSchemaUrn, toSchemaUrn, namespaceUrn: from.namespaceUrn, forward, inverse, probedInstances: probed, createdAt: Date.now() };
    const { record, created } = await this.migrations.putIfAbsent(`${fromSchemaUrn} ${toSchemaUrn}`, fresh);
    if (!created && canonicalJson([record.forward, record.inverse]) !== canonicalJson([forward, inverse])) {
      throw new SvcError('conflict', 'migration_conflict', `A different migration from ${fromSchemaUrn} to ${toSchemaUrn} is registered`);
    }
    return { record, created };
  }
}

/** Runs the invertibility probe; the number of instances checked. */
function probe(source: Record<string, unknown>, target: Record<string, unknown>, forward: Operation[], inverse: Operation[]): number {
  const validSource = compileRegisteredSchema(source);
  const validTarget = compileRegisteredSchema(target);
  const candidates = [...(Array.isArray(source.examples) ? source.examples : []), generate(source, 'min'), generate(source, 'max')];
  const instances = candidates.filter((x) => validSource(x).length === 0);
  if (instances.length === 0) throw notInvertible('No instance of the source schema could be generated to probe the migration; add "examples" to the source schema');
  for (const [i, x] of instances.entries()) {
    let y: unknown;
    let back: unknown;
    try {
      y = transform(x, forward);
    } catch (err) {
      throw notInvertible(`forward does not apply to probe instance ${i}: ${(err as Error).name}`);
    }
    const issues = validTarget(y);
    if (issues.length) throw notInvertible(`forward output of probe instance ${i} does not validate against the target schema: ${issues[0]!.path} ${issues[0]!.message}`);
    try {
      back = transform(y, inverse);
    } catch (err) {
      throw notInvertible(`inverse does not apply to the forward output of probe instance ${i}: ${(err as Error).name}`);
    }
    if (canonicalJson(back) !== canonicalJson(x)) throw notInvertible(`inverse(forward(x)) differs from x for probe instance ${i}: the forward transform loses information`);
  }
  return instances.length;
}

/**
 * An instance of a JSON Schema: `min` takes only required properties and empty arrays, `max`
 * every property and one item per array; values from const, enum, default, bounds and formats.
 */
export function generate(schema: unknown, mode: 'min' | 'max', depth = 0): unknown {
  if (!isPlainObject(schema) || depth > 16) return null;
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length) return mode === 'min' ? schema.enum[0] : schema.enum[schema.enum.length - 1];
  if (schema.default !== undefined) return schema.default;
  const types = Array.isArray(schema.type) ? schema.type.filter((t) => t !== 'null') : [schema.type];
  switch (types[0] ?? (schema.properties ? 'object' : undefined)) {
    case 'object': {
      const props = isPlainObject(schema.properties) ? schema.properties : {};
      const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
      const keys = mode === 'min' ? required : [...new Set([...Object.keys(props), ...required])];
      return Object.fromEntries(keys.map((k) => [k, generate(props[k] ?? {}, mode, depth + 1)]));
    }
    case 'array': {
      const count = Math.max(typeof schema.minItems === 'number' ? schema.minItems : 0, mode === 'max' ? 1 : 0);
      return Array.from({ length: count }, () => generate(schema.items ?? {}, mode, depth + 1));
    }
    case 'string':
      return sampleString(schema, mode);
    case 'integer':
    case 'number': {
      const min = typeof schema.minimum === 'number' ? schema.minimum : typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + 1 : undefined;
      const max = typeof schema.maximum === 'number' ? schema.maximum : typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum - 1 : undefined;
      return mode === 'min' ? (min ?? 0) : (max ?? (min ?? 0) + 1);
    }
    case 'boolean':
      return mode === 'max';
    default:
      return null;
  }
}

function sampleString(schema: Record<string, unknown>, mode: 'min' | 'max'): string {
  switch (schema.format) {
    case 'date-time':
      return '2024-01-02T03:04:05Z';
    case 'date':
      return '2024-01-02';
    case 'email':
      return 'someone@example.com';
    case 'uri':
      return 'https://example.com/x';
    case 'uuid':
      return '01890a5d-ac96-774b-bcce-b302099a8057';
  }
  const length = Math.max(typeof schema.minLength === 'number' ? schema.minLength : 0, mode === 'max' ? 8 : 1);
  return (mode === 'min' ? 'a' : 'sample-text').repeat(length).slice(0, length);
}
