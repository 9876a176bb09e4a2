// The locality runtime's forwarding (SVC_LOCALITY=on): a session-localized upload that another
// node owns is streamed to it once, chunk by chunk with the socket paused while the owner's
// connection is full (never buffered whole), and the owner's answer is relayed. An owner that
// cannot be reached, drops the stream before answering, or is silent for SVC_LOCALITY_TIMEOUT
// (neither taking bytes nor answering: a stopped node) is 503 locality_failed.
import http from 'node:http';
import { SvcError } from '../engine/base/errors.js';
import type { BodySource } from './body-sources.js';
import type { Exchange } from './exchange.js';
import { FORWARDED_ANSWER_MAX_BYTES } from '../engine/base/limits.js';

/** Set by the forwarding node: the owner ingests what it receives, whatever it would pick itself. */
export const FORWARDED_BY = 'x-svc-forwarded-by';
/** The node that ingested a session-localized upload. */
export const SERVED_BY = 'X-Svc-Node';

/** The owner's answers are small JSON envelopes; anything longer is not one. */
const MAX_ANSWER_BYTES = FORWARDED_ANSWER_MAX_BYTES;
/** Headers of an owner's answer that the client needs. */
const RELAYED = ['location', 'etag', 'retry-after', 'www-authenticate', 'x-svc-node'];

const localityFailed = (why: string) => new SvcError('unavailable', 'locality_failed', `The owner of this upload session could not complete the stream: ${why}`);

export function forwardUpload(ex: Exchange, body: BodySource, owner: { nodeId: string; address: string }, headers: Record<string, string>, selfId: string, idleTimeoutMs: number): void {
  const [host, port] = splitAddress(owner.address);
  let answered = false;
  const fail = (why: string) => {
    if (answered) return;
    answered = true;
    ex.error(localityFailed(why));
  };
  const request = http.request({ host, port, method: 'POST', path: '/api/v1/blobs', headers: { ...headers, [FORWARDED_BY]: selfId }, agent: false });
  ex.onAbort(() => request.destroy());
  // Idle, not total: a large body streams for as long as it flows. A client that stops sending is
  // dropped by the listener's own idle timeout first (uWS: 10 s), so this one names the owner.
  request.setTimeout(idleTimeoutMs, () => request.destroy(new Error(`no progress for ${idleTimeoutMs / 1000} s`)));
  request.on('error', (err) => fail(`${owner.nodeId} (${owner.address}): ${err.message}`));
  request.on('response', (res) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => {
      text += d;
      if (text.length > MAX_ANSWER_BYTES) res.destroy(new Error('answer too long'));
    });
    res.on('error', (err) => fail(`${owner.nodeId}: ${err.message}`));
    res.on('end', () => {
      if (answered) return;
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        return fail(`${owner.nodeId} answered ${res.statusCode} without a JSON envelope`);
      }
      answered = true;
      const relayed: Record<string, string> = {};
      for (const name of RELAYED) {
        const value = res.headers[name];
        if (typeof value === 'string') relayed[name === 'x-svc-node' ? SERVED_BY : name.replace(/(^|-)([a-z])/g, (_, d: string, c: string) => d + c.toUpperCase())] = value;
      }
      ex.json(res.statusCode ?? 502, json, relayed);
    });
  });
  body.start((chunk, isLast) => {
    // A chunk is valid only during this call: the request keeps a copy until it is written.
    if (chunk.length > 0 && !request.write(Buffer.from(chunk))) {
      body.pause();
      request.once('drain', () => body.resume());
    }
    if (isLast) request.end();
  });
  // A held body waits paused until its reader is ready.
  body.resume();
}

function splitAddress(address: string): [string, number] {
  const at = address.lastIndexOf(':');
  return [address.slice(0, at), Number(address.slice(at + 1))];
}
