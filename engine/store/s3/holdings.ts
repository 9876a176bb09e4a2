// The catalog's journal as S3 objects: `<prefix>holdings/<base64url tenant>/<hex>-<size>`, one
// small JSON document per (tenant, blob) (engine/store/catalog-journal.ts). The tenant is
// base64url-encoded: a tenant id may hold any character, a key segment must not hold '/'.
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { contentIdOf } from '../../cas/content-id.js';
import type { S3Location } from '../block-store.js';
import { type CatalogJournal, type Holding, decodeHolding, encodeHolding } from '../catalog-journal.js';

/** Holdings read at once while listing. */
const READ_CONCURRENCY = 16;

export class S3Holdings implements CatalogJournal {
  constructor(
    private readonly client: S3Client,
    private readonly location: S3Location,
  ) {}

  key(tenant: string, id: string): string {
    const parsed = contentIdOf(id);
    if (!parsed) throw new Error(`not a content id: ${id}`);
    return `${this.location.prefix}holdings/${Buffer.from(tenant).toString('base64url')}/${parsed.hex}-${parsed.size}`;
  }

  async putHolding(holding: Holding): Promise<void> {
    const Body = encodeHolding(holding);
    await this.client.send(new PutObjectCommand({ Bucket: this.location.bucket, Key: this.key(holding.tenant, holding.id), Body, ContentLength: Body.length, ContentType: 'application/json' }));
  }

  async deleteHolding(tenant: string, id: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.location.bucket, Key: this.key(tenant, id) }));
  }

  async *listHoldings(unreadable: (key: string, err: unknown) => void = () => {}): AsyncIterable<Holding[]> {
    let ContinuationToken: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.location.bucket, Prefix: `${this.location.prefix}holdings/`, ContinuationToken }));
      const keys = (page.Contents ?? []).map((o) => o.Key!);
      const holdings: Holding[] = [];
      for (let i = 0; i < keys.length; i += READ_CONCURRENCY) {
        const read = await Promise.all(keys.slice(i, i + READ_CONCURRENCY).map((key) => this.read(key).catch((err: unknown) => {
          unreadable(key, err);
          return undefined;
        })));
        for (const h of read) if (h) holdings.push(h);
      }
      yield holdings;
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
  }

  private async read(Key: string): Promise<Holding> {
    const out = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key }));
    const holding = decodeHolding(await out.Body!.transformToByteArray());
    // The key is what deletion finds: a document filed under another key is not this holding.
    if (this.key(holding.tenant, holding.id) !== Key) throw new Error('the document names another tenant or blob than its key');
    return holding;
  }
}
