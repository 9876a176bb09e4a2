import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { copyInto, nativeSharedCopy } from '../dist/engine/cas/shared-copy.js';

const addonPath = new URL('../dist/native/shared-copy.node', import.meta.url);
const built = fs.existsSync(addonPath);
const addon = built ? (createRequire(import.meta.url)(addonPath.pathname) as { copy: (t: Uint8Array, at: number, s: Uint8Array) => void }) : null;

/** A view of `length` bytes of shared memory, `offset` bytes into it (as segments are carved from the arena). */
function sharedView(length: number, offset: number): Uint8Array {
  return new Uint8Array(new WebAssembly.Memory({ initial: Math.ceil((length + offset) / 65536) + 1, maximum: 256, shared: true }).buffer, offset, length);
}

describe('copies into and out of shared memory', () => {
  it('go through the native addon wherever the build made it', () => {
    // A build that cannot be loaded must not pass unnoticed as the slower fallback.
    expect(nativeSharedCopy).toBe(built);
  });

  it('copy every byte to its place, into and out of shared memory, above and below the native size', () => {
    const source = randomBytes(300_000);
    for (const size of [1, 100, 4095, 4096, 4097, 65_536, 200_001]) {
      for (const at of [0, 3, 1000]) {
        const shared = sharedView(size + at + 50, 7);
        shared.fill(0xaa);
        const piece = source.subarray(11, 11 + size);
        copyInto(shared, at, piece);
        expect(Buffer.from(shared.subarray(at, at + size)).equals(piece)).toBe(true);
        // Bytes around the copy are untouched.
        expect(shared.subarray(0, at).every((b) => b === 0xaa)).toBe(true);
        expect(shared.subarray(at + size).every((b) => b === 0xaa)).toBe(true);
        const back = Buffer.alloc(size + 9, 0x55);
        copyInto(back, 9, shared.subarray(at, at + size));
        expect(back.subarray(9).equals(piece)).toBe(true);
        expect(back.subarray(0, 9).every((b) => b === 0x55)).toBe(true);
      }
    }
  });

  it.skipIf(!addon)('native copy refuses what does not fit or is not a Uint8Array, and handles overlap', () => {
    const copy = addon!.copy;
    const target = new Uint8Array(10_000);
    expect(() => copy(target, 5001, new Uint8Array(5000))).toThrow(RangeError);
    expect(() => copy(target, 10_001, new Uint8Array(0))).toThrow(RangeError);
    expect(() => copy(target, -1, new Uint8Array(1))).toThrow(TypeError);
    expect(() => copy(target, 1.5, new Uint8Array(1))).toThrow(TypeError);
    expect(() => copy(new Uint16Array(10) as unknown as Uint8Array, 0, new Uint8Array(1))).toThrow(TypeError);
    expect(() => (copy as unknown as (a: Uint8Array) => void)(target)).toThrow(TypeError);
    copy(target, 10_000, new Uint8Array(0));
    // Overlapping views of one buffer: memmove semantics.
    const bytes = Uint8Array.from({ length: 20_000 }, (_, i) => i % 251);
    const expected = Buffer.from(bytes);
    expected.copy(expected, 100, 0, 15_000);
    copy(bytes, 100, bytes.subarray(0, 15_000));
    expect(Buffer.from(bytes).equals(expected)).toBe(true);
  });
});
