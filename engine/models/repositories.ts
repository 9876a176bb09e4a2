// Bundle repositories: where a registered URI is fetched from. `file://` is read in place, once
// the roots (SVC_MODEL_ROOTS, roots.ts) allow it; `s3://` and `gs://` are streamed to a local
// file (at most MODEL_MAX_BUNDLE_BYTES) and read from there. The caller deletes what `acquire`
// returns with `release`.

import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { ModelConfig } from '../config.js';
import { ModelError, bundleError } from './errors.js';
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
    } else {
      throw uriError(uri, `unsupported scheme "${url.protocol.replace(/:$/, '')}" (file, s3 or gs)`);
    }
    return url;
  }

  /** For a file:// URI, whether the roots allow it (throws as `acquire` would); nothing for the other schemes. */
  async checkLocation(uri: string): Promise<void> {
    const url = Repositories.parse(uri);
    if (url.protocol === 'file:') await this.roots.locate(filePath(uri, url), uri);
  }

  async acquire(uri: string, signal: AbortSignal): Promise<AcquiredBundle> {
    const url = Repositories.parse(uri);
    if (url.protocol === 'file:') return { path: await this.roots.locate(filePath(uri, url), uri), release: async () => {} };
    const target = join(this.downloadDir, `${randomUUID()}.zip`);
    await mkdir(this.downloadDir, { recursive: true });
    const release = () => rm(target, { force: true });
    try {
      const body = url.protocol === 's3:' ? await this.s3Object(uri, url, signal) : await this.gcsObject(uri, url, signal);
      await pipeline(body, this.limit(uri), createWriteStream(target), { signal });
    } catch (err) {
      await release();
      if (err instanceof ModelError) throw err;
      if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : err;
      throw uriError(uri, (err as Error).message);
    }
    return { path: target, release };
  }

  private async s3Object(uri: string, url: URL, signal: AbortSignal): Promise<Readable> {
    this.s3 ??= new S3Client({
      ...(this.config.s3Endpoint ? { endpoint: this.config.s3Endpoint } : {}),
      forcePathStyle: this.config.s3ForcePathStyle,
    });
    const key = decodeURIComponent(url.pathname.slice(1));
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
    const object = encodeURIComponent(decodeURIComponent(url.pathname.slice(1)));
    const address = `${this.config.gcsEndpoint}/storage/v1/b/${encodeURIComponent(url.hostname)}/o/${object}?alt=media`;
    const token = process.env.GOOGLE_OAUTH_ACCESS_TOKEN;
    const response = await fetch(address, { signal, headers: token ? { authorization: `Bearer ${token}` } : {} });
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      throw uriError(uri, `Google Cloud Storage answered ${response.status}`);
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

function uriError(uri: string, reason: string): ModelError {
  return new ModelError('URIError', `URI error for '${uri}': ${reason}`, 400);
}

function tooLarge(uri: string, max: number): ModelError {
  return bundleError(`bundle at ${uri} is larger than ${max} bytes (MODEL_MAX_BUNDLE_BYTES)`);
}
