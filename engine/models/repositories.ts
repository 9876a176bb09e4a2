// Bundle repositories: where a registered URI is fetched from. `file://` is read in place, once
// the roots (SVC_MODEL_ROOTS, roots.ts) allow it; `s3://` and `gs://` are streamed to a local
// file (at most MODEL_MAX_BUNDLE_BYTES) and read from there, once the roots allow their bucket
// and key. The caller deletes what `acquire` returns with `release`. A store's failure is
// answered in the runtime's own words (not found, access denied, unavailable), never the
// store's text, which goes to the log.

import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { ModelConfig } from '../base/config.js';
import { S3_BUCKET_NAME } from '../base/model-roots.js';
import type { Logger } from '../base/log.js';
import { type ModelFailure, bundleError, isModelError, uriError } from './errors.js';
import type { BundleRoots } from './roots.js';

interface AcquiredBundle {
  /** Local zip file or directory to read the bundle from. */
  path: string;
  /** Deletes the local copy, if one was made. */
  release(): Promise<void>;
}

export class Repositories {
  private s3?: S3Client;

  constructor(
    private readonly config: ModelConfig,
    /** Directory for downloaded copies (emptied at start by the owner). */
    private readonly downloadDir: string,
    private readonly roots: BundleRoots,
    private readonly log: Logger,
  ) {}

  /** Checks a URI's syntax and scheme without fetching anything: 400 URIError when it is not one this runtime reads. */
  static parse(uri: string): URL {
    const text = uri.trim();
    // The URL parser drops tabs and newlines silently: a URI holding them is not the one it would read.
    if (/[\u0000-\u001f\u007f]/.test(text)) throw uriError(uri, 'control characters are not allowed in a URI');
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw uriError(uri, 'not a valid URI');
    }
    if (url.protocol === 'file:') {
      filePath(uri, url);
    } else if (url.protocol === 's3:' || url.protocol === 'gs:') {
      if (!url.hostname) throw uriError(uri, 'bucket name is missing');
      if (url.pathname.length <= 1) throw uriError(uri, 'object key is missing');
      // Judged by name against the roots, so the name must be the one the store reads.
      if (url.protocol === 's3:' && !S3_BUCKET_NAME.test(url.hostname)) throw uriError(uri, `"${url.hostname}" is not an S3 bucket name`);
      objectKey(uri, url);
    } else {
      throw uriError(uri, `unsupported scheme "${url.protocol.replace(/:$/, '')}" (file, s3 or gs)`);
    }
    return url;
  }

  /** Whether the roots allow the URI (throws as `acquire` would), without fetching anything. */
  async checkLocation(uri: string): Promise<void> {
    const url = Repositories.parse(uri);
    if (url.protocol === 'file:') await this.roots.locate(filePath(uri, url), uri);
    else this.roots.checkObject(url.protocol === 's3:' ? 's3' : 'gs', url.hostname, objectKey(uri, url), uri);
  }

  async acquire(uri: string, signal: AbortSignal): Promise<AcquiredBundle> {
    const url = Repositories.parse(uri);
    if (url.protocol === 'file:') return { path: await this.roots.locate(filePath(uri, url), uri), release: async () => {} };
    this.roots.checkObject(url.protocol === 's3:' ? 's3' : 'gs', url.hostname, objectKey(uri, url), uri);
    const target = join(this.downloadDir, `${randomUUID()}.zip`);
    await mkdir(this.downloadDir, { recursive: true });
    const release = () => rm(target, { force: true });
    try {
      const body = url.protocol === 's3:' ? await this.s3Object(uri, url, signal) : await this.gcsObject(uri, url, signal);
      await pipeline(body, this.limit(uri), createWriteStream(target), { signal });
    } catch (err) {
      await release();
      if (isModelError(err)) throw err;
      if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : err;
      this.log.warn('model bundle fetch failed', { uri, err: String((err as Error)?.stack ?? err) });
      throw uriError(uri, storeFailure(err));
    }
    return { path: target, release };
  }

  private async s3Object(uri: string, url: URL, signal: AbortSignal): Promise<Readable> {
    this.s3 ??= new S3Client({
      ...(this.config.s3Endpoint ? { endpoint: this.config.s3Endpoint } : {}),
      forcePathStyle: this.config.s3ForcePathStyle,
    });
    const key = objectKey(uri, url);
    const out = await this.s3.send(new GetObjectCommand({ Bucket: url.hostname, Key: key }), { abortSignal: signal });
    if (!(out.Body instanceof Readable)) throw uriError(uri, 'S3 returned no body');
    if (out.ContentLength !== undefined && out.ContentLength > this.config.maxBundleBytes) {
      // An unread body holds the client's socket (50 per client): close it before refusing.
      out.Body.destroy();
      throw tooLarge(uri, this.config.maxBundleBytes);
    }
    return out.Body;
  }

  private async gcsObject(uri: string, url: URL, signal: AbortSignal): Promise<Readable> {
    const object = encodeURIComponent(objectKey(uri, url));
    const address = `${this.config.gcsEndpoint}/storage/v1/b/${encodeURIComponent(url.hostname)}/o/${object}?alt=media`;
    const token = process.env.GOOGLE_OAUTH_ACCESS_TOKEN;
    const response = await fetch(address, { signal, headers: token ? { authorization: `Bearer ${token}` } : {} });
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      throw new StoreRefusal(response.status);
    }
    const length = Number(response.headers.get('content-length'));
    if (length > this.config.maxBundleBytes) {
      await response.body.cancel();
      throw tooLarge(uri, this.config.maxBundleBytes);
    }
    return Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>);
  }

  /** Stops a download that passes the bundle size limit, whatever the server declared. */
  private limit(uri: string): Transform {
    let bytes = 0;
    const max = this.config.maxBundleBytes;
    return new Transform({
      transform(chunk: Buffer, _enc, done) {
        bytes += chunk.length;
        done(bytes > max ? tooLarge(uri, max) : null, chunk);
      },
    });
  }
}

/** The key an s3:// or gs:// URI names, as the store reads it (decoded); 400 URIError for one the roots could not judge. */
function objectKey(uri: string, url: URL): string {
  let key: string;
  try {
    key = decodeURIComponent(url.pathname.slice(1));
  } catch {
    throw uriError(uri, 'the object key is not valid percent-encoding');
  }
  // Decoded, `%2F..%2F` is a `..` segment: a store that resolves it would read outside the prefix judged.
  if (key.split('/').some((s) => s === '.' || s === '..')) throw uriError(uri, 'an object key cannot have . or .. segments');
  return key;
}

/** A store's answer other than the object (GCS's status; S3's come as the SDK's errors). */
class StoreRefusal extends Error {
  constructor(readonly status: number) {
    super(`the store answered ${status}`);
  }
}

const NOT_FOUND = new Set(['NoSuchKey', 'NoSuchBucket', 'NotFound']);
const DENIED = new Set(['AccessDenied', 'InvalidAccessKeyId', 'SignatureDoesNotMatch', 'ExpiredToken', 'InvalidToken', 'AllAccessDisabled', 'AccountProblem', 'CredentialsProviderError']);

/**
 * What the runtime says of a store's failure: one of its own few sentences, never the store's or
 * the SDK's text (which would tell, for one, whether an object exists where the caller may not look).
 */
function storeFailure(err: unknown): string {
  const e = err as { name?: string; status?: number; $metadata?: { httpStatusCode?: number }; $fault?: string };
  const status = err instanceof StoreRefusal ? err.status : e?.$metadata?.httpStatusCode;
  if (NOT_FOUND.has(e?.name ?? '') || status === 404) return 'no such object';
  if (DENIED.has(e?.name ?? '') || status === 401 || status === 403) return 'access denied';
  if (status !== undefined && status < 500 && e?.$fault !== 'server') return 'the store refused the read';
  return 'the store is unavailable';
}

/** The absolute local path a file URI names; 400 URIError for one that names no local path. */
function filePath(uri: string, url: URL): string {
  // `file://../x` parses with host "..": a relative path is not a file URI.
  if (url.hostname !== '' && url.hostname !== 'localhost') throw uriError(uri, `a file URI names a local absolute path (file:///dir/bundle.zip), not host "${url.hostname}"`);
  if (url.search !== '' || url.hash !== '') throw uriError(uri, 'a file URI has no query or fragment (percent-encode "?" and "#" in a file name)');
  if (url.pathname === '' || url.pathname === '/') throw uriError(uri, 'file path cannot be empty');
  let path: string;
  try {
    path = fileURLToPath(url);
  } catch {
    // Encoded "/" (%2F) in a segment.
    throw uriError(uri, 'not a file path this server can read');
  }
  if (path.includes('\0')) throw uriError(uri, 'a file path cannot contain NUL (%00)');
  return path;
}

function tooLarge(uri: string, max: number): ModelFailure {
  return bundleError(`bundle at ${uri} is larger than ${max} bytes (MODEL_MAX_BUNDLE_BYTES)`);
}
