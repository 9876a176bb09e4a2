// Idempotency keys (IETF httpapi draft "The Idempotency-Key HTTP Header Field"; decisions §5):
// a creating request sent with a key is done once per tenant, principal and key; a repeat of the
// same request (the caller's fingerprint: method, path, the headers that define the creation,
// the body's digest) gets the first answer again, on any node, for SVC_IDEMPOTENCY_TTL. The keys
// live in the units store (LMDB on fs and s3, PostgreSQL shared by every pg-s3 node).
//
// A request first claims its key, in one write without a unit where it is new (a record `running`
// for IDEMPOTENCY_CLAIM_MS, swept SVC_IDEMPOTENCY_TTL after the claim; on a store no other process
// writes, in this process's memory, with no record until the answer), then creates,
// and its answer is kept (`done`) in the creation's own unit of work when the service offers one
// (`InUnit`), else in a unit just after. So when a commit's outcome is unknown (its reply lost),
// the key is either `done` with the first answer or still the claim, which the request gives back:
// the retry then finds the answer or nothing, and creates once. The answer is opaque here: bytes
// the edge encoded, at most IDEMPOTENCY_ANSWER_MAX_BYTES.

import { randomUUID } from 'node:crypto';
import { SvcError } from '../base/errors.js';
import { type Unit, type UnitStore, table } from '../store/index.js';
import { IDEMPOTENCY_ANSWER_MAX_BYTES, IDEMPOTENCY_CLAIM_MS, IDEMPOTENCY_KEY_MAX_CHARS, IDEMPOTENCY_SWEEP_BATCH, IDEMPOTENCY_SWEEP_UNITS } from '../base/limits.js';

/** Who sent the request: a key names a request only within its tenant and principal ('' when anonymous). */
export interface IdempotencyScope {
  tenant: string;
  principal: string;
}

/** How often expired keys are swept. */
const SWEEP_EVERY_MS = 60_000;

type KeyOf = [string, string, string];

interface KeyRecord {
  /** The request the key was first used for (the edge's digest of it). */
  fingerprint: string;
  /** running: a request holds the key until `claimedUntil`; done: its answer is kept. */
  state: 'running' | 'done';
  /**
   * When the key is swept (its EXPIRY entry's time): set once, by the claim, to the claim's time
   * plus SVC_IDEMPOTENCY_TTL, and kept by the answer, so the creation's unit writes only this record.
   */
  until: number;
  /** A running claim's end (a key claimed by a version before this field: `until`). */
  claimedUntil?: number;
  /** The holder of a running claim (each claim its own). */
  token: string;
  answer?: Uint8Array;
}

const KEYS = table<KeyRecord, KeyOf>('idempotency_keys');
/** Expiry order: [until, tenant, principal, key] → 1, so a sweep reads only what has expired. */
const EXPIRY = table<1, [number, string, string, string]>('idempotency_expiry');

/** A key held by this request: completed with its answer, or given back. */
export interface Claim {
  readonly scope: IdempotencyScope;
  readonly key: string;
  readonly fingerprint: string;
  readonly token: string;
  /** Held in this process only (a store no other process writes): no record until the answer. */
  readonly local?: boolean;
  /** The claim's record as written (a shared store): the creation's unit takes it as known, without a read. */
  readonly record?: KeyRecord;
}

/** What `begin` found: the first answer to replay, or the key now held by this request. */
export type Begun = { replay: Uint8Array } | { claim: Claim };

/** Writes within a creation's unit of work once its result is known (the key's answer). */
export type InUnit<R> = (unit: Unit, result: R) => Promise<void>;

export const idempotencyKeyReused = () =>
  new SvcError('unprocessable', 'idempotency_key_reused', 'This Idempotency-Key was used for another request (method, path, headers or body differ); use a new key for a new request');
export const idempotencyKeyInProgress = () =>
  new SvcError('conflict', 'idempotency_key_in_progress', 'A request with this Idempotency-Key is still running; retry once it has answered', { retryAfterSeconds: 1 });
const claimLost = () =>
  new SvcError('conflict', 'idempotency_key_in_progress', 'This request held its Idempotency-Key too long and another request took it over; retry', { retryAfterSeconds: 1 });

/** The key as the draft's sf-string carries it: 1..255 printable ASCII characters. */
export function checkIdempotencyKey(key: string): string {
  if (key.length < 1 || key.length > IDEMPOTENCY_KEY_MAX_CHARS || !/^[\x20-\x7e]+$/.test(key)) {
    throw new SvcError('invalid', 'invalid_idempotency_key', `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX_CHARS} printable ASCII characters (a structured-field string: "...")`);
  }
  return key;
}

export class IdempotencyKeys {
  /**
   * Running claims, when the store is this process's alone (LMDB: fs, and s3's documents node):
   * a claim no other process can see needs no record, and a crash ends its request with it.
   */
  private readonly running = new Map<string, Claim>();

  constructor(
    private readonly store: UnitStore,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The first answer of this request under `key`, or the key claimed for it; 422 for another request, 409 while the first runs. */
  async begin(scope: IdempotencyScope, key: string, fingerprint: string): Promise<Begun> {
    checkIdempotencyKey(key);
    const at: KeyOf = [scope.tenant, scope.principal, key];
    if (!this.store.shared) return this.beginLocal(scope, key, fingerprint, at);
    // A key not used before (most are): claimed in one write, no unit and no read first.
    const now = this.now();
    const until = now + this.ttlMs;
    const fresh: KeyRecord = { fingerprint, state: 'running', until, claimedUntil: now + IDEMPOTENCY_CLAIM_MS, token: randomUUID() };
    if (await this.store.insertIfAbsent(KEYS, at, fresh, [{ table: EXPIRY, key: [until, ...at], value: 1 }])) {
      return { claim: { scope, key, fingerprint, token: fresh.token, record: fresh } };
    }
    // Taken: the first answer, 422, 409, or an expired key not yet swept, taken over.
    return this.store.run(async (unit) => {
      const now = this.now();
      const found = await unit.get(KEYS, at);
      if (found && live(found, now)) {
        if (found.fingerprint !== fingerprint) throw idempotencyKeyReused();
        if (found.state === 'done') return { replay: found.answer! };
        throw idempotencyKeyInProgress();
      }
      // Absent, or expired (an answer past its TTL, a claim its request left) and not yet swept: this request holds it now.
      const record: KeyRecord = { fingerprint, state: 'running', until: now + this.ttlMs, claimedUntil: now + IDEMPOTENCY_CLAIM_MS, token: randomUUID() };
      this.write(unit, at, found, record);
      return { claim: { scope, key, fingerprint, token: record.token, record } };
    });
  }

  /** `begin` on a store of this process alone: the claim is held in memory, taken before any await. */
  private async beginLocal(scope: IdempotencyScope, key: string, fingerprint: string, at: KeyOf): Promise<Begun> {
    const id = runningId(at);
    const held = this.running.get(id);
    if (held) throw held.fingerprint === fingerprint ? idempotencyKeyInProgress() : idempotencyKeyReused();
    const claim: Claim = { scope, key, fingerprint, token: randomUUID(), local: true };
    this.running.set(id, claim);
    try {
      const found = await this.store.get(KEYS, at);
      if (found && live(found, this.now())) {
        if (found.fingerprint !== fingerprint) throw idempotencyKeyReused();
        if (found.state === 'done') {
          this.running.delete(id);
          return { replay: found.answer! };
        }
        // A running record (written by a version that kept claims as records) stands until it expires.
        throw idempotencyKeyInProgress();
      }
      return { claim };
    } catch (err) {
      this.running.delete(id);
      throw err;
    }
  }

  /**
   * Keeps `answer` under the claimed key, in the caller's unit (the creation's: both commit or
   * neither). The claim must still be this request's (409 if it expired and was taken over).
   */
  async complete(unit: Unit, claim: Claim, answer: Uint8Array): Promise<void> {
    if (answer.byteLength > IDEMPOTENCY_ANSWER_MAX_BYTES) {
      throw new SvcError('internal', 'idempotency_answer_too_large', `The answer is larger than ${IDEMPOTENCY_ANSWER_MAX_BYTES} bytes and cannot be kept`);
    }
    const at: KeyOf = [claim.scope.tenant, claim.scope.principal, claim.key];
    // The claim as this request wrote it, unless it changed since (the unit then runs again and reads it).
    const found = claim.record ? await unit.getKnown(KEYS, at, claim.record) : await unit.get(KEYS, at);
    if (claim.local) {
      // Only this process writes the store, and it held the key since it found no live record.
      if (found && live(found, this.now())) throw claimLost();
      const now = this.now();
      this.write(unit, at, found, { fingerprint: claim.fingerprint, state: 'done', until: now + this.ttlMs, token: claim.token, answer });
      unit.afterCommit(() => this.let(claim));
      return;
    }
    if (!found || found.state !== 'running' || found.token !== claim.token) throw claimLost();
    const done: KeyRecord = { fingerprint: claim.fingerprint, state: 'done', until: found.until, token: claim.token, answer };
    // The claim's sweep time stands (its EXPIRY entry is already written): one record written. A
    // claim of a version before `claimedUntil` ends with its running time: its answer's TTL starts now.
    if (found.claimedUntil !== undefined) unit.put(KEYS, at, done);
    else this.write(unit, at, found, { ...done, until: this.now() + this.ttlMs });
  }

  /** `complete` in a unit of its own: for creations whose store is not the units store (sessions). */
  async completeAlone(claim: Claim, answer: Uint8Array): Promise<void> {
    try {
      await this.store.run((unit) => this.complete(unit, claim, answer));
    } finally {
      this.let(claim);
    }
  }

  /** A local claim's end: its key is free in memory (its answer, if any, is on record). */
  private let(claim: Claim): void {
    if (!claim.local) return;
    const id = runningId([claim.scope.tenant, claim.scope.principal, claim.key]);
    if (this.running.get(id) === claim) this.running.delete(id);
  }

  /**
   * Gives the key back after a request that failed: removed if it is still this request's claim.
   * A creation whose commit landed although its reply was lost left the key `done`: kept.
   */
  async release(claim: Claim): Promise<void> {
    if (claim.local) return this.let(claim);
    const at: KeyOf = [claim.scope.tenant, claim.scope.principal, claim.key];
    await this.store.run(async (unit) => {
      const found = await unit.get(KEYS, at);
      if (!found || found.state !== 'running' || found.token !== claim.token) return;
      unit.remove(KEYS, at);
      unit.remove(EXPIRY, [found.until, ...at]);
    });
  }

  /** Removes expired keys, at most IDEMPOTENCY_SWEEP_BATCH per unit and IDEMPOTENCY_SWEEP_UNITS units; the number removed. */
  async sweep(): Promise<number> {
    let removed = 0;
    for (let i = 0; i < IDEMPOTENCY_SWEEP_UNITS; i++) {
      const now = this.now();
      const gone = await this.store.run(async (unit) => {
        const due = await unit.range(EXPIRY, { end: [now], limit: IDEMPOTENCY_SWEEP_BATCH, precondition: false });
        let n = 0;
        for (const { key: [until, tenant, principal, name] } of due) {
          const at: KeyOf = [tenant, principal, name];
          const found = await unit.get(KEYS, at);
          // Renewed since (a new claim under an expired key): its own expiry entry stands.
          if (found && found.until === until) unit.remove(KEYS, at);
          unit.remove(EXPIRY, [until, tenant, principal, name]);
          n++;
        }
        return n;
      });
      removed += gone;
      if (gone < IDEMPOTENCY_SWEEP_BATCH) break;
    }
    return removed;
  }

  /** Sweeps every SWEEP_EVERY_MS from now on (every node: each sweep is bounded, concurrent ones only retry). */
  start(onError: (err: unknown) => void): void {
    this.timer = setInterval(() => void this.sweep().catch(onError), SWEEP_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private timer?: NodeJS.Timeout;

  /** How many keys are kept (tests, ops). */
  count(): Promise<number> {
    return this.store.count(KEYS);
  }

  /** A record that replaces `before` (none: a new key), with its EXPIRY entry moved to its sweep time. */
  private write(unit: Unit, at: KeyOf, before: KeyRecord | undefined, record: KeyRecord): void {
    if (before && before.until !== record.until) unit.remove(EXPIRY, [before.until, ...at]);
    unit.put(KEYS, at, record);
    unit.put(EXPIRY, [record.until, ...at], 1);
  }
}

/** Whether a key still stands: an answer within its TTL, a claim within its running time. */
function live(record: KeyRecord, now: number): boolean {
  if (record.until <= now) return false;
  return record.state === 'done' || (record.claimedUntil ?? record.until) > now;
}

const runningId = (at: KeyOf): string => JSON.stringify(at);
