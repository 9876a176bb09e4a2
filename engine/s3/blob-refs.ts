// How many of a tenant's S3 objects name each blob: s3_blob_refs [tenant, blobId] → { count },
// changed in the same unit of work as the objects, so it is never off by a crash. The wiring
// holds the blob for the tenant in the blob catalog while the count is above 0 (the PUT's own
// publication took the hold) and releases it when the count falls to 0; the blob catalog's
// manifests are GC's roots, and `roots()` adds the blobs the index names (objects and parts)
// for the time between a count's change and the catalog's.
//
// Releasing is a protocol, because the catalog is not in the unit: a unit that takes a count to
// 0 leaves the record at 0 and writes s3_blob_releases [tenant, blobId]; the releaser then
// `beginRelease`s (the record is marked `releasing` if still at 0), removes the catalog's hold,
// and `endRelease`s (record and entry go). A write that would raise a releasing count throws
// `blobReleasing` instead: its publication may have come before the catalog's removal, so the
// wiring publishes again and runs the write again (the record is gone by then, or back at 0).
// A releaser that died midway leaves the entry: `pendingReleases` finds it, and the steps run again.
//
// `endRelease` leaves a tombstone: the record at 0 with `releasedAt` (read after the hold's
// removal) and a `released` entry, pruned by the sweep after S3_RELEASE_TOMBSTONE_MS. It closes
// the window after the mark: a PutObject or Complete that published before the removal (finding
// the tenant's hold there, or taking one a later release removed) and writes its object after
// `endRelease` would otherwise meet no mark and name a blob no longer held. A write that raises
// a tombstone's count tells when it published (`Publication.since`, read before publishing): one
// that began before `releasedAt` is refused `blobReleasing` and publishes again; one after it
// writes (the hold it found or took came after the removal); in the same millisecond, only one
// that took the hold itself. A publication older than the tombstones kept is refused too (its
// tombstone may be pruned). docs/architecture.md, "S3 holds and their release".

import type { BlockRoots } from '../base/block-roots.js';
import { type Unit, UnitConflict, type UnitStore, table } from '../store/index.js';
import { blobReleasing } from './errors.js';
import { S3_MAX_PARTS, S3_RELEASE_TOMBSTONE_MS } from '../base/limits.js';
import { PARTS, UPLOADS } from './records.js';

interface RefRecord {
  count: number;
  /** Set by beginRelease while the catalog's hold is being removed. */
  releasing?: true;
  /** A tombstone (count 0): when endRelease saw the catalog's hold removed. */
  releasedAt?: number;
}

const REFS = table<RefRecord, [string, string]>('s3_blob_refs');
/**
 * Counts that reached 0 and whose catalog hold is still to be released: [tenant, blobId] → when;
 * or, for a blob API DELETE under way, `{ at, kind: 'delete' }`: its mark only, which a sweep
 * ends without touching the hold (a delete cut short by a crash is whatever the catalog says).
 */
type PendingRelease = number | { at: number; kind: 'delete' | 'released' };
const RELEASES = table<PendingRelease, [string, string]>('s3_blob_releases');
const isTombstoneEntry = (entry: PendingRelease) => typeof entry === 'object' && entry.kind === 'released';

/**
 * How the writer of an object got the tenant's hold on its blob (a PutObject's or a Complete's
 * publication): `tookHold` false, it found the hold there; `since`, read before it published.
 */
export interface Publication {
  blobId: string;
  tookHold: boolean;
  since: number;
}

/** What a unit's changes of counts mean for the catalog: blobs that became held (0 → n) and released (n → 0). */
export interface RefChanges {
  held: string[];
  released: string[];
}

/**
 * In the caller's unit: adds each delta to the tenant's count of its blob (net deltas: a blob
 * dropped and named again in one unit changes nothing). Reads each count (a precondition), so
 * units that change one count run one after the other. `publication`: how the writer holds the
 * blob it names, judged against a tombstone (above).
 */
export async function adjustRefs(unit: Unit, tenant: string, deltas: ReadonlyMap<string, number>, now: number, publication?: Publication): Promise<RefChanges> {
  const changes: RefChanges = { held: [], released: [] };
  for (const [blobId, delta] of deltas) {
    if (delta === 0) continue;
    const key: [string, string] = [tenant, blobId];
    const record = await unit.get(REFS, key);
    const before = record?.count ?? 0;
    if (delta > 0 && record?.releasing) throw blobReleasing(blobId);
    if (delta > 0 && before === 0 && publication?.blobId === blobId && !heldSince(record, publication, now)) throw blobReleasing(blobId);
    const after = before + delta;
    // Below 0 only on reads from two moments (PostgreSQL's reads are not one snapshot): the commit would fail its preconditions; run again now.
    if (after < 0) throw new UnitConflict(REFS.name);
    unit.put(REFS, key, { count: after });
    if (before === 0 && after > 0) {
      changes.held.push(blobId);
      // A release still pending (the count fell to 0 and is up again before a releaser came): nothing to release.
      if (await unit.has(RELEASES, key)) unit.remove(RELEASES, key);
    }
    if (after === 0) {
      changes.released.push(blobId);
      unit.put(RELEASES, key, now);
    }
  }
  return changes;
}

/**
 * Whether a publication's hold can be trusted against the record a count of 0 has: no tombstone
 * (none within S3_RELEASE_TOMBSTONE_MS), or the hold taken after the tombstone's removal.
 */
function heldSince(record: RefRecord | undefined, publication: Publication, now: number): boolean {
  if (now - publication.since > S3_RELEASE_TOMBSTONE_MS) return false;
  const releasedAt = record?.releasedAt;
  if (releasedAt === undefined) return true;
  // Published after the removal (read before it, read after it); in the same millisecond only a
  // hold the publication took itself (the removal came before it: the hold was not there).
  return publication.since > releasedAt || (publication.since === releasedAt && publication.tookHold);
}

/** Adds `by` to `blobId`'s delta in `deltas`. */
export function addDelta(deltas: Map<string, number>, blobId: string, by: number): void {
  deltas.set(blobId, (deltas.get(blobId) ?? 0) + by);
}

export class BlobRefs {
  /** `now`: the engine's Clock (a tombstone's time). */
  constructor(
    private readonly units: UnitStore,
    private readonly now: () => number = Date.now,
  ) {}

  /** How many of the tenant's objects name the blob. */
  async count(tenant: string, blobId: string): Promise<number> {
    return (await this.units.get(REFS, [tenant, blobId]))?.count ?? 0;
  }

  /**
   * Counts at 0 whose catalog hold is still to be released (a releaser's crash included), oldest
   * key first; `deleting`: the mark of a blob API DELETE that did not end, only to be ended.
   */
  async pendingReleases(limit = 100): Promise<Array<{ tenant: string; blobId: string; deleting: boolean }>> {
    const out: Array<{ tenant: string; blobId: string; deleting: boolean }> = [];
    for await (const { key: [tenant, blobId], value } of this.units.scan(RELEASES)) {
      if (isTombstoneEntry(value)) continue;
      out.push({ tenant, blobId, deleting: typeof value === 'object' && value.kind === 'delete' });
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Tombstones older than S3_RELEASE_TOMBSTONE_MS go (at most `limit` a call); how many went. */
  async pruneTombstones(now: number, limit = 1000): Promise<number> {
    const old: Array<[string, string]> = [];
    // Read first, removed after: deleting while a scan walks the table skips entries on LMDB.
    for await (const { key, value } of this.units.scan(RELEASES)) {
      if (typeof value === 'object' && value.kind === 'released' && now - value.at > S3_RELEASE_TOMBSTONE_MS) old.push(key);
      if (old.length >= limit) break;
    }
    for (const key of old) {
      await this.units.run(async (unit) => {
        const entry = await unit.get(RELEASES, key);
        if (typeof entry !== 'object' || entry.kind !== 'released' || now - entry.at <= S3_RELEASE_TOMBSTONE_MS) return;
        unit.remove(RELEASES, key);
        const record = await unit.get(REFS, key);
        if (record && record.count === 0 && record.releasedAt !== undefined) unit.remove(REFS, key);
      });
    }
    return old.length;
  }

  /** Marks the release begun when the count is still 0 (true: remove the catalog's hold, then endRelease). False: nothing to release. */
  async beginRelease(tenant: string, blobId: string): Promise<boolean> {
    const key: [string, string] = [tenant, blobId];
    return this.units.run(async (unit) => {
      const record = await unit.get(REFS, key);
      const entry = await unit.get(RELEASES, key);
      const pending = entry !== undefined && !isTombstoneEntry(entry);
      // Nothing to release (a tombstone without a pending entry: its release ended): a pending entry goes; a tombstone's stays until it is pruned.
      if (!record || record.count > 0 || (record.releasedAt !== undefined && !pending)) {
        if (pending) unit.remove(RELEASES, key);
        return false;
      }
      if (!record.releasing) unit.put(REFS, key, { count: 0, releasing: true });
      return true;
    });
  }

  /**
   * A blob whose hold the tenant's publication took, and whose object write then failed (a
   * PutObject or Complete refused by its condition, or its bucket gone, after the publication):
   * if no object of the tenant names it, it is left to `release`, as a count that fell to 0 (a
   * count above 0 means an object took it meanwhile: nothing to do; `releasing`: a release runs).
   */
  async orphaned(tenant: string, blobId: string, now: number): Promise<void> {
    const key: [string, string] = [tenant, blobId];
    await this.units.run(async (unit) => {
      const record = await unit.get(REFS, key);
      if (record && (record.count > 0 || record.releasing)) return;
      // A tombstone keeps its time: a writer that published before that removal is still refused until this release begins.
      unit.put(REFS, key, record?.releasedAt === undefined ? { count: 0 } : { count: 0, releasedAt: record.releasedAt });
      unit.put(RELEASES, key, now);
    });
  }

  /**
   * The release protocol of a count at 0: `beginRelease`, `removeHold` (the catalog's), `endRelease`.
   * A writer that meets the record meanwhile publishes again (`blobReleasing`).
   */
  async release(tenant: string, blobId: string, removeHold: () => Promise<unknown>): Promise<void> {
    if (!(await this.beginRelease(tenant, blobId))) return;
    await removeHold();
    await this.endRelease(tenant, blobId);
  }

  /**
   * DELETE /api/v1/blobs/{id}: the tenant's hold goes (`removeHold`, the catalog's) only while no
   * object of the tenant names the blob. The count is read and the record marked `releasing` in
   * one unit, so an object written meanwhile waits for the end (blobReleasing: its writer
   * publishes again) instead of naming a blob whose hold is going. The pending entry is written
   * with the mark, as a delete's: a crash midway leaves the sweep to end the mark only (the hold
   * is gone or not as the catalog says, as a DELETE that got no answer may have happened or not;
   * a sweep that removed it after a restart would change the tenant's blobs under its feet).
   * `named`: how many objects name it (nothing done).
   */
  async removeUnlessNamed(tenant: string, blobId: string, now: number, removeHold: () => Promise<boolean>): Promise<{ removed: boolean } | { named: number }> {
    const key: [string, string] = [tenant, blobId];
    const begun = await this.units.run(async (unit): Promise<{ named: number } | { marked: boolean }> => {
      const record = await unit.get(REFS, key);
      if (record && record.count > 0) return { named: record.count };
      // A release already under way is its releaser's to end.
      if (record?.releasing) return { marked: false };
      unit.put(REFS, key, { count: 0, releasing: true });
      unit.put(RELEASES, key, { at: now, kind: 'delete' });
      return { marked: true };
    });
    if ('named' in begun) return begun;
    try {
      return { removed: await removeHold() };
    } finally {
      if (begun.marked) await this.endRelease(tenant, blobId);
    }
  }

  /**
   * After the catalog's hold is removed: the count's record becomes a tombstone (`releasedAt`, read
   * now, after the removal) and the pending entry its `released` entry, for the sweep to prune.
   */
  async endRelease(tenant: string, blobId: string): Promise<void> {
    const key: [string, string] = [tenant, blobId];
    const at = this.now();
    return this.units.run(async (unit) => {
      const record = await unit.get(REFS, key);
      if (!record?.releasing) {
        // Ended before (a repeat): the tombstone stays; a pending entry without a release under way goes.
        const entry = await unit.get(RELEASES, key);
        if (entry !== undefined && !isTombstoneEntry(entry)) unit.remove(RELEASES, key);
        return;
      }
      unit.put(REFS, key, { count: 0, releasedAt: at });
      unit.put(RELEASES, key, { at, kind: 'released' });
    });
  }

  /**
   * GC's roots of the S3 index: the blocks of every blob an object or a part of an open upload
   * names (counts at 0 included: their release has not happened yet). `blocksOf` gives a blob's
   * packed block references (a manifest's `refs`: 32-byte digest + 8-byte xxh64 per block), or
   * undefined for one the catalog no longer has; `tenant` is the tenant whose count or upload
   * names it. A part whose blocks are on its record (unlisted content, or a copy's) is left to
   * MultipartUploads.blockRoots.
   */
  roots(blocksOf: (blobId: string, tenant: string) => Promise<Buffer | undefined>): BlockRoots {
    const units = this.units;
    return {
      name: 's3 objects',
      // In the data directory only where the store is this node's (fs, s3); pg-s3 shares it.
      persistent: !units.shared,
      async *digests() {
        // Every object's blob has a count (adjustRefs runs in the object's unit); parts are not counted.
        const blobs = async function* (): AsyncGenerator<[string, string]> {
          // A tombstone names a blob whose hold went: nothing of the index keeps it.
          for await (const { key, value } of units.scan(REFS)) if (value.releasedAt === undefined) yield [key[1], key[0]];
          for await (const { key, value: upload } of units.scan(UPLOADS)) {
            const parts = await units.range(PARTS, { start: [key[2], 0], end: [key[2], S3_MAX_PARTS + 1] });
            for (const { value } of parts) if (!value.content.blocks) yield [value.content.blobId, upload.owner.tenant];
          }
        };
        // Memory stays bounded: a blob met again later (another tenant's count) is resolved again.
        let last: string | undefined;
        for await (const [blobId, tenant] of blobs()) {
          if (blobId === last) continue;
          last = blobId;
          const refs = await blocksOf(blobId, tenant);
          if (refs) for (let at = 0; at < refs.length; at += 40) yield refs.subarray(at, at + 32);
        }
      },
    };
  }
}
