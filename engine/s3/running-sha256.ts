// A SHA-256 whose state can be saved and resumed in another process or on another node: the
// whole object's hash of a multipart upload, advanced part by part as the parts become
// contiguous (./part-hashes.ts). node:crypto's Hash cannot export its state (copy() stays in
// the process), so two implementations that can:
// - the native SHA-256 pair (native/sha256-pair.c, SHA extensions; one stream, b = null): its
//   state is a plain 112-byte struct (h[8], length, buffered, buf[64]) the caller owns; about
//   node:crypto's speed;
// - hash-wasm's sha256 with save()/load() where the native one is not built or the CPU lacks
//   SHA extensions (about 330 MB/s on this machine, a fifth of node:crypto's).
// A saved state names its implementation: a node that cannot load it (another build) treats it
// as lost, and the hash is recomputed from the parts' blocks.

import { createSHA256, type IHasher } from 'hash-wasm';
import { loadSha256Pair } from '../cas/index.js';

/** A saved state: which implementation wrote it, and its bytes. */
export interface SavedSha256 {
  impl: string;
  state: Buffer;
}

export interface RunningSha256 {
  update(bytes: Uint8Array): void;
  /** The state now (the hash goes on). */
  save(): SavedSha256;
  /** The digest of the bytes so far, hex (the hash goes on). */
  hex(): string;
}

const NATIVE = 'native-sha256-pair-v1';
const WASM = 'hash-wasm-sha256-v4';

class NativeSha256 implements RunningSha256 {
  private readonly pair = loadSha256Pair()!;
  private readonly state: Uint8Array;

  constructor(saved?: Buffer) {
    // A fresh ArrayBuffer: the addon wants its state 8-byte aligned.
    this.state = new Uint8Array(new ArrayBuffer(this.pair.stateBytes));
    if (saved) this.state.set(saved);
    else this.pair.init(this.state);
  }

  update(bytes: Uint8Array): void {
    this.pair.update(this.state, null, bytes);
  }

  save(): SavedSha256 {
    return { impl: NATIVE, state: Buffer.from(this.state) };
  }

  hex(): string {
    return this.pair.hex(this.state);
  }
}

class WasmSha256 implements RunningSha256 {
  constructor(private readonly hasher: IHasher) {}

  update(bytes: Uint8Array): void {
    this.hasher.update(bytes);
  }

  save(): SavedSha256 {
    return { impl: WASM, state: Buffer.from(this.hasher.save()) };
  }

  hex(): string {
    // digest() ends a hash-wasm hasher: it is taken of a copy.
    const state = this.hasher.save();
    const hex = this.hasher.digest('hex');
    this.hasher.load(state);
    return hex;
  }
}

/** Which implementation this process uses (the native one when it loaded). */
export function runningSha256Impl(): string {
  return loadSha256Pair() ? NATIVE : WASM;
}

/** A fresh hash. */
export async function newRunningSha256(): Promise<RunningSha256> {
  if (loadSha256Pair()) return new NativeSha256();
  const hasher = await createSHA256();
  hasher.init();
  return new WasmSha256(hasher);
}

/** A saved hash resumed (a hash-wasm state anywhere, a native one where it loaded); undefined when this process cannot. */
export async function loadRunningSha256(saved: SavedSha256): Promise<RunningSha256 | undefined> {
  const pair = loadSha256Pair();
  if (saved.impl === NATIVE && pair && saved.state.length === pair.stateBytes) return new NativeSha256(saved.state);
  if (saved.impl !== WASM) return undefined;
  const hasher = await createSHA256();
  try {
    hasher.load(saved.state);
  } catch {
    return undefined;
  }
  return new WasmSha256(hasher);
}
