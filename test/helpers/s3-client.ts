// The S3 API tests' client and their way of reading a refusal (test/s3-api.test.ts,
// test/s3-multipart-api.test.ts): the AWS SDK, path style, no retry (a refusal is the answer).
import { S3Client, S3ServiceException } from '@aws-sdk/client-s3';

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

/** A client of the S3 listener at `url` (http://127.0.0.1:<port>). */
export function s3Client(url: string, credentials: S3Credentials, more: Record<string, unknown> = {}): S3Client {
  return new S3Client({ endpoint: url, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1, ...more });
}

/** The S3 error a command fails with: its code and HTTP status (an error if it succeeds). */
export async function s3Failure(p: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof S3ServiceException) return { name: err.name, status: err.$metadata.httpStatusCode };
    throw err;
  }
  throw new Error('expected a failure');
}
