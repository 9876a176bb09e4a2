// A secret kept in the bucket (s3): `<prefix>secrets/<name>`, made by a conditional create, so
// every node of the cluster reads the first one made (the cursor key: a cursor one node gave
// opens on any other).
import type { DevSecretStore } from '../dev-secret.js';
import type { ObjectIo } from './objects.js';

export class S3KeptSecret implements DevSecretStore {
  constructor(
    private readonly io: ObjectIo,
    readonly location: string,
  ) {}

  async keep(candidate: string): Promise<{ secret: string; created: boolean }> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const kept = await this.io.get(this.location);
      if (kept) return { secret: kept.body.toString('utf8').trim(), created: false };
      const put = await this.io.put(this.location, Buffer.from(candidate), { ifNoneMatch: true }, 'text/plain');
      if (put !== 'refused') return { secret: candidate, created: true };
    }
    throw new Error(`the s3 backend could not read or create ${this.location}`);
  }
}
