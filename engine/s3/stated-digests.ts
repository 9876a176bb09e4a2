// What an S3 request states of its body's digests, checked by the body's ingest before anything
// is published or recorded (engine/cas DirectIngest `verify`): the SHA-256 its signature covers
// (x-amz-content-sha256) and its Content-MD5. The ingest takes the SHA-256 that names the blob
// anyway (on its scanning thread) and the MD5 as the bytes are pushed, so no body is hashed
// twice, and a body that fails leaves nothing behind (its blocks go back).

import type { IngestOptions, MeasuredIngest } from '../cas/index.js';
import { s3Refusal } from './errors.js';

export interface StatedDigests {
  /** x-amz-content-sha256 when it is a hash (hex, lower case). */
  sha256?: string;
  /** Content-MD5 as sent (base64). */
  contentMd5?: string;
}

/** An ingest's MD5 measured and the stated digests checked against what it measured. */
export function measuredAgainst(stated: StatedDigests): Required<Pick<IngestOptions, 'md5' | 'verify'>> {
  return {
    md5: true,
    verify: (measured: MeasuredIngest) => {
      if (stated.sha256 !== undefined && measured.sha256 !== stated.sha256) {
        throw s3Refusal('XAmzContentSHA256Mismatch', "The provided 'x-amz-content-sha256' header does not match what was computed.");
      }
      if (stated.contentMd5 !== undefined && Buffer.from(stated.contentMd5, 'base64').toString('hex') !== measured.md5) {
        throw s3Refusal('BadDigest', 'The Content-MD5 you specified did not match what we received.');
      }
    },
  };
}
