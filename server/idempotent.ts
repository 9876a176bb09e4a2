// Idempotency-Key at the edge (engine/idempotency owns the rule): a creating route reads the
// header and what identifies its request (method, target, the headers that define the creation,
// the body's SHA-256 taken as it streamed), asks the engine for the first answer or the key, and
// either replays that answer (status, headers, body as first sent) or creates and has its answer
// kept, in the creation's unit of work when the engine offers one (`keep`).

import { createHash } from 'node:crypto';
import { type Claim, type IdempotencyKeys, type IdempotencyScope, type InUnit, checkIdempotencyKey } from '../engine/idempotency/index.js';
import type { Principal } from '../engine/auth/index.js';
import { type Exchange, type Headers, JSON_UTF8, type RequestHead, header } from './exchange.js';

/** A creating route's answer, whole: what is sent, and kept under the request's key. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A JSON answer (headers left undefined are not sent). */
export function jsonAnswer(status: number, value: unknown, headers: Headers = {}): Answer {
  return { status, headers: definedHeaders({ 'Content-Type': JSON_UTF8, ...headers }), body: JSON.stringify(value) };
}

/** An answer without a body (tus creations). */
export function emptyAnswer(status: number, headers: Headers): Answer {
  return { status, headers: definedHeaders(headers), body: '' };
}

function definedHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name] = value;
  return out;
}

/** A request sent with an Idempotency-Key: the key and what identifies the request, read from its head before any await. */
export interface KeyedRequest {
  key: string;
  /** Method, target (path and query) and the values of the headers that define the creation. */
  identity: string[];
}

/**
 * The request's key and identity, or undefined without the header; 400 for a key that is not
 * 1..255 printable ASCII. The draft sends it as a structured-field string (`"abc"`); a bare
 * value is taken as it is.
 */
export function keyedRequest(req: RequestHead, method: string, definingHeaders: readonly string[] = []): KeyedRequest | undefined {
  const raw = header(req, 'idempotency-key');
  if (raw === undefined) return undefined;
  const query = req.getQuery();
  const identity = [method, query ? `${req.getUrl()}?${query}` : req.getUrl(), ...definingHeaders.map((name) => `${name}: ${header(req, name) ?? ''}`)];
  return { key: checkIdempotencyKey(unquote(raw.trim())), identity };
}

/** An sf-string's content (RFC 8941 3.3.3: `\"` and `\\` the only escapes), else the value as it is. */
function unquote(raw: string): string {
  if (!raw.startsWith('"')) return raw;
  if (raw.length < 2 || !raw.endsWith('"')) return '\u0000'; // refused by the check
  const inner = raw.slice(1, -1);
  if (/\\[^"\\]|\\$|(^|[^\\])"/.test(inner)) return '\u0000';
  return inner.replace(/\\(["\\])/g, '$1');
}

/** The scope of a key: the caller's tenant and subject ('' without a token). */
export const scopeOf = (tenant: string, principal: Principal | undefined): IdempotencyScope => ({ tenant, principal: principal?.subject ?? '' });

/** Has the key's answer written in the creation's own unit (`keep(answerOf)` hands the engine its hook; undefined without a key). */
export type Keep = <R>(answerOf: (result: R) => Answer) => InUnit<R> | undefined;

const NO_KEEP: Keep = () => undefined;

/** Runs a digest over a body's chunks as they stream (none is kept). */
export class BodyDigest {
  private readonly hash = createHash('sha256');
  update(chunk: ArrayBuffer | Uint8Array): void {
    this.hash.update(chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk));
  }
  hex(): string {
    return this.hash.digest('hex');
  }
}

/**
 * Answers a creating request once per key: without one, `create` runs and its answer is sent;
 * with one, the first answer is replayed, or `create` runs under the claimed key (409 / 422 from
 * the engine otherwise). A failure gives the key back unless the creation's unit kept it (a commit
 * whose reply was lost but that landed), so the retry finds the first answer or creates once.
 * Only successful answers are kept.
 */
export async function answerOnce(
  ex: Exchange,
  keys: IdempotencyKeys,
  scope: IdempotencyScope,
  keyed: KeyedRequest | undefined,
  bodyDigest: () => Promise<string | undefined>,
  create: (keep: Keep) => Promise<Answer>,
): Promise<void> {
  if (!keyed) return send(ex, await create(NO_KEEP));
  const fingerprint = createHash('sha256').update(JSON.stringify([...keyed.identity, (await bodyDigest()) ?? ''])).digest('hex');
  const begun = await keys.begin(scope, keyed.key, fingerprint);
  if ('replay' in begun) return send(ex, decodeAnswer(begun.replay));
  const claim: Claim = begun.claim;
  let kept = false;
  const keep: Keep = (answerOf) => async (unit, result) => {
    await keys.complete(unit, claim, encodeAnswer(answerOf(result)));
    unit.afterCommit(() => {
      kept = true;
    });
  };
  let answer: Answer;
  try {
    answer = await create(keep);
  } catch (err) {
    if (!kept) await keys.release(claim).catch(() => {});
    throw err;
  }
  // A creation whose store is not the units store: kept just after (a failure here leaves the claim to expire).
  if (!kept) await keys.completeAlone(claim, encodeAnswer(answer)).catch(() => {});
  send(ex, answer);
}

function send(ex: Exchange, answer: Answer): void {
  ex.send(answer.status, answer.headers, answer.status === 204 ? undefined : answer.body);
}

const encodeAnswer = (answer: Answer): Uint8Array => Buffer.from(JSON.stringify([answer.status, answer.headers, answer.body]));

function decodeAnswer(bytes: Uint8Array): Answer {
  const [status, headers, body] = JSON.parse(Buffer.from(bytes).toString('utf8')) as [number, Record<string, string>, string];
  return { status, headers, body };
}
