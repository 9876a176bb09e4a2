import { createRequire } from 'node:module';

/** Copies all of `source` into `target` from byte `at`. */
type CopyInto = (target: Uint8Array, at: number, source: Uint8Array) => void;

/** Below this size a native call costs more than V8's copy saves. */
const NATIVE_FROM_BYTES = 4096;

function viaSet(target: Uint8Array, at: number, source: Uint8Array): void {
  target.set(source, at);
}

function load(): { copy: CopyInto; native: boolean } {
  let addon: { copy: CopyInto };
  try {
    addon = createRequire(import.meta.url)('../../native/shared-copy.node') as { copy: CopyInto };
  } catch {
    return { copy: viaSet, native: false };
  }
  const native = addon.copy;
  return {
    native: true,
    copy: (target, at, source) => (source.length >= NATIVE_FROM_BYTES ? native(target, at, source) : viaSet(target, at, source)),
  };
}

const loaded = load();

/**
 * Copies into or out of shared segments: memcpy from native/shared-copy.c when it was built (V8
 * copies shared memory with relaxed word moves, several times slower in the upload path), else
 * TypedArray.set.
 */
export const copyInto: CopyInto = loaded.copy;

/** Whether copies go through the native addon. */
export const nativeSharedCopy: boolean = loaded.native;
