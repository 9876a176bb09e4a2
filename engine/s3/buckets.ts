// S3 buckets (decisions §5 "S3-compatible API"): owned by the tenant that creates them, names
// unique in the whole service. CreateBucket of a name another tenant owns is BucketAlreadyExists;
// of one the caller's tenant owns, BucketAlreadyOwnedByYou, except in us-east-1, where S3 answers
// 200 for legacy compatibility (`{ created: false }` here; the region is SVC_S3_API_REGION).
// Another tenant's bucket is AccessDenied to every other operation, an absent one NoSuchBucket.
// DeleteBucket refuses (BucketNotEmpty) a bucket holding objects or open multipart uploads: S3's
// directory buckets refuse open uploads too (general purpose ones drop them), and here an upload's
// parts are blobs the wiring must release, which a bucket deletion in one unit could not do for
// thousands of uploads. A tenant owns at most S3_MAX_BUCKETS_PER_TENANT buckets (TooManyBuckets).

import { S3_MAX_BUCKETS_PER_TENANT } from '../base/limits.js';
import type { Clock } from '../base/clock.js';
import type { Unit, UnitStore } from '../store/index.js';
import { accessDenied, noSuchBucket, s3Refusal } from './errors.js';
import { KEY_HIGH, checkBucketName } from './names.js';
import { BUCKETS, BUCKET_COUNTS, type BucketRecord, OBJECTS, type S3Owner, TENANT_BUCKETS, UPLOADS } from './records.js';

/** The region whose CreateBucket of the caller's own bucket answers 200 (S3's legacy behaviour). */
export const LEGACY_REGION = 'us-east-1';

export interface BucketSummary {
  name: string;
  created: number;
}

/** In a unit: the tenant's bucket (a precondition: it is not deleted meanwhile), else NoSuchBucket or AccessDenied. */
export async function bucketOf(unit: Unit, tenant: string, name: string): Promise<BucketRecord> {
  const record = await unit.get(BUCKETS, name);
  if (!record) throw noSuchBucket(name);
  if (record.tenant !== tenant) throw accessDenied();
  return record;
}

export class S3Buckets {
  constructor(
    private readonly units: UnitStore,
    private readonly clock: Clock,
    /** SVC_S3_API_REGION: in us-east-1 creating one's own bucket again answers 200. */
    private readonly region: string,
  ) {}

  /** CreateBucket. `created: false`: the tenant's own bucket again, in us-east-1 (elsewhere BucketAlreadyOwnedByYou). */
  async create(owner: S3Owner, name: string): Promise<{ created: boolean }> {
    checkBucketName(name);
    return this.units.run(async (unit) => {
      const existing = await unit.get(BUCKETS, name);
      if (existing && existing.tenant !== owner.tenant) {
        throw s3Refusal('BucketAlreadyExists', 'The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again.');
      }
      if (existing) {
        if (this.region === LEGACY_REGION) return { created: false };
        throw s3Refusal('BucketAlreadyOwnedByYou', 'Your previous request to create the named bucket succeeded and you already own it.');
      }
      // The tenant's count, read and written (a precondition: two creates at the limit cannot both pass).
      const owned = (await unit.get(BUCKET_COUNTS, owner.tenant)) ?? 0;
      if (owned >= S3_MAX_BUCKETS_PER_TENANT) throw s3Refusal('TooManyBuckets', `You have attempted to create more buckets than allowed (${S3_MAX_BUCKETS_PER_TENANT} per tenant)`);
      const created = this.clock.now();
      unit.put(BUCKETS, name, { tenant: owner.tenant, subject: owner.subject, created });
      unit.put(TENANT_BUCKETS, [owner.tenant, name], created);
      unit.put(BUCKET_COUNTS, owner.tenant, owned + 1);
      return { created: true };
    });
  }

  /** HeadBucket, GetBucketLocation: the tenant's bucket, else NoSuchBucket or AccessDenied. */
  async head(tenant: string, name: string): Promise<BucketRecord> {
    const record = await this.units.get(BUCKETS, name);
    if (!record) throw noSuchBucket(name);
    if (record.tenant !== tenant) throw accessDenied();
    return record;
  }

  /** ListBuckets: the tenant's buckets by name (all of them: at most S3_MAX_BUCKETS_PER_TENANT). */
  async list(tenant: string): Promise<BucketSummary[]> {
    const entries = await this.units.range(TENANT_BUCKETS, { start: [tenant, ''], end: [tenant, '\uffff'] });
    return entries.map(({ key, value }) => ({ name: key[1], created: value }));
  }

  /** DeleteBucket: only an empty one (no object, no open multipart upload), else BucketNotEmpty. */
  async delete(tenant: string, name: string): Promise<void> {
    return this.units.run(async (unit) => {
      await bucketOf(unit, tenant, name);
      // Preconditions: an object or upload written meanwhile makes the unit run again (and refuse).
      const span = { start: [name, ''] as [string, string], end: [name, KEY_HIGH] as [string, string], limit: 1 };
      const objects = await unit.range(OBJECTS, span);
      const uploads = await unit.range(UPLOADS, { ...span, start: [name, '', ''], end: [name, KEY_HIGH] });
      if (objects.length > 0 || uploads.length > 0) {
        throw s3Refusal('BucketNotEmpty', objects.length > 0 ? 'The bucket you tried to delete is not empty' : 'The bucket you tried to delete has multipart uploads in progress: abort them first');
      }
      unit.remove(BUCKETS, name);
      unit.remove(TENANT_BUCKETS, [tenant, name]);
      const owned = (await unit.get(BUCKET_COUNTS, tenant)) ?? 1;
      if (owned > 1) unit.put(BUCKET_COUNTS, tenant, owned - 1);
      else unit.remove(BUCKET_COUNTS, tenant);
    });
  }
}
