// The document platform's records, ids and request checks (interface.md section 2, A).

import { randomFillSync } from 'node:crypto';
import { monotonicFactory } from 'ulid';
import { v7 } from 'uuid';
import { SvcError } from '../base/errors.js';
import { EXTERNAL_REFS_MAX, LABEL_MAX_CHARS, LABELS_MAX } from '../base/limits.js';

export const badRequest = (message: string) => new SvcError('invalid', 'invalid_request', message);
export const documentNotFound = (id: string) => new SvcError('not_found', 'document_not_found', `No document ${id}`);
export const forbidden = (message: string) => new SvcError('forbidden', 'forbidden', message);

export const PLACEMENTS = ['transient', 'archival', 'legal_hold'] as const;
export type PlacementHint = (typeof PLACEMENTS)[number];

/** An optional placementHint of a request: one of PLACEMENTS, else 400. */
export function parsePlacement(v: unknown): PlacementHint | undefined {
  if (v !== undefined && !PLACEMENTS.includes(v as PlacementHint)) throw badRequest(`placementHint must be one of ${PLACEMENTS.join(', ')}`);
  return v as PlacementHint | undefined;
}

export interface ExternalRef {
  system: string;
  value: string;
  meta?: Record<string, string>;
}

export interface PermissionRule {
  effect: 'allow' | 'deny';
  actions: string[];
  principals: string[];
}

export interface MetadataEntry {
  schema: string;
  id: string;
  data: Record<string, unknown>;
  /** Absent on entries written before envelope v1.1. */
  receipt?: Receipt;
}

/** The request a write arrived in (its X-Request-Id and when it arrived, ms since the epoch). */
export interface RequestInfo {
  requestId: string;
  receivedAt: number;
}

/**
 * Who wrote an entry, in which request, and when it arrived and was recorded (envelope v1.1's
 * `receipt`). `recordedAt` is set in the unit that stores the entry.
 */
export interface Receipt {
  receivedAt: number;
  recordedAt?: number;
  sub: string;
  org: string;
  requestId: string;
}

export const receiptOf = (principal: { subject: string; tenant: string }, request: RequestInfo): Receipt => ({
  receivedAt: request.receivedAt, sub: principal.subject, org: principal.tenant, requestId: request.requestId,
});

export type Bundle = Record<string, MetadataEntry>;

export interface ContentRef {
  kind: 'blob' | 'view';
  key: string;
}

export interface DocumentRecord {
  documentId: string;
  tenant: string;
  currentVersionId: string | null;
  externalRefs: ExternalRef[];
  placementHint: PlacementHint;
  permissions: PermissionRule[];
  /** Canonical metadata of the first version, validated at creation. */
  initialMetadata: Bundle;
  /** The document's upload (create-or-resume returns it). */
  uploadId: string;
  createdBy: string;
  createdAt: number;
  updatedAt: number;
}

export interface UploadRecord {
  uploadId: string;
  tenant: string;
  documentId: string;
  state: 'open' | 'received' | 'finalized';
  content?: { key: string; size: number; mediaType: string };
  versionId?: string;
}

export interface VersionRecord {
  versionId: string;
  parents: string[];
  contentRef: ContentRef;
  /** The media type the content was uploaded with (served as its Content-Type). */
  contentType: string;
  metadata: Bundle;
  permissionsSnapshot: PermissionRule[];
  actor: string;
  reason: string;
  createdAt: number;
}

export const newId = (): string => v7();
/**
 * ulid's default PRNG asks webcrypto for one byte per character (16 system calls per id, about
 * 80 µs of a canonical write): a pool of bytes from the same CSPRNG, refilled 4 KiB at a time,
 * gives the same randomness for a fraction of the cost.
 */
const randomPool = Buffer.alloc(4096);
let randomAt = randomPool.length;
function pooledRandom(): number {
  if (randomAt === randomPool.length) {
    randomFillSync(randomPool);
    randomAt = 0;
  }
  return randomPool[randomAt++]! / 256;
}
const ulid = monotonicFactory(pooledRandom);
export const newMetadataId = (): string => `meta_${ulid()}`;

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
/** When a metadata id was minted (a ULID's first 10 characters are its milliseconds). */
export function metadataIdTime(id: string): number {
  let ms = 0;
  for (let i = 5; i < 15; i++) ms = ms * 32 + CROCKFORD.indexOf(id[i]!);
  return ms;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID.test(v);

/** `urn:svc:<name>` (a name of letters, digits and `.-_:`), not a schema or view URN. */
const NAMESPACE_URN = /^urn:svc:(?!schema:|view:)[a-z0-9][a-z0-9._:-]{0,127}$/i;
/** `urn:svc:schema:<name>@<semver>` */
const SCHEMA_URN = /^urn:svc:schema:[a-z0-9][a-z0-9._:-]{0,127}@(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9a-z.-]+)?(\+[0-9a-z.-]+)?$/i;
export const isNamespaceUrn = (v: unknown): v is string => typeof v === 'string' && NAMESPACE_URN.test(v);
export const isSchemaUrn = (v: unknown): v is string => typeof v === 'string' && SCHEMA_URN.test(v);

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Only these keys are allowed in a request object. */
export function onlyKeys(body: Record<string, unknown>, allowed: readonly string[], where: string): void {
  for (const key of Object.keys(body)) if (!allowed.includes(key)) throw badRequest(`${where}: unknown field "${key}"`);
}

export function parseExternalRefs(v: unknown): ExternalRef[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.length > EXTERNAL_REFS_MAX) throw badRequest(`externalRefs must be an array of at most ${EXTERNAL_REFS_MAX} {system, value, meta?}`);
  return v.map((r, i) => {
    if (!isPlainObject(r) || typeof r.system !== 'string' || typeof r.value !== 'string' || r.system === '' || r.value === '') {
      throw badRequest(`externalRefs[${i}] must be {system: string, value: string, meta?: object of strings}`);
    }
    onlyKeys(r, ['system', 'value', 'meta'], `externalRefs[${i}]`);
    if (r.meta !== undefined && (!isPlainObject(r.meta) || !Object.values(r.meta).every((x) => typeof x === 'string'))) {
      throw badRequest(`externalRefs[${i}].meta must be an object of strings`);
    }
    return r.meta === undefined ? { system: r.system, value: r.value } : { system: r.system, value: r.value, meta: r.meta as Record<string, string> };
  });
}

export function parsePermissions(v: unknown): PermissionRule[] {
  if (v === undefined) return [];
  if (!isPlainObject(v) || !Array.isArray(v.rules)) throw badRequest('initialPermissions must be { rules: [ { effect, actions, principals } ] }');
  onlyKeys(v, ['rules'], 'initialPermissions');
  return v.rules.map((r: unknown, i: number) => {
    const where = `initialPermissions.rules[${i}]`;
    if (!isPlainObject(r)) throw badRequest(`${where} must be an object`);
    onlyKeys(r, ['effect', 'actions', 'principals'], where);
    if (r.effect !== 'allow' && r.effect !== 'deny') throw badRequest(`${where}.effect must be "allow" or "deny"`);
    const strings = (x: unknown) => Array.isArray(x) && x.length > 0 && x.every((s) => typeof s === 'string' && s !== '');
    if (!strings(r.actions)) throw badRequest(`${where}.actions must be a non-empty array of strings`);
    if (!strings(r.principals) || !(r.principals as string[]).every((p) => /^(role:.+|user:.+|org:\*)$/.test(p))) {
      throw badRequest(`${where}.principals must be role:<name>, user:<sub> or org:*`);
    }
    return { effect: r.effect, actions: r.actions as string[], principals: r.principals as string[] };
  });
}

export function parseLabels(v: unknown): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.length > LABELS_MAX || !v.every((l) => typeof l === 'string' && l.length <= LABEL_MAX_CHARS && /^[A-Za-z0-9._:-]+$/.test(l))) {
    throw badRequest('labels must be an array of at most 50 labels of 1-64 letters, digits or ._:-');
  }
  return [...new Set(v as string[])];
}

/** JSON with object keys sorted at every level: equal data, equal text. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (isPlainObject(v)) {
    return `{${Object.keys(v)
      .filter((k) => v[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}
