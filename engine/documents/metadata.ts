// Metadata requests: bundles, patches, and the rejection form of metadata writes
// (`{ status: "rejected", error: { code, message, errors? } }`).

import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { type FailureDetails, type FailureKind, SvcError } from '../errors.js';
import { isNamespaceUrn, isPlainObject, isSchemaUrn, type MetadataEntry } from './model.js';
import type { ValidationIssue } from './schemas.js';
import type { Provenance } from './doc-jobs.js';
import { BUNDLE_MAX_NAMESPACES, PATCH_MAX_BYTES, PATCH_MAX_OPS } from '../base/limits.js';

const { applyOperation, getValueByPointer, validate: validatePatch, deepClone } = fastJsonPatch;


/** A refused metadata write; its body is the rejection form, with `extra` beside `error` (e.g. currentMetadataId). */
export class MetadataRejection extends SvcError {
  constructor(
    kind: FailureKind,
    code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly errors?: ValidationIssue[],
    details: FailureDetails = {},
  ) {
    super(kind, code, message, details);
  }

  static invalid(errors: ValidationIssue[]): MetadataRejection {
    return new MetadataRejection('unprocessable', 'VALIDATION_FAILED', `The metadata does not validate (${errors.length} issue${errors.length === 1 ? '' : 's'})`, {}, errors);
  }

  body(): unknown {
    return { status: 'rejected', error: { code: this.code, message: this.message, ...(this.errors ? { errors: this.errors } : {}) }, ...this.extra };
  }
}

/** The bytes of a metadata entry as stored (its JSON, UTF-8): what SVC_MAX_METADATA_ENTRY_BYTES bounds and the tenant's quota counts. */
export function storedEntryBytes(entry: MetadataEntry): number {
  return Buffer.byteLength(JSON.stringify(entry));
}

/** 413: an entry of `namespaceUrn` over SVC_MAX_METADATA_ENTRY_BYTES. */
export const metadataEntryTooLarge = (namespaceUrn: string, bytes: number, limit: number) =>
  new MetadataRejection('too_large', 'metadata_entry_too_large', `The ${namespaceUrn} entry would be ${bytes} bytes as stored; an entry is at most ${limit} bytes (SVC_MAX_METADATA_ENTRY_BYTES)`);

const reject = (message: string) => new MetadataRejection('invalid', 'invalid_request', message);

/** `{ namespaces: { <urn:svc:ns>: { schema, data } } }` → entries (ids are minted by the caller). */
export function readBundle(raw: unknown, where: string): Record<string, { schema: string; data: Record<string, unknown> }> {
  if (!isPlainObject(raw) || !isPlainObject(raw.namespaces)) throw reject(`${where} must be { namespaces: { <namespace URN>: { schema, data } } }`);
  for (const key of Object.keys(raw)) if (key !== 'namespaces') throw reject(`${where}: unknown field "${key}"`);
  const entries = Object.entries(raw.namespaces);
  if (entries.length === 0) throw reject(`${where}.namespaces is empty`);
  if (entries.length > BUNDLE_MAX_NAMESPACES) throw reject(`${where} has more than ${BUNDLE_MAX_NAMESPACES} namespaces`);
  const out: Record<string, { schema: string; data: Record<string, unknown> }> = {};
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

interface PatchRequest {
  baseMetadataId: string;
  patch: Operation[];
  reason: string;
}

export function checkPatchBody(body: unknown, bodyBytes: number): PatchRequest {
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

const jsonBytes = (v: unknown) => (v === undefined ? 0 : Buffer.byteLength(JSON.stringify(v)));

/**
 * The entry's data after the patch (the entry is untouched); a failing `test` or a bad path is
 * 422. Applied op by op and kept within `maxBytes` (413 metadata_entry_too_large as soon as it
 * passes): each op that adds (add, replace, copy) adds its value's bytes to a bound of the data's
 * size, measured again exactly when the bound passes `maxBytes`. So a few small `copy` ops that
 * double the data each time stop at the limit instead of growing it exponentially.
 */
export function applyEntryPatch(entry: MetadataEntry, namespaceUrn: string, patch: Operation[], maxBytes: number): Record<string, unknown> {
  const doc = { data: deepClone(entry.data) as Record<string, unknown> };
  let bound = jsonBytes(doc.data);
  try {
    for (const [i, op] of patch.entries()) {
      // The copied value is read before the op, from data whose size is known to be within the limit.
      const grows = op.op === 'add' || op.op === 'replace' ? jsonBytes(op.value) : op.op === 'copy' ? jsonBytes(getValueByPointer(doc, op.from)) : 0;
      applyOperation(doc, op, true, true, true, i);
      if (grows === 0) continue;
      bound += grows + op.path.length + 4;
      if (bound > maxBytes) {
        bound = jsonBytes(doc.data);
        if (bound > maxBytes) throw metadataEntryTooLarge(namespaceUrn, bound, maxBytes);
      }
    }
  } catch (err) {
    if (err instanceof MetadataRejection) throw err;
    const e = err as { name?: string; index?: number; message?: string };
    throw new MetadataRejection('unprocessable', 'patch_failed', `patch[${e.index ?? '?'}] cannot apply: ${e.name ?? 'error'}`);
  }
  if (!isPlainObject(doc.data)) throw MetadataRejection.invalid([{ path: '/data', code: 'type', message: 'data must stay a JSON object' }]);
  return doc.data;
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
