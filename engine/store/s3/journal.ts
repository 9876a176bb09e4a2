// The catalog's journal as S3 objects: `<prefix>journal/<segment, 16 digits>`, each a group of
// entries written together (engine/store/catalog-journal.ts). Writes that arrive while earlier
// segments are in flight wait and go out together in the next one (group commit): one PUT per
// group instead of one per publication. Segment numbers come from the catalog (a sequence every
// node shares), drawn when the segment is sealed, so a segment sealed after another was stored
// has the larger number: for each (tenant, blob), whose publications and removals run one at a
// time, the last entry in segment order is the last one written.
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { S3Location } from '../block-store.js';
import { type CatalogJournal, type Holding, type JournalEntry, type JournalRecord, decodeSegment, encodeSegment } from '../catalog-journal.js';

/** Segments written at once: the first writes go out alone (no added latency), later ones group. */
const IN_FLIGHT = 4;
/** Entries per segment at most (an entry is under 100 KB: inline blobs are at most 64 KiB). */
const MAX_ENTRIES = 512;
/** Segments read at once while listing. */
const READ_CONCURRENCY = 16;
const SEGMENT_NAME = /^[0-9]{16}$/;

interface Waiting {
  entry: JournalEntry;
  done: (err?: unknown) => void;
}

export class S3Journal implements CatalogJournal {
  private waiting: Waiting[] = [];
  private inFlight = 0;

  constructor(
    private readonly client: S3Client,
    private readonly location: S3Location,
    /** The next segment number (a shared, increasing sequence); none needed to list. */
    private readonly nextSegment: () => Promise<number> = () => Promise.reject(new Error('this journal is read-only')),
  ) {}

  private get prefix(): string {
    return `${this.location.prefix}journal/`;
  }

  putHolding(holding: Holding): Promise<void> {
    return this.append({ op: 'put', holding });
  }

  deleteHolding(tenant: string, id: string): Promise<void> {
    return this.append({ op: 'remove', tenant, id });
  }

  async *listRecords(unreadable: (key: string, err: unknown) => void = () => {}): AsyncIterable<JournalRecord[]> {
    let ContinuationToken: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.location.bucket, Prefix: this.prefix, ContinuationToken }));
      // Keys list in byte order: zero-padded numbers, so segment order.
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

  private append(entry: JournalEntry): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ entry, done: (err) => (err === undefined ? resolve() : reject(err)) });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < IN_FLIGHT && this.waiting.length > 0) {
      const group = this.waiting.splice(0, MAX_ENTRIES);
      this.inFlight++;
      void this.write(group).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async write(group: Waiting[]): Promise<void> {
    try {
      const segment = await this.nextSegment();
      const Body = encodeSegment(segment, group.map((w) => w.entry));
      await this.client.send(new PutObjectCommand({ Bucket: this.location.bucket, Key: this.key(segment), Body, ContentLength: Body.length, ContentType: 'application/x-ndjson' }));
      for (const w of group) w.done();
    } catch (err) {
      for (const w of group) w.done(err ?? new Error('journal write failed'));
    }
  }

  private key(segment: number): string {
    return `${this.prefix}${String(segment).padStart(16, '0')}`;
  }

  private async read(Key: string): Promise<JournalRecord[]> {
    const out = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key }));
    const { segment, entries } = decodeSegment(await out.Body!.transformToByteArray());
    if (this.key(segment) !== Key) throw new Error('the segment names another number than its key');
    return entries.map((entry, index) => ({ segment, index, entry }));
  }
}
