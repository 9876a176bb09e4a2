// The typed commands of the document platform: a request's body parsed and checked at the edge
// (server/commands/) into these, so no operation of the engine reads a raw body. What a command
// holds is well-formed; what depends on stored state (documents, schemas, permissions, quotas) is
// the operation's to check.

import type { Operation } from 'fast-json-patch';
import type { Provenance } from './doc-jobs.js';
import type { ExternalRef, PermissionRule, PlacementHint } from './model.js';
import type { SearchValue } from './search-request.js';

/**
 * A command parsed when the operation asks for it, at the point where it read the body before
 * bodies were parsed at the edge: after what the request names is checked (the document exists,
 * the caller's capability and the document's rules), so a request the caller may not make, or for
 * a document it cannot reach, is refused as such whatever its body.
 */
export type Parse<T> = () => T;

/** A schema's lifecycles: forward only, in this order (decisions, "Schema lifecycle"). */
export const LIFECYCLES = ['draft', 'published', 'deprecated', 'retired'] as const;
export type Lifecycle = (typeof LIFECYCLES)[number];

/** A metadata bundle as sent (`{ namespaces: { <ns>: { schema, data } } }`): entries by namespace, ids not minted yet. */
export type BundleRequest = Record<string, { schema: string; data: Record<string, unknown> }>;

/** POST /v1/documents. */
export interface CreateDocument {
  /** The caller's id (a UUID), else one is minted. */
  documentId?: string;
  placementHint?: PlacementHint;
  externalRefs: ExternalRef[];
  permissions: PermissionRule[];
  initialMetadata?: BundleRequest;
}

/** POST /v1/uploads/{id}/finalize. */
export interface FinalizeUpload {
  labels: string[];
  reason?: string;
}

/** POST /v1/documents/{id}/metadata, mode "canonical". */
export interface CanonicalWrite {
  bundle: BundleRequest;
  reason?: string;
}

/** POST /v1/documents/{id}/metadata, mode "derived". */
export interface DerivedWriteRequest {
  bundle: BundleRequest;
  provenance: Provenance;
}

/** POST /v1/documents/{id}/metadata/{ns}/patch. */
export interface PatchEntry {
  baseMetadataId: string;
  patch: Operation[];
  reason: string;
}

/** POST /v1/documents/{id}/migrate. */
export interface MigrateDocument {
  namespaceUrn: string;
  toSchemaUrn: string;
  reason: string;
}

/** POST /v1/schemas (and the workflows' own schemas at start). */
export interface SchemaRegistration {
  schemaUrn: string;
  namespaceUrn: string;
  lifecycle: Lifecycle;
  jsonSchema: Record<string, unknown>;
}

/** PATCH /v1/schemas/{urn}. */
export interface LifecycleMove {
  lifecycle: Lifecycle;
}

/** A JSON Patch transform of a migration. */
export interface PatchSpec {
  type: 'jsonpatch';
  ops: Operation[];
}

/** POST /v1/migrations. */
export interface MigrationRegistration {
  fromSchemaUrn: string;
  toSchemaUrn: string;
  forward: PatchSpec;
  inverse: PatchSpec;
}

/** POST /v1/migrations/apply. */
export interface BulkMigrationRequest {
  fromSchemaUrn: string;
  toSchemaUrn: string;
  /** [pointer, value] as search takes them. */
  where: Array<[string, SearchValue]>;
  reason: string;
}
