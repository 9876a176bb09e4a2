// tus concatenation: a final upload made of the tenant's finished partial uploads, in order, as one
// blob of their blocks (no byte copied or stored again), within the tenant's limits on the whole object.

import { createHash } from 'node:crypto';
import type { Clock } from '../base/clock.js';
import { ingestFailed, invalidUpload, payloadTooLarge, uploadExists, uploadNotFound } from '../base/errors.js';
import type { Stats } from '../ops/index.js';
import type { BlobCatalog, CommittedSession, Manifest, SessionRecord, StoredBlock, TusFacts, UploadCatalog } from '../store/index.js';
import { type ByteCaller, type TenantGate, publicationQuota } from '../tenancy/index.js';
import { moveSession } from './session-machine.js';

export interface ConcatenationRequest {
  tenant: string;
  /** The final upload's id. */
  id: string;
  /** The partial uploads' ids, in order. */
  partials: string[];
  contentType?: string;
  tus: TusFacts;
  /** The largest object (tus: SVC_MAX_UPLOAD_BYTES). */
  maxBytes: number;
}

/** What a concatenation reads and writes (the session service's own). */
export interface ConcatenationDeps {
  manifests: BlobCatalog;
  ledger: UploadCatalog;
  /** A published blob's bytes, in order: the whole object's SHA-256 is taken by reading them. */
  readBlob: (manifest: Manifest) => AsyncIterable<Buffer>;
  stats: Stats;
  gate: TenantGate;
  tenantBlobs?: boolean;
  config: { ttlMs: number };
  clock: Clock;
  /** The session as its tenant sees it (Uploads.status). */
  status(tenant: string, id: string): Promise<SessionRecord>;
}

/**
 * A tus final upload: the tenant's finished partial uploads, in order, as one blob. The blob
 * is made of the partials' blocks as they are (sessions keep every block in the block store):
 * no byte is copied or stored again; the whole object's SHA-256 is taken by reading them. The
 * blob is published before the session's record is written, Committed: a crash between leaves
 * a blob that a retried creation finds again.
 */
export async function concatenate(
deps: ConcatenationDeps,
request: ConcatenationRequest,
/** With security on: the tenant's limits apply to the whole object (TenantGate.assembled), before any byte is read. */
caller?: ByteCaller,
): Promise<CommittedSession> {
  const { tenant, partials } = request;
  // Each partial once: a partial listed again would make the server read its bytes again for nothing.
  const repeated = partials.find((id, i) => partials.indexOf(id) !== i);
  if (repeated !== undefined) throw invalidUpload(`Upload-Concat: partial upload ${repeated} is listed more than once`);
  const manifests: Manifest[] = [];
  for (const id of partials) {
    const partial = await deps.status(tenant, id);
    if (partial.tus?.concat !== 'partial') throw invalidUpload(`Upload ${id} is not a partial upload (Upload-Concat: partial)`);
    if (partial.state !== 'Committed') throw invalidUpload(`Partial upload ${id} is not finished (${partial.offset} of ${partial.declaredLength ?? 'an undeclared number of'} bytes)`);
    const manifest = await deps.manifests.get(partial.committedBlob, deps.tenantBlobs ? tenant : undefined);
    if (!manifest) throw uploadNotFound(id);
    if (manifest.record.inline) throw ingestFailed(`Partial upload ${id}'s blob is kept inline`);
    manifests.push(manifest);
  }
  const length = manifests.reduce((sum, m) => sum + m.record.size, 0);
  if (length > request.maxBytes) throw payloadTooLarge(request.maxBytes);
  const quota = await deps.gate.assembled(caller, length);
  const hash = createHash('sha256');
  for (const manifest of manifests) for await (const bytes of deps.readBlob(manifest)) hash.update(bytes);
  const hex = hash.digest('hex');
  const blocks: StoredBlock[] = [];
  for (const manifest of manifests) {
    for (let i = 0; i < manifest.blockCount; i++) {
      const { hex: blockHex, size, checksum } = manifest.block(i);
      blocks.push({ hex: blockHex, size, checksum, fresh: false });
    }
  }
  const chunkers = new Set(manifests.map((m) => m.record.chunker));
  const chunker = chunkers.size === 1 ? manifests[0]!.record.chunker : 'concatenation';
  const mediaType = request.contentType ?? manifests[0]!.record.mediaType;
  const publication = deps.tenantBlobs ? { tenant, tenantBlocks: true, ...publicationQuota(quota, length) } : {};
  const { manifest, existed } = await deps.manifests.publish(hex, length, mediaType, chunker, blocks, undefined, publication);
  deps.stats.recordPublication(blocks, existed);
  const record = moveSession(undefined, { type: 'concatenated', id: request.id, tenant, length, blob: manifest.id, contentType: request.contentType, tus: request.tus, now: deps.clock.now(), ttlMs: deps.config.ttlMs });
  return deps.ledger.update(request.id, (current) => {
    if (current) throw uploadExists(request.id);
    return record;
  });
}
