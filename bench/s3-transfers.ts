/**
 * Large transfers with the AWS SDK, the same for every S3 server a bench measures (bench/pg-s3.ts,
 * bench/s3-api.ts): an `@aws-sdk/lib-storage` multipart Upload from a file, and a download by
 * ranged GETs several at a time, as aws-cli and the SDKs' transfer managers do.
 */
import { createReadStream } from 'node:fs';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';

const MiB = 1024 * 1024;

export interface MultipartShape {
  partSize: number;
  queueSize: number;
}

/** Uploads `file` as `bucket`/`key` with lib-storage; the seconds it took. */
export async function libStorageUpload(c: S3Client, bucket: string, file: string, key: string, shape: MultipartShape): Promise<number> {
  const started = performance.now();
  const upload = new Upload({
    client: c,
    params: { Bucket: bucket, Key: key, Body: createReadStream(file, { highWaterMark: MiB }), ContentType: 'application/octet-stream' },
    partSize: shape.partSize,
    queueSize: shape.queueSize,
  });
  await upload.done();
  return (performance.now() - started) / 1000;
}

/** Reads the object with `inFlight` ranged GETs of `rangeSize` at a time, counting and dropping the bytes; the seconds it took. */
export async function rangedDownload(c: S3Client, bucket: string, key: string, size: number, rangeSize = 8 * MiB, inFlight = 4): Promise<number> {
  const started = performance.now();
  let next = 0;
  let total = 0;
  const worker = async () => {
    for (;;) {
      const start = next;
      if (start >= size) return;
      next += rangeSize;
      const end = Math.min(size, start + rangeSize) - 1;
      const out = await c.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: `bytes=${start}-${end}` }));
      let n = 0;
      for await (const chunk of out.Body as AsyncIterable<Uint8Array>) n += chunk.length;
      if (n !== end - start + 1) throw new Error(`range ${start}-${end}: ${n} bytes`);
      total += n;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  if (total !== size) throw new Error(`ranged download: ${total} of ${size} bytes`);
  return (performance.now() - started) / 1000;
}
