// How a signed request's body is checked (x-amz-content-sha256): a SHA-256 it must have, none, or
// an `aws-chunked` body (AWS "Signature Calculations for the Authorization Header: Transferring
// Payload in Multiple Chunks" and "… Including Trailing Headers"), whose decoding and chunk
// signatures are server/s3/aws-chunked.ts's.

import { checksumOfTrailer } from '../../engine/s3/checksums.js';
import { S3Error } from './s3-error.js';

/** What a chunk's signature is chained from: the signing key, the request's time and scope, the seed (the request's signature). */
export interface ChunkSigning {
  key: Buffer;
  dateTime: string;
  scope: string;
  seed: string;
}

export type Payload =
  /** UNSIGNED-PAYLOAD: the body is taken as it comes. */
  | { kind: 'unsigned' }
  /** The body's SHA-256 (hex, lower-case) was signed: a body that ends with another is 400 XAmzContentSHA256Mismatch. */
  | { kind: 'sha256'; sha256: string }
  /**
   * `aws-chunked`: `decodedLength` bytes (x-amz-decoded-content-length) in chunks, each signed
   * (`signing`) or not (null: STREAMING-UNSIGNED-PAYLOAD-TRAILER), with `trailers` (the names
   * x-amz-trailer announces: one x-amz-checksum-*) after the last chunk.
   */
  | { kind: 'chunked'; decodedLength: number; signing: ChunkSigning | null; trailers: string[] };

const STREAMING: Record<string, { signed: boolean; trailer: boolean }> = {
  'STREAMING-AWS4-HMAC-SHA256-PAYLOAD': { signed: true, trailer: false },
  'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER': { signed: true, trailer: true },
  'STREAMING-UNSIGNED-PAYLOAD-TRAILER': { signed: false, trailer: true },
};

/** The chunked payload a streaming x-amz-content-sha256 announces; any other value is refused. */
export function parseChunkedPayload(hash: string, req: { header(name: string): string | undefined }, signing: ChunkSigning): Payload {
  const mode = Object.hasOwn(STREAMING, hash) ? STREAMING[hash] : undefined;
  if (!mode) {
    if (hash.startsWith('STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD')) throw new S3Error('NotImplemented', 'SigV4a (AWS4-ECDSA-P256-SHA256) is not implemented');
    throw new S3Error('InvalidArgument', 'x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, STREAMING-UNSIGNED-PAYLOAD-TRAILER or a valid sha256 value.', { ArgumentName: 'x-amz-content-sha256', ArgumentValue: hash });
  }
  const decoded = req.header('x-amz-decoded-content-length');
  if (decoded === undefined) throw new S3Error('MissingContentLength', 'An aws-chunked body needs x-amz-decoded-content-length');
  if (!/^\d{1,16}$/.test(decoded.trim()) || !Number.isSafeInteger(Number(decoded.trim()))) {
    throw new S3Error('InvalidArgument', 'x-amz-decoded-content-length must be a whole number of bytes', { ArgumentName: 'x-amz-decoded-content-length', ArgumentValue: decoded });
  }
  const trailers = (req.header('x-amz-trailer') ?? '').split(',').map((t) => t.trim().toLowerCase()).filter(Boolean);
  if (mode.trailer && trailers.length === 0) throw new S3Error('InvalidRequest', `${hash} needs x-amz-trailer naming the trailing checksum`);
  if (!mode.trailer && trailers.length > 0) throw new S3Error('InvalidRequest', `x-amz-trailer needs a *-TRAILER x-amz-content-sha256, not ${hash}`);
  if (trailers.length > 1) throw new S3Error('InvalidRequest', 'x-amz-trailer may name one checksum');
  for (const name of trailers) {
    if (!checksumOfTrailer(name)) throw new S3Error('InvalidRequest', `x-amz-trailer: "${name}" is not x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1 or -sha256`);
  }
  return { kind: 'chunked', decodedLength: Number(decoded.trim()), signing: mode.signed ? signing : null, trailers };
}
