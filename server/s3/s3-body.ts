// An S3 request body as it streams: decoded when it is `aws-chunked` (server/s3/aws-chunked.ts,
// chunk signatures and trailer checked), and measured as it passes: the x-amz-checksum-* it
// announced (400 BadDigest) and, unless the sink is an ingest that takes them itself
// (`digestsBySink`: engine/s3/stated-digests.ts), its MD5 (the ETag; Content-MD5 → 400
// BadDigest) and its SHA-256 when the signature covered one (400 XAmzContentSHA256Mismatch). The decoded bytes go to a sink (a PutObject's
// ingest, or a bounded collector for an XML body) with the ingest's backpressure; the promise
// resolves only once the body has ended and every check passed, so a PutObject publishes nothing
// before that (the caller ends its ingest then).

import crypto from 'node:crypto';
import type { DirectIngest } from '../../engine/cas/index.js';
import { CHECKSUM_ALGORITHMS, CHECKSUM_HEADER, type ChecksumAlgorithm, type Checksum, checksumAlgorithm, checksumOfTrailer, createChecksum, isChecksumValue } from '../../engine/s3/checksums.js';
import type { Stats } from '../../engine/ops/index.js';
import { AwsChunkedDecoder } from './aws-chunked.js';
import { type BodySource, SocketBody } from '../body-sources.js';
import type { Exchange } from '../exchange.js';
import { S3Error } from './s3-error.js';
import type { S3Head } from './s3-head.js';
import type { Payload } from './sigv4.js';

/** What was measured of a body that passed every check. */
export interface MeasuredBody {
  size: number;
  md5: string;
  /** x-amz-checksum-* of the body (the one the request sent, by header or trailer). */
  checksums: Partial<Record<ChecksumAlgorithm, string>>;
  /** With a tap: the trailing checksum as sent, for the tap's owner to compare. */
  trailerChecksum?: string;
}

/** How a body is checked: what the request said of it. */
export interface BodyChecks {
  payload: Payload;
  /** Content-MD5 (base64 of 16 bytes). */
  contentMd5?: string;
  /** The checksum a header sent, with its value. */
  headerChecksum?: { algorithm: ChecksumAlgorithm; value: string };
  /** The algorithm of the trailing checksum (aws-chunked with x-amz-trailer). */
  trailerChecksum?: ChecksumAlgorithm;
  /**
   * The sink is an ingest that takes the body's MD5 and checks the signed SHA-256 and
   * Content-MD5 itself (engine/s3/stated-digests.ts): the edge hashes neither.
   */
  digestsBySink?: boolean;
}

/**
 * The checks of a request's body, from its headers (invalid values: 400 InvalidDigest / InvalidRequest).
 * `objectChecksum`: the request's x-amz-checksum-* is the object's, not the body's (CompleteMultipartUpload).
 */
export function bodyChecksOf(head: S3Head, payload: Payload, options: { objectChecksum?: boolean } = {}): BodyChecks {
  const checks: BodyChecks = { payload };
  const md5 = head.header('content-md5');
  if (md5 !== undefined) {
    if (!/^[A-Za-z0-9+/]{22}==$/.test(md5.trim())) throw new S3Error('InvalidDigest', 'The Content-MD5 you specified is not valid.');
    checks.contentMd5 = md5.trim();
  }
  for (const algorithm of options.objectChecksum ? [] : CHECKSUM_ALGORITHMS) {
    const value = head.header(CHECKSUM_HEADER[algorithm]);
    if (value === undefined) continue;
    if (checks.headerChecksum) throw new S3Error('InvalidRequest', 'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.');
    if (!isChecksumValue(algorithm, value.trim())) throw new S3Error('InvalidRequest', `Value for ${CHECKSUM_HEADER[algorithm]} header is invalid.`);
    checks.headerChecksum = { algorithm, value: value.trim() };
  }
  if (payload.kind === 'chunked' && payload.trailers.length > 0) {
    checks.trailerChecksum = checksumOfTrailer(payload.trailers[0]!);
  }
  const declared = head.header('x-amz-sdk-checksum-algorithm') ?? head.header('x-amz-checksum-algorithm');
  if (declared !== undefined && !checksumAlgorithm(declared)) throw new S3Error('InvalidRequest', `Checksum algorithm ${declared} is not supported.`);
  return checks;
}

/**
 * The request's body as a source. A body of no bytes (Content-Length: 0, or neither it nor
 * Transfer-Encoding, as uWS reads it) is never read from the
 * socket: uWS delivers nothing to a reader set after the request's callback returned (a handler
 * that awaited a database first would wait for ever), and there is nothing to read.
 */
export function requestBodyOf(ex: Exchange, head: S3Head): BodySource {
  const length = head.header('content-length')?.trim();
  if (head.header('transfer-encoding') !== undefined || (length !== undefined && length !== '0')) return new SocketBody(ex);
  return { start: (sink) => sink(new Uint8Array(0), true), pause: () => {}, resume: () => {} };
}

/** Where decoded bytes go: push returns false when the sink is full (the source pauses until `resume`). */
export interface BodySink {
  push(data: Uint8Array): boolean;
}

/** Collects a small body (an XML request), at most `max` bytes (else 400 MaxMessageLengthExceeded). */
export class Collector implements BodySink {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max: number) {}
  push(data: Uint8Array): boolean {
    this.size += data.length;
    if (this.size > this.max) throw new S3Error('MaxMessageLengthExceeded', `Your request was too big (more than ${this.max} bytes).`);
    this.chunks.push(Buffer.from(data));
    return true;
  }
  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

/**
 * Streams `source` through the decoder and the checks into `sink` (an ingest: its backpressure
 * and its errors). Resolves once the body ended and passed; rejects (the ingest aborted) on the
 * first failure or when the client goes away. `tap` sees each decoded piece before the sink (an
 * UploadPart's own hashes: engine/s3/multipart-uploads.ts MultipartPart.chunk); with a tap, the
 * x-amz-checksum-* is the tap's owner's to take and compare (each body hashed once): this checks
 * the framing and the signatures, and returns the trailer's value. With `digestsBySink` the
 * ingest takes the MD5 and checks the SHA-256 and Content-MD5 itself.
 */
export async function pumpBody(ex: Exchange, source: BodySource, checks: BodyChecks, sink: BodySink | DirectIngest, stats: Stats, tap?: (data: Uint8Array) => void): Promise<MeasuredBody> {
  const { payload } = checks;
  const checksumAlgo = tap ? undefined : (checks.headerChecksum?.algorithm ?? checks.trailerChecksum);
  const checksum: Checksum | undefined = checksumAlgo ? await createChecksum(checksumAlgo) : undefined;
  const decoder = payload.kind === 'chunked' ? new AwsChunkedDecoder({ decodedLength: payload.decodedLength, signing: payload.signing, trailers: payload.trailers, checksum }) : undefined;
  const md5 = tap || checks.digestsBySink ? undefined : crypto.createHash('md5');
  const sha256 = payload.kind === 'sha256' && !checks.digestsBySink ? crypto.createHash('sha256') : undefined;
  const ingest = 'admit' in sink ? sink : undefined;
  let size = 0;
  return new Promise<MeasuredBody>((resolve, reject) => {
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      ingest?.abort();
      // A checksum left undigested: its pooled instance is simply not returned.
      reject(err);
    };
    ex.onAbort(() => fail(new S3Error('IncompleteBody', 'The client went away before the body ended')));
    if (ingest) {
      ingest.onResume = () => source.resume();
      ingest.onError = fail;
    }
    const take = (data: Uint8Array) => {
      md5?.update(data);
      sha256?.update(data);
      // The decoder feeds the checksum itself (it compares the trailer).
      if (!decoder) checksum?.update(data);
      size += data.length;
      tap?.(data);
      if (!sink.push(data)) source.pause();
    };
    source.start((chunk, isLast) => {
      if (settled || !ex.live) return;
      try {
        if (chunk.length > 0) {
          stats.recordBodyBytes(chunk.length);
          if (decoder) decoder.write(chunk, take);
          else take(chunk);
        }
        if (!isLast) return;
        if (ingest) ingest.onResume = () => {};
        source.resume();
        const trailers = decoder?.end();
        const measured = tap ? tapped(checks, size, sha256, trailers) : finish(checks, size, md5, sha256, checksum, checksum ? trailers?.get(CHECKSUM_HEADER[checksum.algorithm]) : undefined);
        settled = true;
        resolve(measured);
      } catch (err) {
        fail(err);
      }
    });
    if (ingest) {
      ingest.admit(() => source.resume());
      if (!ingest.isAdmitted) source.pause();
    }
  });
}

/** The end of a tapped body: the SHA-256 checked; the trailer's checksum (well-formed) handed on. */
function tapped(checks: BodyChecks, size: number, sha256: crypto.Hash | undefined, trailers: Map<string, string> | undefined): MeasuredBody {
  checkSha256(checks, sha256);
  const algorithm = checks.trailerChecksum;
  const sent = algorithm ? trailers?.get(CHECKSUM_HEADER[algorithm]) : undefined;
  if (algorithm && sent !== undefined && !isChecksumValue(algorithm, sent)) throw new S3Error('InvalidRequest', `Value for ${CHECKSUM_HEADER[algorithm]} trailing header is invalid.`);
  return { size, md5: '', checksums: {}, ...(sent !== undefined ? { trailerChecksum: sent } : {}) };
}

function checkSha256(checks: BodyChecks, sha256: crypto.Hash | undefined): void {
  if (sha256 && checks.payload.kind === 'sha256' && sha256.digest('hex') !== checks.payload.sha256) {
    throw new S3Error('XAmzContentSHA256Mismatch', "The provided 'x-amz-content-sha256' header does not match what was computed.");
  }
}

/**
 * The checks at the body's end (the trailer's checksum was compared by the decoder). Without
 * `md5` the sink measures the digests (`digestsBySink`): the MD5 is then its to report.
 */
function finish(checks: BodyChecks, size: number, md5: crypto.Hash | undefined, sha256: crypto.Hash | undefined, checksum: Checksum | undefined, trailed: string | undefined): MeasuredBody {
  checkSha256(checks, sha256);
  const digest = md5?.digest();
  if (digest && checks.contentMd5 !== undefined && digest.toString('base64') !== checks.contentMd5) {
    throw new S3Error('BadDigest', 'The Content-MD5 you specified did not match what we received.');
  }
  const checksums: MeasuredBody['checksums'] = {};
  if (checksum) {
    // A trailer's value was compared by the decoder (which digested the checksum).
    const value = trailed ?? checksum.digest();
    if (checks.headerChecksum && value !== checks.headerChecksum.value) {
      throw new S3Error('BadDigest', `The ${checksum.algorithm} you specified did not match the calculated checksum.`);
    }
    checksums[checksum.algorithm] = value;
  }
  return { size, md5: digest ? digest.toString('hex') : '', checksums };
}
