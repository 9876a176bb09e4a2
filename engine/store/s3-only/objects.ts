// Small objects of the S3-only backend (holdings, inventory entries, ledgers, heartbeats, the GC
// lease): GET, conditional PUT, DELETE and listing. Conditions are sent only to a server that
// honours them (preconditions.ts probed it at start); elsewhere one node runs alone and keeps
// its writes in order itself (engine/store/s3-only/ledger.ts serializes per tenant).
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { KeyQueue } from '../key-queue.js';
import { isNotFound } from '../s3/block-store.js';
import { type ConditionalWrites, ifMatchValue } from '../s3/preconditions.js';

export interface StoredObject {
  body: Buffer;
  etag: string;
  lastModifiedMs: number;
}

export interface ListedKey {
  key: string;
  lastModifiedMs: number;
}

/** What a conditional PUT asks: the key is free (publish once), or still holds `ifMatch` (compare-and-swap). */
export type WriteCondition = { ifNoneMatch: true } | { ifMatch: string } | undefined;

export class ObjectIo {
  /**
   * Where the server ignores conditions, this process's requests on one key, one at a time. Such
   * a server runs one node, so this process is the key's only writer; and such servers may not
   * replace an object whole: s3rver writes a PUT in place, and answers a GET with the length it
   * found before it opened the file, so a GET beside a PUT of the key is served torn (empty, a
   * mix, or shorter than its Content-Length: the client then waits until the server's keep-alive
   * timeout closes the socket, 'Error: aborted'). A server that honours conditions is a
   * production one (AWS, radosgw) whose PUT is atomic.
   */
  private readonly turns = new KeyQueue();

  constructor(
    readonly client: S3Client,
    readonly bucket: string,
    readonly conditions: ConditionalWrites,
  ) {}

  /** Whether several nodes may share the bucket: the server refuses a lost compare-and-swap. */
  get honoursConditions(): boolean {
    return this.conditions.ifNoneMatch && this.conditions.ifMatch;
  }

  private turn<T>(Key: string, work: () => Promise<T>): Promise<T> {
    return this.honoursConditions ? work() : this.turns.run(Key, work);
  }

  get(Key: string): Promise<StoredObject | undefined> {
    return this.turn(Key, async () => {
      try {
        const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key }));
        const body = Buffer.from(await out.Body!.transformToByteArray());
        return { body, etag: out.ETag ?? '', lastModifiedMs: out.LastModified?.getTime() ?? 0 };
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    });
  }

  /**
   * The object (undefined: absent) and the server's clock when it answered (its Date header;
   * this node's clock where it sends none): a lease is judged by the bucket's clock, not a node's.
   * Both Date and Last-Modified are whole seconds.
   */
  getWithClock(Key: string): Promise<{ object?: StoredObject; serverNowMs: number }> {
    return this.turn(Key, async () => {
      let date: string | undefined;
      const command = new GetObjectCommand({ Bucket: this.bucket, Key });
      command.middlewareStack.add((next) => async (args) => {
        const out = await next(args);
        date = headerOf(out.response, 'date');
        return out;
      }, { step: 'deserialize', name: 'svcServerDate' });
      const serverNow = () => {
        const at = date === undefined ? NaN : Date.parse(date);
        return Number.isNaN(at) ? Date.now() : at;
      };
      try {
        const out = await this.client.send(command);
        const body = Buffer.from(await out.Body!.transformToByteArray());
        return { object: { body, etag: out.ETag ?? '', lastModifiedMs: out.LastModified?.getTime() ?? 0 }, serverNowMs: serverNow() };
      } catch (err) {
        if (isNotFound(err)) {
          date ??= headerOf((err as { $response?: unknown }).$response, 'date');
          return { serverNowMs: serverNow() };
        }
        throw err;
      }
    });
  }

  exists(Key: string): Promise<boolean> {
    return this.turn(Key, async () => {
      try {
        await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key }));
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    });
  }

  /**
   * Writes `body` at `Key`; 'refused' when the server refused the condition (412: another writer
   * won). A condition the server does not honour is not sent (it would be ignored anyway).
   */
  put(Key: string, body: Buffer, condition?: WriteCondition, contentType = 'application/json'): Promise<{ etag: string } | 'refused'> {
    const headers: { IfNoneMatch?: string; IfMatch?: string } = {};
    if (condition && 'ifNoneMatch' in condition && this.conditions.ifNoneMatch) headers.IfNoneMatch = '*';
    if (condition && 'ifMatch' in condition && this.conditions.ifMatch) headers.IfMatch = ifMatchValue(condition.ifMatch, this.conditions.ifMatchEtagForm ?? 'quoted');
    return this.turn(Key, async () => {
      try {
        const out = await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key, Body: body, ContentLength: body.length, ContentType: contentType, ...headers }));
        return { etag: out.ETag ?? '' };
      } catch (err) {
        const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
        // 409 ConditionalRequestConflict: AWS's answer to two conditional writes racing on one key.
        if (status === 412 || status === 409) return 'refused';
        throw err;
      }
    });
  }

  delete(Key: string): Promise<void> {
    return this.turn(Key, async () => {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key }));
    });
  }

  /**
   * One page of the keys under `prefix` after `startAfter`, in key order (at most `maxKeys`, at
   * most 1,000). `next` is the last key when more may follow: the next page starts after it
   * (StartAfter, not a continuation token: a key is a position every node can resume from).
   */
  async page(prefix: string, startAfter?: string, maxKeys = 1000): Promise<{ keys: ListedKey[]; next?: string }> {
    const out = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, StartAfter: startAfter, MaxKeys: Math.min(1000, maxKeys) }));
    const keys = (out.Contents ?? []).map((o) => ({ key: o.Key!, lastModifiedMs: o.LastModified?.getTime() ?? 0 }));
    return { keys, next: out.IsTruncated && keys.length > 0 ? keys[keys.length - 1]!.key : undefined };
  }

  /** Every key under `prefix`, a page at a time. */
  async *pages(prefix: string): AsyncIterable<ListedKey[]> {
    let after: string | undefined;
    do {
      const page = await this.page(prefix, after);
      yield page.keys;
      after = page.next;
    } while (after);
  }
}

/** A header of an HTTP response the SDK hands its middleware (lower-case names). */
function headerOf(response: unknown, name: string): string | undefined {
  const headers = (response as { headers?: Record<string, string | undefined> } | undefined)?.headers;
  return headers?.[name];
}

/** Runs `work` over `items`, `concurrency` at a time, keeping the order of the results. */
export async function mapLimited<T, R>(items: readonly T[], concurrency: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return out;
}
