// Bundle repositories: where a registered URI is fetched from. `file://` is read in place;
// `s3://` and `gs://` are streamed to a local file (at most MODEL_MAX_BUNDLE_BYTES) and read
// from there. The caller deletes what `acquire` returns with `release`.

import { createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { ModelConfig } from '../config.js';
import { ModelError, bundleError } from './errors.js';

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
  ) {}

  /** Checks a URI's syntax and scheme without fetching anything. */
  static parse(uri: string): URL {
    let url: URL;
    try {
      url = new URL(uri.trim());
    } catch {
      throw uriError(uri, 'not a valid URI');
    }
    if (url.protocol === 'file:') {
      if (url.pathname === '' || url.pathname === '/') throw uriError(uri, 'file path cannot be empty');
    } else if (url.protocol === 's3:' || url.protocol === 'gs:') {
      if (!url.hostname) throw uriError(uri, 'bucket name is missing');
      if (url.pathname.length <= 1) throw uriError(uri, 'object key is missing');
    } else {
      throw uriError(uri, `unsupported scheme "${url.protocol.replace(/:$/, '')}" (file, s3 or gs)`);
    }
    return url;
  }

  async acquire(uri: string, signal: AbortSignal): Promise<AcquiredBundle> {
    const url = Repositories.parse(uri);
    if (url.protocol === 'file:') return this.file(uri, url);
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

  private async file(uri: string, url: URL): Promise<AcquiredBundle> {
    const path = fileURLToPath(url);
    await stat(path).catch(() => {
      throw new ModelError('BundleException', `file does not exist: ${path} (${uri})`, 400);
    });
    return { path, release: async () => {} };
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

function uriError(uri: string, reason: string): ModelError {
  return new ModelError('URIError', `URI error for '${uri}': ${reason}`, 400);
}

function tooLarge(uri: string, max: number): ModelError {
  return bundleError(`bundle at ${uri} is larger than ${max} bytes (MODEL_MAX_BUNDLE_BYTES)`);
}
