// The `aws-chunked` body decoder: `<hex size>[;chunk-signature=<sig>]\r\n<bytes>\r\n` … a chunk of
// size 0, then trailer lines (`x-amz-checksum-crc32c:<base64>`, with `x-amz-trailer-signature:<sig>`
// when chunks are signed) and an empty line. A push parser: bytes go through as they come (views
// of what was written, never collected), each chunk's signature is checked as the chunk ends,
// chained from the seed (the request's signature), and only a line of framing is ever buffered
// (at most S3_CHUNK_LINE_MAX_BYTES). The bytes of a chunk are passed on before its signature is
// checked at its end: whoever stores them publishes nothing before end() returned.
//
// AWS: "Signature Calculations for the Authorization Header: Transferring Payload in Multiple
// Chunks (Chunked Upload)" and "… Including Trailing Headers". Clients end the body in slightly
// different ways (the JavaScript SDK sends `0\r\n` and nothing more when there is no checksum):
// the end of the body right after the last chunk or the last trailer is accepted.

import crypto from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { S3_CHUNK_LINE_MAX_BYTES, S3_MAX_TRAILERS } from '../../engine/base/limits.js';
import { CHECKSUM_HEADER, isChecksumValue, type Checksum } from '../../engine/s3/checksums.js';
import { S3Error } from './s3-error.js';
import { EMPTY_SHA256, hmacHex, sha256Hex } from '../../engine/base/sigv4-primitives.js';
import type { ChunkSigning } from './sigv4-payload.js';
import { signaturesEqual } from './signing-key.js';

export interface ChunkedOptions {
  /** x-amz-decoded-content-length: the bytes the chunks carry together. */
  decodedLength: number;
  /** Signed chunks (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]); null: unsigned chunks. */
  signing: ChunkSigning | null;
  /** The trailers x-amz-trailer announced (lower-case names); with signed chunks they are signed too. */
  trailers: readonly string[];
  /** Fed the decoded bytes; at the end compared with the trailer of its name (400 BadDigest). */
  checksum?: Checksum;
}

type State = 'size' | 'data' | 'data-end' | 'trailer' | 'done';

const SIGNED_SIZE = /^([0-9a-fA-F]{1,16});chunk-signature=([0-9a-fA-F]{64})$/;
/** Unsigned chunks: a size, and chunk extensions (none is defined for S3: ignored). */
const UNSIGNED_SIZE = /^([0-9a-fA-F]{1,16})(?:;.*)?$/;
const TRAILER_SIGNATURE = 'x-amz-trailer-signature';

const malformed = (why: string) => new S3Error('InvalidRequest', `aws-chunked body: ${why}`);
const badTrailer = (why: string) => new S3Error('MalformedTrailerError', `The request contained trailing data that was not well-formed: ${why}`);

export class AwsChunkedDecoder {
  private state: State = 'size';
  private readonly line = Buffer.allocUnsafe(S3_CHUNK_LINE_MAX_BYTES);
  private lineLength = 0;
  /** Bytes of the current chunk still to come, and of `\r\n` after it. */
  private remaining = 0;
  private crlf = 0;
  private decoded = 0;
  private chunkHash: crypto.Hash | null = null;
  private chunkSignature = '';
  /** The signature the next one is chained from: the seed, then each chunk's. */
  private previous: string;
  private readonly received = new Map<string, string>();
  /** Trailer lines as received (what the trailer signature covers). */
  private trailerBlock = '';
  private trailerSigned = false;

  constructor(private readonly options: ChunkedOptions) {
    this.previous = options.signing?.seed ?? '';
  }

  /** Decodes `bytes`, handing each run of body bytes to `emit` (a view of `bytes`). Throws S3Error. */
  write(bytes: Uint8Array, emit: (data: Uint8Array) => void): void {
    let at = 0;
    while (at < bytes.length) {
      switch (this.state) {
        case 'data': {
          const n = Math.min(this.remaining, bytes.length - at);
          const data = bytes.subarray(at, at + n);
          this.chunkHash?.update(data);
          this.options.checksum?.update(data);
          this.remaining -= n;
          this.decoded += n;
          at += n;
          emit(data);
          if (this.remaining === 0) this.state = 'data-end';
          break;
        }
        case 'data-end': {
          const expected = this.crlf === 0 ? 0x0d : 0x0a;
          if (bytes[at] !== expected) throw malformed('a chunk is not followed by CRLF (its size is wrong)');
          at++;
          if (++this.crlf === 2) {
            this.crlf = 0;
            this.endChunk(this.chunkHash ? this.chunkHash.digest('hex') : '');
            this.state = 'size';
          }
          break;
        }
        case 'done':
          throw malformed('bytes follow the end of the body');
        default: {
          const line = this.takeLine(bytes, at);
          at = line.next;
          if (line.text !== undefined) this.onLine(line.text);
        }
      }
    }
  }

  /** The body ended: checks that it was whole. Returns the trailers (lower-case names). Throws S3Error. */
  end(): Map<string, string> {
    const atTrailerLineStart = this.state === 'trailer' && this.lineLength === 0;
    if (this.state !== 'done' && !atTrailerLineStart) throw new S3Error('IncompleteBody', 'The aws-chunked body ended inside a chunk');
    if (this.state !== 'done') this.finishTrailers();
    if (this.decoded !== this.options.decodedLength) {
      throw new S3Error('IncompleteBody', `The chunks carried ${this.decoded} bytes; x-amz-decoded-content-length said ${this.options.decodedLength}`);
    }
    const checksum = this.options.checksum;
    if (checksum) {
      const sent = this.received.get(CHECKSUM_HEADER[checksum.algorithm]);
      if (sent !== undefined) {
        if (!isChecksumValue(checksum.algorithm, sent)) throw new S3Error('InvalidRequest', `Value for ${CHECKSUM_HEADER[checksum.algorithm]} trailing header is invalid.`);
        if (checksum.digest() !== sent) throw new S3Error('BadDigest', `The ${checksum.algorithm} you specified did not match the calculated checksum.`);
      }
    }
    return this.received;
  }

  /** Reads up to a `\r\n`: the line without it when complete, and where the reading stopped. */
  private takeLine(bytes: Uint8Array, at: number): { text?: string; next: number } {
    const lf = bytes.indexOf(0x0a, at);
    const end = lf < 0 ? bytes.length : lf;
    if (this.lineLength + (end - at) > this.line.length) throw malformed(`a chunk or trailer line is longer than ${S3_CHUNK_LINE_MAX_BYTES} bytes`);
    this.line.set(bytes.subarray(at, end), this.lineLength);
    this.lineLength += end - at;
    if (lf < 0) return { next: bytes.length };
    if (this.lineLength === 0 || this.line[this.lineLength - 1] !== 0x0d) throw malformed('a line does not end with CRLF');
    const text = this.line.toString('latin1', 0, this.lineLength - 1);
    this.lineLength = 0;
    return { text, next: lf + 1 };
  }

  private onLine(text: string): void {
    if (this.state === 'size') this.onSizeLine(text);
    else this.onTrailerLine(text);
  }

  private onSizeLine(text: string): void {
    const m = (this.options.signing ? SIGNED_SIZE : UNSIGNED_SIZE).exec(text);
    if (!m) throw malformed(this.options.signing ? `"${text}" is not <hex size>;chunk-signature=<signature>` : `"${text}" is not a hexadecimal chunk size`);
    const size = parseInt(m[1]!, 16);
    if (this.decoded + size > this.options.decodedLength) throw malformed(`the chunks carry more than x-amz-decoded-content-length (${this.options.decodedLength} bytes)`);
    this.chunkSignature = m[2] ?? '';
    if (size === 0) {
      this.endChunk(this.options.signing ? EMPTY_SHA256 : '');
      this.state = 'trailer';
      return;
    }
    this.remaining = size;
    this.chunkHash = this.options.signing ? crypto.createHash('sha256') : null;
    this.state = 'data';
  }

  /** A chunk's bytes are all in: its signature (signed chunks) is checked, and chains the next. */
  private endChunk(dataHash: string): void {
    const signing = this.options.signing;
    this.chunkHash = null;
    if (!signing) return;
    const toSign = `AWS4-HMAC-SHA256-PAYLOAD\n${signing.dateTime}\n${signing.scope}\n${this.previous}\n${EMPTY_SHA256}\n${dataHash}`;
    this.previous = this.check(signing, toSign, this.chunkSignature, 'chunk');
  }

  private check(signing: ChunkSigning, toSign: string, provided: string, what: string): string {
    const expected = hmacHex(signing.key, toSign);
    if (!signaturesEqual(provided, expected)) {
      throw new S3Error('SignatureDoesNotMatch', `The ${what} signature we calculated does not match the signature you provided.`, { StringToSign: toSign, SignatureProvided: provided });
    }
    return expected;
  }

  private onTrailerLine(text: string): void {
    if (text === '') {
      this.finishTrailers();
      this.state = 'done';
      return;
    }
    const colon = text.indexOf(':');
    if (colon <= 0) throw badTrailer(`"${text}" is not name:value`);
    const name = text.slice(0, colon).trim().toLowerCase();
    const value = text.slice(colon + 1).trim();
    const signing = this.options.signing;
    if (this.trailerSigned) throw badTrailer('a trailer follows x-amz-trailer-signature');
    if (name === TRAILER_SIGNATURE && signing && this.options.trailers.length > 0) {
      const toSign = `AWS4-HMAC-SHA256-TRAILER\n${signing.dateTime}\n${signing.scope}\n${this.previous}\n${sha256Hex(this.trailerBlock)}`;
      this.previous = this.check(signing, toSign, value, 'trailer');
      this.trailerSigned = true;
      return;
    }
    if (!this.options.trailers.includes(name)) throw badTrailer(`"${name}" was not announced in x-amz-trailer`);
    if (this.received.has(name)) throw badTrailer(`"${name}" is sent twice`);
    if (this.received.size === S3_MAX_TRAILERS) throw badTrailer(`more than ${S3_MAX_TRAILERS} trailers`);
    this.received.set(name, value);
    this.trailerBlock += `${name}:${value}\n`;
  }

  private finishTrailers(): void {
    for (const name of this.options.trailers) if (!this.received.has(name)) throw badTrailer(`the trailer "${name}" announced in x-amz-trailer is missing`);
    if (this.options.signing && this.options.trailers.length > 0 && !this.trailerSigned) throw badTrailer('x-amz-trailer-signature is missing');
  }
}

/** The decoder as a stream: encoded bytes in, body bytes out; an S3Error destroys it. `trailers` once it ended. */
export class AwsChunkedStream extends Transform {
  private readonly decoder: AwsChunkedDecoder;
  trailers: ReadonlyMap<string, string> | undefined;

  constructor(options: ChunkedOptions) {
    super();
    this.decoder = new AwsChunkedDecoder(options);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    try {
      this.decoder.write(chunk, (data) => this.push(data));
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    try {
      this.trailers = this.decoder.end();
      done();
    } catch (err) {
      done(err as Error);
    }
  }
}

/** A Content-Encoding to store: the header without `aws-chunked` (S3 keeps only the others), or undefined when nothing is left. */
export function storedContentEncoding(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const rest = value.split(',').map((v) => v.trim()).filter((v) => v !== '' && v.toLowerCase() !== 'aws-chunked');
  return rest.length > 0 ? rest.join(',') : undefined;
}
