import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { GetObjectCommand, HeadBucketCommand, HeadObjectCommand, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import type { BlockStore, PutOutcome, S3Location } from '../block-store.js';

/** Sockets per client: block tasks of every upload share them; beyond it requests queue. */
const MAX_SOCKETS = 64;

/**
 * Block bytes as S3 objects, one per block: `<prefix>blocks/<h[0:3]>/<hex>-<size>`, immutable and
 * keyed by content (docs/backends.md says why one object per block rather than pack files).
 * A PutObject is atomic: an object under its key is always complete. Blobs small enough to be
 * inlined never reach this store (the catalog keeps their bytes).
 */
export class S3BlockStore implements BlockStore {
  readonly location: S3Location;
  readonly client: S3Client;

  constructor(
    location: S3Location,
    /** A directory on this node for ingest spills (main thread only; workers pass none). */
    readonly scratchDir = '',
  ) {
    this.location = location;
    this.client = s3Client(location);
  }

  key(hex: string, size: number): string {
    return `${this.location.prefix}blocks/${hex.slice(0, 3)}/${hex}-${size}`;
  }

  /**
   * Writes the block unless an object of its size is there (a HEAD first). With `alwaysWrite`
   * (security on) it is written all the same, so the time says nothing of other tenants' data.
   */
  async put(hex: string, size: number, pieces: readonly Uint8Array[], alwaysWrite = false): Promise<PutOutcome> {
    const Key = this.key(hex, size);
    const present = (await this.sizeOf(Key)) === size;
    if (present && !alwaysWrite) return 'present';
    const Body = pieces.length === 1 ? pieces[0] : Buffer.concat(pieces);
    await this.client.send(new PutObjectCommand({ Bucket: this.location.bucket, Key, Body, ContentLength: size, ContentType: 'application/octet-stream' }));
    return present ? 'present' : 'written';
  }

  readWhole(hex: string, size: number): Promise<Buffer> {
    return this.read(hex, size);
  }

  /** Reads a whole block, into `into` when given. */
  async read(hex: string, size: number, into?: Buffer): Promise<Buffer> {
    const out = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key: this.key(hex, size) }));
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
    await this.client.send(new HeadBucketCommand({ Bucket: this.location.bucket }));
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
    },
  });
}
