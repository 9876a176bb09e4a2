// The S3 index in one piece for the wiring: buckets, objects (with listing), multipart records and
// the tenants' blob counts (releases, GC roots), all on one units store (records.ts) and one Clock.

import type { Clock } from '../base/clock.js';
import type { UnitStore } from '../store/index.js';
import { BlobRefs } from './blob-refs.js';
import { S3Buckets } from './buckets.js';
import { S3Multipart } from './multipart.js';
import { S3Objects } from './objects.js';

export class S3Index {
  readonly buckets: S3Buckets;
  readonly objects: S3Objects;
  readonly multipart: S3Multipart;
  readonly refs: BlobRefs;

  /** `region`: SVC_S3_API_REGION (us-east-1 answers 200 to CreateBucket of one's own bucket). */
  constructor(units: UnitStore, clock: Clock, region: string) {
    this.buckets = new S3Buckets(units, clock, region);
    this.objects = new S3Objects(units, clock, this.buckets);
    this.multipart = new S3Multipart(units, clock, this.buckets);
    this.refs = new BlobRefs(units, () => clock.now());
  }
}
