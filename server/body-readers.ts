// Bodies read whole because their handler needs all of them at once, each bounded: a JSON body
// (document platform) and a model frame (read into one shared buffer the workers parse in place).

import { SvcError, payloadTooLarge } from '../engine/base/errors.js';
import type { FrameBody } from '../engine/models/index.js';
import { type Exchange, header } from './exchange.js';
import type { BodyReader } from './router.js';
import { BodyDigest } from './idempotent.js';
import { invalidJsonMessage } from './json-syntax.js';

/** The error for a body larger than `max` bytes, in the surface's terms. */
type TooLarge = (max: number) => Error;

/** A JSON body: its value, its size and (for a request with an Idempotency-Key) the SHA-256 of its bytes, taken as they streamed. */
export interface JsonBody {
  value: unknown;
  bytes: number;
  digest?: string;
}

/** A route's JSON body (`Call.body`): at most `max` bytes, else 413 `payload_too_large`. */
export const jsonBody = (max: number): BodyReader<JsonBody> => (ex, req, charge) =>
  readJson(ex, max, payloadTooLarge, charge, header(req, 'idempotency-key') === undefined ? undefined : new BodyDigest());

/** A route's body in one shared buffer (`Call.body`), at most `max` bytes, else `tooLarge`. */
export const sharedBody = (max: number, tooLarge: TooLarge): BodyReader<FrameBody> => (ex, req, charge) => readShared(ex, max, header(req, 'content-length'), tooLarge, charge);

/** Takes a chunk's bytes from the caller's budget; throws once it is spent (router.ts Call.chargeBytes). */
type Charge = (bytes: number) => void;
const FREE: Charge = () => {};

/**
 * The whole JSON body (at most `max` bytes, else `tooLarge`), each chunk charged as it arrives
 * (a refusal rejects at once); 400 `invalid_json` when it does not parse, naming where (json-syntax.ts).
 */
export function readJson(ex: Exchange, max: number, tooLarge: TooLarge, charge: Charge = FREE, digest?: BodyDigest): Promise<JsonBody> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    ex.onAbort(() => reject(new Error('client went away')));
    ex.body.read((chunk, isLast) => {
      if (failed) return;
      size += chunk.byteLength;
      if (size > max) {
        failed = true;
        reject(tooLarge(max));
        return;
      }
      try {
        charge(chunk.byteLength);
      } catch (err) {
        failed = true;
        reject(err);
        return;
      }
      const copy = Buffer.from(chunk.slice(0));
      digest?.update(copy);
      chunks.push(copy);
      if (!isLast) return;
      const hex = digest?.hex();
      if (size === 0) return resolve({ value: undefined, bytes: 0, digest: hex });
      const text = Buffer.concat(chunks, size).toString('utf8');
      try {
        resolve({ value: JSON.parse(text), bytes: size, digest: hex });
      } catch (err) {
        reject(new SvcError('invalid', 'invalid_json', invalidJsonMessage(text, err)));
      }
    });
  });
}

/**
 * The body (at most `max` bytes, else `tooLarge`) in one shared buffer, sized by Content-Length
 * when there is one; each chunk charged as it arrives.
 */
export function readShared(ex: Exchange, max: number, declaredLength: string | undefined, tooLarge: TooLarge, charge: Charge = FREE): Promise<FrameBody> {
  return new Promise((resolve, reject) => {
    const declared = declaredLength === undefined ? undefined : Number(declaredLength);
    if (declared !== undefined && declared > max) {
      reject(tooLarge(max));
      return;
    }
    let bytes = new SharedArrayBuffer(declared !== undefined && Number.isSafeInteger(declared) ? declared : 16 * 1024);
    let view = new Uint8Array(bytes);
    let length = 0;
    let failed = false;
    ex.onAbort(() => reject(new Error('client went away')));
    ex.body.read((chunk, last) => {
      if (failed) return;
      if (length + chunk.byteLength > max) {
        failed = true;
        reject(tooLarge(max));
        return;
      }
      try {
        charge(chunk.byteLength);
      } catch (err) {
        failed = true;
        reject(err);
        return;
      }
      if (length + chunk.byteLength > bytes.byteLength) {
        const grown = new SharedArrayBuffer(Math.min(max, Math.max(bytes.byteLength * 2, length + chunk.byteLength)));
        new Uint8Array(grown).set(view.subarray(0, length));
        bytes = grown;
        view = new Uint8Array(grown);
      }
      view.set(new Uint8Array(chunk), length);
      length += chunk.byteLength;
      if (last) resolve({ bytes, length });
    });
  });
}
