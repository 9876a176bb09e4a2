import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { StartRefused, describeS3Failure, s3StartRefused } from '../dependency-failure.js';
import { CopyObjectCommand, DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import type { ListedObject, MovableBlockStore, PutOutcome, S3Location } from '../block-store.js';
import { S3_DEFAULT_IDLE_TIMEOUT_MS } from '../../base/limits.js';
import { BlockPuts } from './block-put.js';
import { probeConditionalWrites } from './preconditions.js';

/** How long the bucket check at start waits for an answer. */
const START_CHECK_MS = 20_000;

/** SVC_S3_TIMEOUT of `location`, or its default. */
export const idleTimeoutOf = (location: S3Location): number => location.idleTimeoutMs ?? S3_DEFAULT_IDLE_TIMEOUT_MS;

/** Sockets per client: block tasks of every upload share them; beyond it requests queue. */
const MAX_SOCKETS = 64;
/** Blocks (about 1 MiB each) a download keeps in flight: one GET's round trip is a few ms. */
const READ_AHEAD = 6;

const BLOCK_NAME = /^([0-9a-f]{64})-([0-9]{1,10})$/;


/**
 * Block bytes as S3 objects, one per block: `<prefix>blocks/<h[0:3]>/<hex>-<size>`, immutable and
 * keyed by content (docs/backends.md says why one object per block rather than pack files).
 * A PutObject is atomic: an object under its key is always complete. Blobs small enough to be
 * inlined never reach this store (the catalog keeps their bytes). Garbage collection moves an
 * unreferenced block to `<prefix>quarantine/…` (copy, then delete) before it deletes it, so an
 * upload that starts after the move does not find the block and writes it again; reads fall
 * back to the quarantined copy.
 */
export class S3BlockStore implements MovableBlockStore {
  readonly location: S3Location;
  readonly client: S3Client;
  readonly readAhead = READ_AHEAD;
  /** Block PUTs on a signed request and connections of their own (./block-put.ts), the SDK where it cannot serve. */
  private readonly puts: BlockPuts;

  constructor(
    location: S3Location,
    /** A directory on this node for ingest spills (main thread only; workers pass none). */
    readonly scratchDir = '',
  ) {
    this.location = location;
    this.client = s3Client(location);
    // The block PUTs' connections are their own, bounded as the SDK's: MAX_SOCKETS each.
    this.puts = new BlockPuts(this.client, location, MAX_SOCKETS, idleTimeoutOf(location));
  }

  /** Closes the SDK's client and the block PUTs' connections. */
  async close(): Promise<void> {
    this.client.destroy();
    await this.puts.close();
  }

  key(hex: string, size: number, area: 'blocks' | 'quarantine' = 'blocks'): string {
    return `${this.location.prefix}${area}/${hex.slice(0, 3)}/${hex}-${size}`;
  }

  /**
   * Writes the block unless an object is there: one PUT `If-None-Match: *` when the server honours
   * it (`location.conditionalPut`), else a HEAD first, and a quarantined copy is moved back instead
   * of written. With `alwaysWrite` (security on) the HEADs are asked and a present block is written
   * all the same, so the time says nothing of other tenants' data.
   */
  async put(hex: string, size: number, pieces: readonly Uint8Array[], alwaysWrite = false): Promise<PutOutcome> {
    // A server that honours If-None-Match: one request per block. A quarantined copy is not looked
    // for: the bytes are written live beside it (race 3 in docs/architecture.md), and the next GC
    // run that finds the block marked deletes the copy (restore: 'live').
    if (this.location.conditionalPut && !alwaysWrite) return this.putIfAbsent(hex, size, pieces);
    const Key = this.key(hex, size);
    const quarantined = this.key(hex, size, 'quarantine');
    // Both places are asked at once: a fresh block (the common case) costs one round trip before its PUT.
    const [live, inQuarantine] = await Promise.all([this.sizeOf(Key), this.sizeOf(quarantined)]);
    const present = live === size;
    if (present && !alwaysWrite) return 'present';
    // A block GC quarantined is moved back instead (no bytes sent); its record comes back with the publication.
    if (!present && inQuarantine === size && (await this.copy(quarantined, Key))) {
      await this.delete(quarantined);
      return 'restored';
    }
    await this.putObject(hex, size, pieces, false);
    return present ? 'present' : 'written';
  }

  /** One PUT `If-None-Match: *`: 'written', or 'present' when the server refuses it (412: the object exists). */
  private putIfAbsent(hex: string, size: number, pieces: readonly Uint8Array[]): Promise<PutOutcome> {
    return this.putObject(hex, size, pieces, true);
  }

  /** The block's PUT: on the lean signed path when it serves the bucket, else through the SDK. */
  private async putObject(hex: string, size: number, pieces: readonly Uint8Array[], ifAbsent: boolean): Promise<'written' | 'present'> {
    if (await this.puts.available()) return this.puts.put(this.key(hex, size), hex, size, pieces, ifAbsent);
    try {
      await this.client.send(this.putCommand(hex, size, pieces, ifAbsent));
      return 'written';
    } catch (err) {
      if (ifAbsent && err instanceof S3ServiceException && err.$metadata.httpStatusCode === 412) return 'present';
      throw err;
    }
  }

  /**
   * The block's PutObject. A block that spans segments is sent piece by piece, not copied into one
   * buffer: the pieces are the ingest's own memory (held until the task ends), a copy would be
   * memory outside its budget, one per block in flight. Each attempt (the SDK retries) gets a
   * stream of its own.
   */
  private putCommand(hex: string, size: number, pieces: readonly Uint8Array[], ifAbsent = false): PutObjectCommand {
    const stream = () => (pieces.length === 1 ? pieces[0] : Readable.from(pieces, { objectMode: false }));
    const put = new PutObjectCommand({ Bucket: this.location.bucket, Key: this.key(hex, size), Body: stream(), ContentLength: size, ContentType: 'application/octet-stream', ...(ifAbsent ? { IfNoneMatch: '*' } : {}) });
    if (pieces.length > 1) {
      put.middlewareStack.add((next) => (args) => {
        (args.request as { body: unknown }).body = stream();
        return next(args);
      }, { step: 'deserialize', name: 'svcFreshBlockBody' });
    }
    // The block's name is its SHA-256: the signature takes it instead of hashing the bytes again,
    // and the server checks the body against it.
    put.middlewareStack.add((next) => (args) => {
      (args.request as { headers: Record<string, string> }).headers['x-amz-content-sha256'] = hex;
      return next(args);
    }, { step: 'build', name: 'svcBlockDigest' });
    return put;
  }

  readWhole(hex: string, size: number): Promise<Buffer> {
    return this.read(hex, size);
  }

  /** Reads a whole block, into `into` when given; a quarantined block is read from quarantine. */
  async read(hex: string, size: number, into?: Buffer): Promise<Buffer> {
    let out;
    try {
      out = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key: this.key(hex, size) }));
    } catch (err) {
      if (!isNotFound(err)) throw err;
      out = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key: this.key(hex, size, 'quarantine') })).catch(() => Promise.reject(err));
    }
    if (!(out.Body instanceof Readable)) throw new Error(`block ${hex}: S3 returned no body`);
    const buf = into ? into.subarray(0, size) : Buffer.allocUnsafe(size);
    let off = 0;
    for await (const chunk of out.Body as AsyncIterable<Buffer>) {
      if (off + chunk.length > size) {
        out.Body.destroy();
        throw new Error(`block ${hex}: object longer than ${size} bytes`);
      }
      chunk.copy(buf, off);
      off += chunk.length;
    }
    if (off !== size) throw new Error(`block ${hex}: object of ${off} bytes, expected ${size}`);
    return buf;
  }

  /** The bucket answers (readiness). */
  async probe(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.location.bucket }));
    } catch (err) {
      throw new Error(describeS3Failure(err, 'HeadBucket', this.location).cause, { cause: err });
    }
  }

  /** At start: the bucket exists and these credentials may use it, else a StartRefused naming the variable. */
  async checkAtStart(timeoutMs = START_CHECK_MS): Promise<void> {
    // Bounded: an endpoint that drops packets would otherwise hold the start for minutes.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StartRefused('SVC_S3_ENDPOINT', `no answer from ${this.location.endpoint || 'the AWS default endpoint'} to HeadBucket within ${timeoutMs / 1000} s`)), timeoutMs);
    });
    try {
      await Promise.race([this.client.send(new HeadBucketCommand({ Bucket: this.location.bucket })), timeout]);
    } catch (err) {
      throw err instanceof StartRefused ? err : s3StartRefused(err, 'HeadBucket', this.location);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * At start: whether the server refuses a PUT `If-None-Match: *` over an existing object (a probe
   * object under the prefix); if so block PUTs are conditional from now on, in every thread that
   * opens this location.
   */
  async useConditionalPuts(): Promise<boolean> {
    const { ifNoneMatch } = await probeConditionalWrites(this.client, this.location.bucket, this.location.prefix);
    this.location.conditionalPut = ifNoneMatch;
    return ifNoneMatch;
  }

  /** Moves a live block into quarantine (copy, then delete); false when it is not live. */
  async quarantine(hex: string, size: number): Promise<boolean> {
    if (!(await this.copy(this.key(hex, size), this.key(hex, size, 'quarantine')))) return false;
    await this.delete(this.key(hex, size));
    return true;
  }

  /**
   * Puts a quarantined block back: 'live' when the live object is there (a quarantined copy
   * beside it goes), 'restored' when it was copied back, 'missing' when neither exists.
   */
  async restore(hex: string, size: number): Promise<'live' | 'restored' | 'missing'> {
    const live = this.key(hex, size);
    const quarantined = this.key(hex, size, 'quarantine');
    if ((await this.sizeOf(live)) === size) {
      await this.delete(quarantined);
      return 'live';
    }
    if (!(await this.copy(quarantined, live))) return 'missing';
    await this.delete(quarantined);
    return 'restored';
  }

  /** Deletes a quarantined copy. */
  purge(hex: string, size: number): Promise<void> {
    return this.delete(this.key(hex, size, 'quarantine'));
  }

  /** The block objects of `area`, a page at a time (`after`: the listing's continuation). */
  async list(area: 'blocks' | 'quarantine', after?: string): Promise<{ blocks: ListedObject[]; next?: string }> {
    const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.location.bucket, Prefix: `${this.location.prefix}${area}/`, ContinuationToken: after }));
    const blocks: ListedObject[] = [];
    for (const o of page.Contents ?? []) {
      const m = BLOCK_NAME.exec(o.Key!.slice(o.Key!.lastIndexOf('/') + 1));
      if (m) blocks.push({ hex: m[1]!, size: Number(m[2]), lastModifiedMs: o.LastModified?.getTime() ?? 0 });
    }
    return { blocks, next: page.IsTruncated ? page.NextContinuationToken : undefined };
  }

  /** Copies `from` to `to` within the bucket; false when `from` does not exist. */
  private async copy(from: string, to: string): Promise<boolean> {
    try {
      await this.client.send(new CopyObjectCommand({ Bucket: this.location.bucket, Key: to, CopySource: `${this.location.bucket}/${encodeURIComponent(from).replace(/%2F/g, '/')}` }));
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  private async delete(Key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.location.bucket, Key }));
  }

  /** The size of the object at `Key`, or undefined when there is none. */
  private async sizeOf(Key: string): Promise<number | undefined> {
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.location.bucket, Key }));
      return head.ContentLength;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof S3ServiceException && (err.$metadata.httpStatusCode === 404 || err.name === 'NotFound' || err.name === 'NoSuchKey');
}

/**
 * A client for `location`. Checksums are left to svc (every block is SHA-256 named and xxh64
 * checked on read): the SDK's default CRC32 trailers cost CPU and are not understood by every
 * S3 server.
 */
export function s3Client(location: S3Location): S3Client {
  return new S3Client({
    ...(location.endpoint ? { endpoint: location.endpoint } : {}),
    region: location.region,
    forcePathStyle: location.forcePathStyle,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: {
      httpAgent: new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS }),
      httpsAgent: new https.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS }),
      // Idle, not total: a block's GET may take long on a slow link, but not silently (the SDK retries its TimeoutError).
      connectionTimeout: idleTimeoutOf(location),
      socketTimeout: idleTimeoutOf(location),
    },
  });
}
