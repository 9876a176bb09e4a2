// Metadata writes: the rejection form of their refusals (`{ status: "rejected", error: { code,
// message, errors? } }`), the bytes of an entry as stored, and a patch applied to an entry. The
// requests themselves are parsed at the edge (server/commands/metadata.ts).

import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { type FailureDetails, type FailureKind, SvcError } from '../base/errors.js';
import { isPlainObject, type MetadataEntry } from './model.js';
import type { ValidationIssue } from './schemas.js';

const { applyOperation, getValueByPointer, deepClone } = fastJsonPatch;


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
