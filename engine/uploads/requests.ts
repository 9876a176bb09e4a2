// What a resumable session is asked (its creation, a part) and what a part being received is.

import type { OpenSession, TusFacts } from '../store/index.js';
import type { PartIngest } from './part-ingest.js';

export interface CreateRequest {
  tenant: string;
  id: string;
  declaredLength?: number;
  contentType?: string;
  tus?: TusFacts;
}

export interface PartRequest {
  tenant: string;
  id: string;
  partId: string;
  offset: number;
  length: number;
  /**
   * The largest part this request may be (default SVC_UPLOAD_MAX_PART_BYTES): tus has no parts,
   * so its PATCH may carry the rest of the object in one body (server/tus-api.ts).
   */
  maxPartBytes?: number;
}

declare const admitted: unique symbol;
/**
 * A part the tenant gate let through (Uploads.admitPart): the only request `beginPart` takes, so
 * no protocol starts a part without the gate.
 */
export type AdmittedPart = PartRequest & { readonly [admitted]: true };

/** A part being received: push its body into `ingest` once `ready`, then `finish`. */
export interface PartUpload {
  ingest: PartIngest;
  /** The object's hash is ready to continue (rebuilt after a restart, else at once). */
  ready: Promise<void>;
  /** After the body ended: stages the tail and records the part. */
  finish(): Promise<OpenSession>;
  /** The request failed or the client went away: the session is left as it was. */
  abort(): void;
  /** `abort`, resolved once the lease is released (answer a failure after it: a retry then finds the session free). */
  release(): Promise<void>;
}
