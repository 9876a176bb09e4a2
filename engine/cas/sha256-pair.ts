import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';

/**
 * SHA-256 of two streams over the same bytes at once (native/sha256-pair.c, x86 SHA extensions):
 * the whole object's hash and its current block's, for about 0.65x the cost of hashing the
 * bytes twice. States are plain byte arrays owned by the caller.
 */
export interface Sha256Pair {
  readonly stateBytes: number;
  init(state: Uint8Array): void;
  /** Hashes `data` into `a` and, unless null, into `b`. */
  update(a: Uint8Array, b: Uint8Array | null, data: Uint8Array): void;
  /** The digest of the bytes so far, in hex; the state goes on. */
  hex(state: Uint8Array): string;
}

interface Addon extends Sha256Pair {
  available: boolean;
}

let loaded: Sha256Pair | null | undefined;
let whyNot = '';

/**
 * The native pair when it was built (npm run build), the CPU has SHA-NI and it agrees with
 * node:crypto on a self-test; null otherwise (`sha256PairUnavailableReason()` says why).
 */
export function loadSha256Pair(): Sha256Pair | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  let addon: Addon;
  try {
    addon = createRequire(import.meta.url)('../../native/sha256-pair.node') as Addon;
  } catch (err) {
    whyNot = `not built (${(err as Error).message.split('\n')[0]})`;
    return null;
  }
  if (!addon.available) {
    whyNot = 'this CPU has no SHA extensions';
    return null;
  }
  const pair: Sha256Pair = { stateBytes: addon.stateBytes, init: addon.init, update: addon.update, hex: addon.hex };
  if (!selfTest(pair)) {
    whyNot = 'its digests differ from node:crypto';
    return null;
  }
  return (loaded = pair);
}

export function sha256PairUnavailableReason(): string {
  loadSha256Pair();
  return whyNot;
}

/** A fresh state (8-byte aligned, as the addon requires). */
export function newState(pair: Sha256Pair): Uint8Array {
  const state = new Uint8Array(new ArrayBuffer(pair.stateBytes));
  pair.init(state);
  return state;
}

/** Both streams, at offsets that do not share a 64-byte alignment, across a few update sizes. */
function selfTest(pair: Sha256Pair): boolean {
  const bytes = new Uint8Array(5000);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + (i >> 7)) & 0xff;
  const a = newState(pair);
  const b = newState(pair);
  pair.update(a, null, bytes.subarray(0, 17));
  for (let at = 17, step = 1; at < bytes.length; at += step, step = step * 3 + 1) pair.update(a, b, bytes.subarray(at, Math.min(bytes.length, at + step)));
  const want = (from: number) => createHash('sha256').update(bytes.subarray(from)).digest('hex');
  return pair.hex(a) === want(0) && pair.hex(b) === want(17);
}
