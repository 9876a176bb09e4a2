// One part of a resumable session over HTTP, for both protocols that write sessions: the
// contract's PATCH /api/v1/uploads/{id} and tus's PATCH /files/{id} (and a tus creation that
// carries bytes). The body is held from its first byte while the session's lease is taken (the
// catalog may be another process's), streamed into the session's ingest, and acknowledged once
// the part and the offset are durable; a part refused before its body is read answers once the
// body is dropped, so the client, still sending, reads the answer.

import type { Principal } from '../engine/auth/index.js';
import type { Engine } from '../engine/engine.js';
import { type SvcError, invalidUpload } from '../engine/base/errors.js';
import { DEFAULT_TENANT, type SessionRecord } from '../engine/store/index.js';
import type { AdmittedPart, PartRequest } from '../engine/uploads/index.js';
import { type BodySource, HeldBody, SocketBody } from './body-sources.js';
import { feedIngest } from './body-feed.js';
import { type Exchange, type RequestHead, header } from './exchange.js';
import { UUID } from './request-parsing.js';
import { forbidden } from './router.js';

/** A check of the part's bytes as they pass (tus Upload-Checksum): `failure` after the last one, or undefined when they are right. */
export interface BodyCheck {
  update(chunk: Uint8Array): void;
  failure(): SvcError | undefined;
}

interface PartHandlers {
  /** The caller, with security on: the engine applies its tenant's limits and its byte budget (Uploads.admitPart). */
  principal?: Principal;
  /** The part is durable (or was already applied): the answer. */
  answer(record: SessionRecord): void | Promise<void>;
  check?: BodyCheck;
}

/**
 * Receives one part: `parse` reads the request (throwing answers it once the body is dropped),
 * then the part streams into the session and `answer` runs with the session's new record. `held`:
 * the body, taken from its first byte by a handler that awaited something before.
 */
export function receivePart(ex: Exchange, engine: Engine, declared: string | undefined, parse: () => PartRequest, h: PartHandlers, held?: HeldBody): void {
  const maxPart = engine.config.uploads.maxPartBytes;
  let request: PartRequest;
  let admitted: AdmittedPart | Promise<AdmittedPart>;
  try {
    request = parse();
    // The tenant gate, before any byte is read: the object limit and the byte budget now (answered
    // once the body is dropped), the room the quota leaves later (refused by what the part declares: answered at once).
    admitted = engine.uploads.admitPart(request, h.principal);
  } catch (err) {
    afterBody(ex, held ?? new SocketBody(ex), declared, maxPart, () => ex.error(err, 'ingest_failed'));
    return;
  }
  const body = held ?? new HeldBody(ex.body);
  const answer = (record: SessionRecord) => {
    try {
      const pending = h.answer(record);
      if (pending) pending.catch((err: unknown) => ex.error(err, 'ingest_failed'));
    } catch (err) {
      ex.error(err, 'ingest_failed');
    }
  };
  const begin = (part: AdmittedPart) => {
    engine.uploads.beginPart(part).then(
      (started) => {
        if ('replayed' in started) return afterBody(ex, body, declared, request.maxPartBytes ?? maxPart, () => answer(started.replayed));
        const upload = started.part;
        // The client went away while the lease was taken: give the session back.
        if (!ex.live) return upload.abort();
        const check = h.check;
        feedIngest(ex, body, upload.ingest, engine.stats, {
          chunk: check && ((chunk) => check.update(chunk)),
          last: () => {
            // A part whose bytes are not what the client said is not kept: the session stays as it was.
            const failure = check?.failure();
            if (failure) return void upload.release().then(() => ex.error(failure));
            upload.finish().then(answer, (err) => ex.error(err, 'ingest_failed'));
          },
          fail: (err) => void upload.release().then(() => ex.error(err, 'ingest_failed')),
          abort: () => upload.abort(),
        }, upload.ready);
      },
      (err: unknown) => afterBody(ex, body, declared, request.maxPartBytes ?? maxPart, () => ex.error(err, 'ingest_failed')),
    );
  };
  if (!(admitted instanceof Promise)) return begin(admitted);
  // The exchange settles the socket when the answer comes before the body.
  admitted.then(begin, (err: unknown) => ex.error(err, 'ingest_failed'));
}

/**
 * Answers a part that will not be used once its body is read and dropped, so the client, still
 * sending, gets the answer and the connection stays usable. A body larger than a part may be,
 * or of unknown length, is not waited for: the answer is early (the exchange lingers, then closes).
 */
function afterBody(ex: Exchange, body: BodySource, declared: string | undefined, maxPart: number, answer: () => void): void {
  if (!ex.live) return;
  const length = declared !== undefined && /^[0-9]{1,16}$/.test(declared) ? Number(declared) : undefined;
  if (length === undefined || length === 0 || length > maxPart) {
    // A held body's socket was paused: it reads (and drops) what comes while the exchange lingers.
    body.resume();
    return answer();
  }
  body.start((_chunk, isLast) => {
    if (isLast) answer();
  });
  body.resume();
}

export function sessionId(raw: string | undefined, name = 'The upload session id'): string {
  if (raw === undefined) throw invalidUpload(`${name} is required`);
  if (!UUID.test(raw)) throw invalidUpload(`${name} must be a canonical lowercase UUID`);
  return raw;
}

/** The session's tenant: the token's org_id with security on (a different X-Svc-Tenant-Id is 403), else the header's or the default. */
export function tenantOf(req: RequestHead, principal: Principal | undefined): string {
  const raw = header(req, 'x-svc-tenant-id');
  if (principal) {
    if (raw !== undefined && raw !== principal.tenant) throw forbidden('X-Svc-Tenant-Id is not the token\'s org_id');
    return principal.tenant;
  }
  if (raw === undefined) return DEFAULT_TENANT;
  if (!UUID.test(raw)) throw invalidUpload('X-Svc-Tenant-Id must be a canonical lowercase UUID');
  return raw;
}

/** A decimal byte count (digits only, at most 2^53 - 1). */
export function byteCount(raw: string | undefined, name: string, required: boolean): number {
  if (raw === undefined) {
    if (required) throw invalidUpload(`${name} is required`);
    return NaN;
  }
  if (!/^[0-9]{1,16}$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw invalidUpload(`${name} must be a decimal byte count`);
  return Number(raw);
}
