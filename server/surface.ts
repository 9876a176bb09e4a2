// What makes the blob API, the document platform and the model runtime answer differently
// although one router and one exchange serve them all: their error envelopes, the headers every
// answer carries, and where their requests are counted.

import type { Logger } from '../engine/base/log.js';

/** An error as a surface answers it. */
interface ErrorAnswer {
  status: number;
  body: unknown;
  headers?: Record<string, string | undefined>;
  /** The error's name for metrics (the model runtime counts failures by it). */
  errorName?: string;
}

export interface Surface {
  readonly log: Logger;
  /** SVC_HTTP_LINGER_BYTES (request-body.ts). */
  readonly lingerBytes: number;
  /** The answer for an error this surface knows, or undefined: it is logged and `internal` answers. */
  known(err: unknown): ErrorAnswer | undefined;
  /** The answer for any other error: its text is never sent, only a request id to find it in the log. */
  internal(requestId: string, fallbackCode: string): ErrorAnswer;
  /** A request arrived. */
  begin(): void;
  /** Its status line was written after `seconds`. */
  observe(route: string, method: string, status: number, seconds: number, errorName?: string): void;
}
