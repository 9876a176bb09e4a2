// Metadata schemas: registration (idempotent by canonical hash), lookup, lifecycle, and
// validation of metadata data with ajv against JSON Schema 2020-12. Owner of the `schemas` table
// (registrations, never changed) and `schema_lifecycle` (where each has moved since).

import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { type CursorSeal, type Principal, holds } from '../auth/index.js';
import { SvcError } from '../base/errors.js';
import { SCHEMA_LIFECYCLE_CACHE_MS } from '../base/limits.js';
import { type KeyedCatalog, type Unit, type UnitStore, table } from '../store/index.js';
import { LIFECYCLES, type Lifecycle, type LifecycleMove, type SchemaRegistration } from './commands.js';

export type { Lifecycle };
import { badRequest, forbidden, canonicalJson } from './model.js';
import { compileRegisteredSchema, compileSchema, SchemaPatternError, SchemaTooCostly, type ValidationIssue } from './validator.js';

export type { ValidationIssue };

export interface SchemaRecord {
  schemaUrn: string;
  namespaceUrn: string;
  /** As registered; `get` and `list` give the current one. */
  lifecycle: Lifecycle;
  jsonSchema: Record<string, unknown>;
  /** SHA-256 of the registration's canonical JSON. */
  hash: string;
  createdAt: number;
  /** When it became deprecated (current records only). */
  deprecatedAt?: number;
  /**
   * The tenant that registered it, which alone (or schema.admin) changes its lifecycle and
   * migrates from or to it; absent on the platform's own schemas and on those registered before
   * schemas had owners (schema.admin only).
   */
  tenant?: string;
}


interface LifecycleChange {
  lifecycle: Lifecycle;
  changedAt: number;
  deprecatedAt?: number;
}

// Watched: every node keeps the lifecycles it read (SchemaRegistry.current) until one changes.
const LIFECYCLE = table<LifecycleChange, string>('schema_lifecycle', { watched: true });

/**
 * A schema belongs to the tenant that registered it: its lifecycle changes, and migrations from or
 * to it (registered or run), need that tenant or the operator capability `schema.admin` (403
 * otherwise). A schema without an owner (the platform's own, or registered before schemas had
 * owners) is changed by schema.admin alone.
 */
export function requireSchemaOwner(principal: Principal, record: SchemaRecord, doing: string): void {
  if (record.tenant !== undefined && record.tenant === principal.tenant) return;
  if (holds(principal, 'schema.admin')) return;
  const whose = record.tenant === undefined ? 'has no owning tenant (the platform\'s, or registered before schemas had owners)' : 'belongs to another tenant';
  throw forbidden(`${record.schemaUrn} ${whose}: ${doing} needs ${record.tenant === undefined ? '' : 'its tenant or '}schema.admin`);
}

/** Compiled validators kept: a schema used less often is compiled again when next used. */
const COMPILED_SCHEMAS = 1000;

export const schemaNotFound = (urn: string) => new SvcError('not_found', 'schema_not_found', `No schema ${urn}`);

export class SchemaRegistry {
  /** Compiled validators of the schemas used most recently (each holds its schema's structure and patterns). */
  private readonly compiled = new LRUCache<string, (data: unknown) => ValidationIssue[]>({ max: COMPILED_SCHEMAS });
  /**
   * Lifecycle changes read, by URN (`null`: none), forgotten when any lifecycle changes (the
   * store's watch: every node, also after a lost notification) and at most
   * SCHEMA_LIFECYCLE_CACHE_MS old. Writes read lifecycles outside their units anyway (a retire
   * committing meanwhile is not their precondition): the cache widens that window by the
   * notification's delay, and saves a write a catalog read (pg-s3: a round trip).
   */
  private readonly lifecycles = new LRUCache<string, { change: LifecycleChange | null }>({ max: COMPILED_SCHEMAS, ttl: SCHEMA_LIFECYCLE_CACHE_MS });
  /** Counts announced lifecycle changes: a read that began before one is not kept. */
  private lifecycleGeneration = 0;

  constructor(
    private readonly schemas: KeyedCatalog<SchemaRecord>,
    private readonly store: UnitStore,
    private readonly cursors: CursorSeal,
  ) {
    // For the registry's life, which is the store's (its close ends every watch).
    store.watch(LIFECYCLE.name, () => {
      this.lifecycleGeneration++;
      this.lifecycles.clear();
    });
  }

  /** The registration with its current lifecycle. */
  async get(urn: string): Promise<SchemaRecord | undefined> {
    const record = await this.schemas.get(urn);
    return record && this.current(record);
  }

  /** Whether `urn` is registered, read in `unit` (a registration committing meanwhile runs the unit again). */
  registeredIn(unit: Unit, urn: string): Promise<boolean> {
    return this.schemas.hasIn(unit, urn);
  }

  /**
   * GET /v1/schemas: registrations in URN order with their current lifecycle, of one namespace
   * when given; a page goes on after the last URN, sealed in a cursor of this caller and namespace.
   */
  async list(principal: Principal, namespaceUrn: string | undefined, limit: number, cursor?: string): Promise<{ schemas: SchemaRecord[]; nextCursor?: string }> {
    const cursors = this.cursors.of('schemas', principal);
    const after = cursors.open(namespaceUrn ?? null, cursor);
    const { records, more } = await this.schemas.page(after, limit, (record) => namespaceUrn === undefined || record.namespaceUrn === namespaceUrn);
    const schemas = await Promise.all(records.map((r) => this.current(r)));
    return more ? { schemas, nextCursor: cursors.seal(namespaceUrn ?? null, schemas[schemas.length - 1]!.schemaUrn) } : { schemas };
  }

  /**
   * PATCH /v1/schemas/{urn}: moves the schema forward to `lifecycle` (the same one again changes
   * nothing); backwards is 409 `lifecycle_backwards`. Only its tenant or schema.admin (403).
   */
  async moveLifecycle(principal: Principal, urn: string, { lifecycle }: LifecycleMove): Promise<SchemaRecord> {
    const record = await this.schemas.get(urn);
    if (!record) throw schemaNotFound(urn);
    requireSchemaOwner(principal, record, 'changing its lifecycle');
    await this.store.run(async (unit) => {
      const change = await unit.get(LIFECYCLE, urn);
      const from = change?.lifecycle ?? record.lifecycle;
      if (LIFECYCLES.indexOf(lifecycle) < LIFECYCLES.indexOf(from)) {
        throw new SvcError('conflict', 'lifecycle_backwards', `${urn} is ${from}; a lifecycle only moves forward (${LIFECYCLES.join(' → ')})`);
      }
      if (lifecycle === from) return;
      const now = Date.now();
      const deprecatedAt = change?.deprecatedAt ?? (lifecycle === 'deprecated' || lifecycle === 'retired' ? now : undefined);
      unit.put(LIFECYCLE, urn, { lifecycle, changedAt: now, ...(deprecatedAt === undefined ? {} : { deprecatedAt }) });
    });
    return (await this.get(urn))!;
  }

  /**
   * Registers a schema as `owner`'s (undefined: the platform's): `created` false for an identical
   * re-registration (whoever asks: the owner stays the first registrant); 409 for a different
   * body. `alsoWhenCreated` joins the registering unit.
   */
  async register(registration: SchemaRegistration, owner: string | undefined, alsoWhenCreated?: (unit: Unit, urn: string) => Promise<void>): Promise<{ record: SchemaRecord; created: boolean }> {
    const { schemaUrn, namespaceUrn, lifecycle, jsonSchema } = registration;
    let validate: (data: unknown) => ValidationIssue[];
    try {
      validate = compileSchema(jsonSchema);
    } catch (err) {
      if ((err instanceof SchemaPatternError && err.kind === 'unsupported') || err instanceof SchemaTooCostly) {
        throw new SvcError('unprocessable', 'schema_unsupported', `jsonSchema cannot be used: ${err.message}`);
      }
      throw badRequest(`jsonSchema does not compile: ${(err as Error).message}`);
    }
    const canonical = { schemaUrn, namespaceUrn, lifecycle, jsonSchema };
    const hash = createHash('sha256').update(canonicalJson(canonical)).digest('hex');
    const fresh: SchemaRecord = { schemaUrn, namespaceUrn, lifecycle, jsonSchema, hash, createdAt: Date.now(), ...(owner === undefined ? {} : { tenant: owner }) };
    const { record, created } = await this.schemas.putIfAbsent(schemaUrn, fresh, alsoWhenCreated && ((unit) => alsoWhenCreated(unit, schemaUrn)));
    if (record.hash !== hash) throw new SvcError('conflict', 'schema_conflict', `${schemaUrn} is registered with a different body; register a new version`);
    this.compiled.set(schemaUrn, validate);
    return { record: await this.current(record), created };
  }

  private async current(record: SchemaRecord): Promise<SchemaRecord> {
    let cached = this.lifecycles.get(record.schemaUrn);
    if (!cached) {
      const generation = this.lifecycleGeneration;
      cached = { change: (await this.store.get(LIFECYCLE, record.schemaUrn)) ?? null };
      // A change announced while this read ran may be newer than what it read: not kept.
      if (generation === this.lifecycleGeneration) this.lifecycles.set(record.schemaUrn, cached);
    }
    const { change } = cached;
    if (!change) return record.lifecycle === 'deprecated' || record.lifecycle === 'retired' ? { ...record, deprecatedAt: record.createdAt } : record;
    return { ...record, lifecycle: change.lifecycle, ...(change.deprecatedAt === undefined ? {} : { deprecatedAt: change.deprecatedAt }) };
  }

  /** Issues of `data` against the schema (empty: valid). The schema must exist. */
  async validate(schemaUrn: string, data: unknown): Promise<ValidationIssue[]> {
    const record = await this.schemas.get(schemaUrn);
    if (!record) return [{ path: '', code: 'schema_not_found', message: `No schema ${schemaUrn} is registered` }];
    let validate = this.compiled.get(schemaUrn);
    if (!validate) {
      validate = compileRegisteredSchema(record.jsonSchema);
      this.compiled.set(schemaUrn, validate);
    }
    return validate(data);
  }
}
