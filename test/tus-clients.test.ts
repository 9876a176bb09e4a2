// tus clients as users run them, unchanged, against svc's /files/: tus-js-client in Node uploads
// in chunks, is aborted and resumes from the URL it stored, uploads in parallel parts (tus
// concatenation), streams a body of unknown length, and reads the blob's id from the last answer;
// the blob is the bytes it sent. (Uppy in a browser: tus-browser.test.ts.)

import fs from 'node:fs';
import path from 'node:path';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { contentId, seededBytes } from './helpers/http.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const MiB = 1024 * 1024;
let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
});

/** Runs one tus-js-client upload to its end; resolves with the upload and the blob id its last answer named. */
function run(body: Buffer, options: Partial<tus.UploadOptions> = {}, stopAt?: number): Promise<{ upload: tus.Upload; blobId?: string; stopped: boolean }> {
  return new Promise((resolve, reject) => {
    let blobId: string | undefined;
    const upload: tus.Upload = new tus.Upload(body, {
      endpoint: `${server.url}/files/`,
      chunkSize: MiB,
      retryDelays: [],
      metadata: { filename: 'data.bin', filetype: 'application/octet-stream' },
      ...options,
      onAfterResponse: (_req, res) => {
        blobId = res.getHeader('X-Svc-Blob-Id') ?? blobId;
      },
      onChunkComplete: (_size, accepted) => {
        if (stopAt !== undefined && accepted >= stopAt) {
          void upload.abort().then(() => resolve({ upload, blobId, stopped: true }));
        }
      },
      onSuccess: () => resolve({ upload, blobId, stopped: false }),
      onError: reject,
    });
    upload.start();
  });
}

describe('tus-js-client (Node) against /files/', () => {
  test('uploads in 1 MiB chunks; the last answer names the blob, which is the bytes sent', async () => {
    const body = seededBytes(5 * MiB + 123, 11);
    const { upload, blobId } = await run(body);
    expect(blobId).toBe(contentId(body));
    expect(upload.url).toMatch(new RegExp(`^${server.url}/files/[0-9a-f-]{36}$`));
    const blob = Buffer.from(await (await fetch(`${server.url}/api/v1/blobs/${blobId}`)).arrayBuffer());
    expect(blob.equals(body)).toBe(true);
    const head = await fetch(upload.url!, { method: 'HEAD', headers: { 'Tus-Resumable': '1.0.0' } });
    expect(head.headers.get('x-svc-blob-id')).toBe(blobId);
  });

  test('aborted after 2 MiB, a new client finds the stored URL and resumes where the server stands', async () => {
    const body = seededBytes(6 * MiB, 12);
    const storage = path.join(tempRoot('svc-tus-urls-'), 'uploads.json');
    // FileUrlStorage is tus-js-client's Node store of upload URLs (exported, not in its types).
    const { FileUrlStorage } = tus as unknown as { FileUrlStorage: new (file: string) => NonNullable<tus.UploadOptions['urlStorage']> };
    const urlStorage = new FileUrlStorage(storage);
    const first = await run(body, { urlStorage, storeFingerprintForResuming: true, removeFingerprintOnSuccess: true }, 2 * MiB);
    expect(first.stopped).toBe(true);
    const url = first.upload.url!;
    const offset = Number((await fetch(url, { method: 'HEAD', headers: { 'Tus-Resumable': '1.0.0' } })).headers.get('upload-offset'));
    expect(offset).toBeGreaterThanOrEqual(2 * MiB);
    expect(offset).toBeLessThan(body.length);

    let resumedFrom = -1;
    const second = await new Promise<{ upload: tus.Upload; blobId?: string }>((resolve, reject) => {
      let blobId: string | undefined;
      const upload: tus.Upload = new tus.Upload(body, {
        endpoint: `${server.url}/files/`,
        chunkSize: MiB,
        retryDelays: [],
        urlStorage,
        storeFingerprintForResuming: true,
        removeFingerprintOnSuccess: true,
        onProgress: (sent) => {
          if (resumedFrom < 0) resumedFrom = sent;
        },
        onAfterResponse: (_req, res) => {
          blobId = res.getHeader('X-Svc-Blob-Id') ?? blobId;
        },
        onSuccess: () => resolve({ upload, blobId }),
        onError: reject,
      });
      upload.findPreviousUploads().then((previous) => {
        expect(previous).toHaveLength(1);
        upload.resumeFromPreviousUpload(previous[0]!);
        upload.start();
      }, reject);
    });
    expect(second.upload.url).toBe(url);
    expect(resumedFrom).toBeGreaterThanOrEqual(offset);
    expect(second.blobId).toBe(contentId(body));
    // The URL the first client stored is the one the second resumed: one upload, one session.
    expect(fs.readFileSync(storage, 'utf8')).toContain(url);
  });

  test('parallelUploads: three partial uploads at once, then the final concatenation names the blob', async () => {
    const body = seededBytes(7 * MiB + 3, 14);
    const { upload, blobId } = await run(body, { parallelUploads: 3, chunkSize: MiB });
    expect(blobId).toBe(contentId(body));
    const head = await fetch(upload.url!, { method: 'HEAD', headers: { 'Tus-Resumable': '1.0.0' } });
    expect(head.headers.get('upload-concat')).toMatch(/^final;\/files\/[0-9a-f-]{36}( \/files\/[0-9a-f-]{36}){2}$/);
    const blob = Buffer.from(await (await fetch(`${server.url}/api/v1/blobs/${blobId}`)).arrayBuffer());
    expect(blob.equals(body)).toBe(true);
  });

  test('deferred length from a stream of unknown size', async () => {
    const body = seededBytes(3 * MiB + 5, 13);
    const { Readable } = await import('node:stream');
    const stream = Readable.from((function* () {
      for (let at = 0; at < body.length; at += 256 * 1024) yield body.subarray(at, at + 256 * 1024);
    })());
    const { blobId } = await run(stream as unknown as Buffer, { uploadLengthDeferred: true, chunkSize: MiB });
    expect(blobId).toBe(contentId(body));
  });
});
