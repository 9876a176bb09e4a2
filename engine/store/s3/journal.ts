// The catalog's journal as S3 objects: `<prefix>journal/<first entry's number, 16 digits>`, one
// segment per group of entries the catalog hands over (engine/store/catalog-journal.ts). Segments
// may be written by several nodes at once and in any order: entries carry their numbers, and a
// rebuild orders by those.
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { S3Location } from '../block-store.js';
import { type CatalogJournal, type JournalRecord, decodeSegment, encodeSegment } from '../catalog-journal.js';

/** Segments read at once while listing. */
const READ_CONCURRENCY = 16;
const SEGMENT_NAME = /^[0-9]{16}$/;

export class S3Journal implements CatalogJournal {
  constructor(
    private readonly client: S3Client,
    private readonly location: S3Location,
  ) {}

  private get prefix(): string {
    return `${this.location.prefix}journal/`;
  }

  async write(records: readonly JournalRecord[]): Promise<void> {
    if (records.length === 0) return;
    const Body = encodeSegment(records);
    const first = Math.min(...records.map((r) => r.seq));
    await this.client.send(new PutObjectCommand({ Bucket: this.location.bucket, Key: `${this.prefix}${String(first).padStart(16, '0')}`, Body, ContentLength: Body.length, ContentType: 'application/x-ndjson' }));
  }

  async *listRecords(unreadable: (key: string, err: unknown) => void = () => {}): AsyncIterable<JournalRecord[]> {
    let ContinuationToken: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.location.bucket, Prefix: this.prefix, ContinuationToken }));
      const keys = (page.Contents ?? []).map((o) => o.Key!).filter((k) => SEGMENT_NAME.test(k.slice(this.prefix.length)));
      for (let i = 0; i < keys.length; i += READ_CONCURRENCY) {
        const read = await Promise.all(keys.slice(i, i + READ_CONCURRENCY).map((key) => this.read(key).catch((err: unknown) => {
          unreadable(key, err);
          return [];
        })));
        for (const records of read) if (records.length) yield records;
      }
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
  }

  private async read(Key: string): Promise<JournalRecord[]> {
    const out = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key }));
    const records = decodeSegment(await out.Body!.transformToByteArray());
    // A segment is named by its first entry's number: one that is not is not a segment of svc's.
    if (records.length > 0 && `${this.prefix}${String(Math.min(...records.map((r) => r.seq))).padStart(16, '0')}` !== Key) {
      throw new Error('the segment names another first entry than its key');
    }
    return records;
  }
}
