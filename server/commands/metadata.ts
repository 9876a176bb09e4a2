// Metadata requests parsed into typed commands (engine/documents/commands.ts): bundles, provenance,
// canonical and derived writes, patches. Every refusal is a MetadataRejection (the rejection form
// of metadata writes), as the engine answered them before they were parsed here.

import fastJsonPatch, { type Operation } from 'fast-json-patch';
import type { BundleRequest, CanonicalWrite, DerivedWriteRequest, Parse, PatchEntry } from '../../engine/documents/commands.js';
import type { Provenance } from '../../engine/documents/doc-jobs.js';
import { MetadataRejection } from '../../engine/documents/index.js';
import { isNamespaceUrn, isPlainObject, isSchemaUrn } from '../../engine/documents/model.js';
import { BUNDLE_MAX_NAMESPACES, PATCH_MAX_BYTES, PATCH_MAX_OPS } from '../../engine/base/limits.js';
import { bundleUrns } from './urns.js';

const { validate: validatePatch } = fastJsonPatch;

const reject = (message: string) => new MetadataRejection('invalid', 'invalid_request', message);

/**
 * POST /v1/documents/{id}/metadata: `{ mode, bundle, provenance?, reason? }`. Its shape, the
 * bundle's URNs and the mode now; the write's command when the engine asks for it (Parse).
 */
export function parseMetadataWrite(body: unknown): { mode: 'canonical'; parse: Parse<CanonicalWrite> } | { mode: 'derived'; parse: Parse<DerivedWriteRequest> } {
  if (!isPlainObject(body)) throw reject('The body must be { mode, bundle, provenance?, reason? }');
  for (const key of Object.keys(body)) if (!['mode', 'bundle', 'provenance', 'reason'].includes(key)) throw reject(`unknown field "${key}"`);
  bundleUrns(body.bundle);
  if (body.mode === 'canonical') return { mode: 'canonical', parse: () => canonicalWrite(body) };
  if (body.mode === 'derived') return { mode: 'derived', parse: () => ({ bundle: readBundle(body.bundle, 'bundle'), provenance: readProvenance(body.provenance) }) };
  throw reject('mode must be "canonical" or "derived"');
}

function canonicalWrite(body: Record<string, unknown>): CanonicalWrite {
  const bundle = readBundle(body.bundle, 'bundle');
  if (body.reason !== undefined && typeof body.reason !== 'string') throw reject('reason must be a string');
  return { bundle, ...(body.reason === undefined ? {} : { reason: body.reason }) };
}

/** `{ namespaces: { <urn:svc:ns>: { schema, data } } }` → entries (ids are minted by the engine). */
export function readBundle(raw: unknown, where: string): BundleRequest {
  if (!isPlainObject(raw) || !isPlainObject(raw.namespaces)) throw reject(`${where} must be { namespaces: { <namespace URN>: { schema, data } } }`);
  for (const key of Object.keys(raw)) if (key !== 'namespaces') throw reject(`${where}: unknown field "${key}"`);
  const entries = Object.entries(raw.namespaces);
  if (entries.length === 0) throw reject(`${where}.namespaces is empty`);
  if (entries.length > BUNDLE_MAX_NAMESPACES) throw reject(`${where} has more than ${BUNDLE_MAX_NAMESPACES} namespaces`);
  const out: BundleRequest = {};
  for (const [ns, entry] of entries) {
    if (!isNamespaceUrn(ns)) throw reject(`${where}: namespace key "${String(ns).slice(0, 200)}" is not a URN of the form urn:svc:<name>`);
    if (!isPlainObject(entry)) throw reject(`${where}.namespaces["${ns}"] must be { schema, data }`);
    for (const key of Object.keys(entry)) if (!['schema', 'data', 'id'].includes(key)) throw reject(`${where}.namespaces["${ns}"]: unknown field "${key}"`);
    const schema = schemaUrnOf(entry.schema);
    if (!isSchemaUrn(schema)) throw reject(`${where}.namespaces["${ns}"].schema must be urn:svc:schema:<name>@<semver> or { "$id": "urn:svc:schema:<name>@<semver>" }`);
    if (!isPlainObject(entry.data)) throw reject(`${where}.namespaces["${ns}"].data must be a JSON object (no scalar or array roots)`);
    out[ns] = { schema, data: entry.data };
  }
  return out;
}

/** An entry's `schema` as written: the URN, or `{ "$id": <URN> }` (envelope v1.1); anything else is returned for the caller to refuse. */
function schemaUrnOf(v: unknown): unknown {
  if (isPlainObject(v) && Object.keys(v).length === 1 && '$id' in v) return v.$id;
  return v;
}

/** POST .../metadata/{ns}/patch: `{ mode: "canonical", baseMetadataId, patch, reason }` of at most PATCH_MAX_BYTES. */
export function parsePatch(body: unknown, bodyBytes: number): PatchEntry {
  if (bodyBytes > PATCH_MAX_BYTES) throw new MetadataRejection('too_large', 'patch_too_large', `A patch request is at most ${PATCH_MAX_BYTES} bytes`);
  if (!isPlainObject(body)) throw reject('The body must be { mode: "canonical", baseMetadataId, patch, reason }');
  for (const key of Object.keys(body)) if (!['mode', 'baseMetadataId', 'patch', 'reason'].includes(key)) throw reject(`unknown field "${key}"`);
  if (body.mode !== 'canonical') throw reject('mode must be "canonical" (derived metadata is not patched)');
  if (typeof body.baseMetadataId !== 'string' || !/^meta_[0-9A-HJKMNP-TV-Z]{26}$/.test(body.baseMetadataId)) throw reject('baseMetadataId must be a metadata id (meta_<ULID>)');
  if (typeof body.reason !== 'string' || body.reason.trim() === '') throw reject('reason is required');
  if (!Array.isArray(body.patch) || body.patch.length === 0) throw reject('patch must be a non-empty array of RFC 6902 operations');
  if (body.patch.length > PATCH_MAX_OPS) throw new MetadataRejection('too_large', 'patch_too_large', `A patch has at most ${PATCH_MAX_OPS} operations`);
  const error = validatePatch(body.patch as Operation[]);
  if (error) throw reject(`patch[${error.index}] is not a valid RFC 6902 operation: ${error.name}`);
  for (const [i, op] of (body.patch as Operation[]).entries()) {
    const paths = [op.path, 'from' in op ? op.from : undefined].filter((p): p is string => p !== undefined);
    if (paths.some((p) => p === '/schema' || p.startsWith('/schema/') || p === '/id' || p.startsWith('/id/'))) {
      throw new MetadataRejection('invalid', 'schema_change_forbidden', `patch[${i}] touches ${op.path}: the schema and id of an entry cannot be patched (schema changes go through a migration)`);
    }
    if (!paths.every((p) => p === '/data' || p.startsWith('/data/'))) throw reject(`patch[${i}]: paths are relative to the entry and must be under /data`);
  }
  return { baseMetadataId: body.baseMetadataId, patch: body.patch as Operation[], reason: body.reason };
}

/** Provenance of a derived write: required; producer, producedAt, input and an optional confidence in 0..1. */
export function readProvenance(v: unknown): Provenance {
  if (v === undefined) throw new MetadataRejection('invalid', 'provenance_required', 'A derived write needs provenance { producer, producedAt, input, confidence? }');
  if (!isPlainObject(v)) throw reject('provenance must be an object');
  for (const key of Object.keys(v)) if (!['producer', 'producedAt', 'input', 'confidence'].includes(key)) throw reject(`provenance: unknown field "${key}"`);
  const p = v.producer;
  if (!isPlainObject(p) || typeof p.name !== 'string' || p.name === '' || typeof p.version !== 'string' || p.version === '') throw reject('provenance.producer must be { name, version }');
  if (typeof v.producedAt !== 'string' || Number.isNaN(Date.parse(v.producedAt)) || !/^\d{4}-\d{2}-\d{2}T/.test(v.producedAt)) throw reject('provenance.producedAt must be an ISO 8601 timestamp');
  const input = v.input;
  if (!isPlainObject(input) || (input.kind !== 'blob' && input.kind !== 'view') || typeof input.key !== 'string' || input.key === '') {
    throw reject('provenance.input must be { kind: "blob" | "view", key }');
  }
  if (v.confidence !== undefined && (typeof v.confidence !== 'number' || !(v.confidence >= 0 && v.confidence <= 1))) throw reject('provenance.confidence must be a number from 0 to 1');
  return {
    producer: { name: p.name, version: p.version },
    producedAt: v.producedAt,
    input: { kind: input.kind, key: input.key },
    ...(v.confidence === undefined ? {} : { confidence: v.confidence }),
  };
}
