// What every S3 operation's handler gets: the exchange, the request's head and query, the caller
// (the signing key's principal; the default tenant with security off) and how its body is signed.

import type { Principal } from '../../engine/auth/index.js';
import type { Engine } from '../../engine/engine.js';
import type { Exchange } from '../exchange.js';
import { XML } from './s3-answer.js';
import type { S3Head } from './s3-head.js';
import type { Payload } from './sigv4.js';

export interface S3Call {
  engine: Engine;
  ex: Exchange;
  head: S3Head;
  query: Map<string, string>;
  principal: Principal;
  /** S3's Owner DisplayName of the caller. */
  displayName: string;
  /** Security on: the caller goes through the tenant gate (ingests); off: the default tenant, no gate. */
  gated: boolean;
  payload: Payload;
  /** Bytes served to the caller, against its budget (429 → 503 SlowDown when spent). */
  charge: (bytes: number) => void;
}

/** A 200 with an XML document. */
export function sendXml(call: S3Call, xml: string, headers: Record<string, string> = {}): void {
  call.ex.send(200, { 'Content-Type': XML, ...headers }, xml);
}
