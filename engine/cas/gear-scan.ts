/**
 * The FastCDC gear-hash scan, the hot loop of chunking, as a tiny hand-assembled WebAssembly
 * function (JavaScript keeps a bounds check on each typed-array load; native-bench compares
 * them), unrolled to four bytes per round: one bounds test and one increment per four bytes.
 * It scans in place bytes that live in its memory (the segment arena of TransferMemory, on the
 * scanning thread), since copying out of a SharedArrayBuffer would cost a large share of the
 * scan; other bytes are first copied into a window of that memory in steps that double from
 * MIN_STEP to MAX_STEP, so a cut found early wastes at most as much copying as was scanned.
 *
 * The function, in WAT (imported shared memory: the gear table at 0, the copy window at WINDOW);
 * STEP(k) tests byte i + k, through the load's constant offset:
 *
 *   STEP(k) = (local.set $h (i32.add (i32.shl (local.get $h) (i32.const 1))
 *                                    (i32.load (i32.shl (i32.load8_u offset=k (local.get $i)) (i32.const 2)))))
 *             (if (i32.eqz (i32.and (local.get $h) (local.get $mask)))
 *               (then (return (i32.add (local.get $i) (i32.const k)))))
 *
 *   (func $scan (param $i i32) (param $to i32) (param $h i32) (param $mask i32) (result i32)
 *     (local $end i32)
 *     (local.set $end (i32.sub (local.get $to) (i32.const 3)))
 *     (block $rounds (loop $round
 *       (br_if $rounds (i32.ge_u (local.get $i) (local.get $end)))
 *       STEP(0) STEP(1) STEP(2) STEP(3)
 *       (local.set $i (i32.add (local.get $i) (i32.const 4)))
 *       (br $round)))
 *     (block $done (loop $next
 *       (br_if $done (i32.ge_u (local.get $i) (local.get $to)))
 *       STEP(0)
 *       (local.set $i (i32.add (local.get $i) (i32.const 1)))
 *       (br $next)))
 *     (global.set $hash (local.get $h))
 *     (i32.const -1))
 */

import { copyInto } from './shared-copy.js';

const WINDOW = 1024;
const MIN_STEP = 4 * 1024;
const MAX_STEP = 64 * 1024;
/** Bytes at the start of a scanner's memory that are its own (gear table and copy window). */
export const ARENA_RESERVED_BYTES = 2 * 65536;

const leb = (n: number): number[] => {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
};
const vec = (items: number[][]): number[] => [...leb(items.length), ...items.flat()];
const section = (id: number, bytes: number[]): number[] => [id, ...leb(bytes.length), ...bytes];
const name = (s: string): number[] => vec([...Buffer.from(s)].map((b) => [b]));

const [I32, GET, SET, TEE] = [0x7f, 0x20, 0x21, 0x22];
/** gear[memory[i + k]] */
const gearAt = (k: number): number[] => [GET, 0, 0x2d, 0, k, 0x41, 2, 0x74, 0x28, 2, 0];
/** if (top of stack & mask) == 0: return i + k */
const cutAt = (k: number): number[] => [GET, 3, 0x71, 0x45, 0x04, 0x40, GET, 0, ...(k ? [0x41, k, 0x6a] : []), 0x0f, 0x0b];
/** One byte's step at address $i + k: h = (h << 1) + gear[memory[i + k]], then the cut test. */
const step = (k: number): number[] => [GET, 2, 0x41, 1, 0x74, ...gearAt(k), 0x6a, TEE, 2, ...cutAt(k)];
const body = [
  1, 1, I32, // local $end (of the unrolled rounds)
  GET, 1, 0x41, 3, 0x6b, SET, 4, // end = to - 3 (to is at least the copy window's address)
  0x02, 0x40, 0x03, 0x40, // block, loop: four bytes per round while i < end
  GET, 0, GET, 4, 0x4f, 0x0d, 1, // br_if out (i >= end)
  ...step(0), ...step(1), ...step(2), ...step(3),
  GET, 0, 0x41, 4, 0x6a, SET, 0, // i += 4
  0x0c, 0, 0x0b, 0x0b, // br loop; end loop; end block
  0x02, 0x40, 0x03, 0x40, // block, loop: the last bytes one at a time
  GET, 0, GET, 1, 0x4f, 0x0d, 1, // br_if out (i >= to)
  ...step(0),
  GET, 0, 0x41, 1, 0x6a, SET, 0, // i++
  0x0c, 0, 0x0b, 0x0b,
  GET, 2, 0x24, 0, // $hash = h
  0x41, 0x7f, // -1
  0x0b,
];
const RESERVED_PAGES = ARENA_RESERVED_BYTES / 65536;
const WASM = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
  ...section(1, vec([[0x60, 4, I32, I32, I32, I32, 1, I32]])),
  // import m.mem: shared memory, at least the reserved pages, at most 4 GiB
  ...section(2, vec([[...name('m'), ...name('mem'), 2, 3, RESERVED_PAGES, ...leb(65536)]])),
  ...section(3, vec([[0]])),
  ...section(6, vec([[I32, 1, 0x41, 0, 0x0b]])),
  ...section(7, vec([[...name('scan'), 0, 0], [...name('hash'), 3, 0]])),
  ...section(10, vec([[...leb(body.length), ...body]])),
]);

interface GearExports {
  scan(from: number, to: number, h: number, mask: number): number;
  hash: WebAssembly.Global;
}

/** A gear scanner over one gear table, in `memory` (the segment arena) or a small memory of its own. */
export class GearScanner {
  /** Gear hash value after the last scan that found no cut. */
  hash = 0;
  private readonly wasm: GearExports;
  private readonly memory: WebAssembly.Memory;
  private readonly window: Uint8Array;

  constructor(gear: Int32Array, memory?: WebAssembly.Memory) {
    this.memory = memory ?? new WebAssembly.Memory({ initial: RESERVED_PAGES, maximum: RESERVED_PAGES, shared: true });
    this.wasm = new WebAssembly.Instance(new WebAssembly.Module(WASM), { m: { mem: this.memory } }).exports as unknown as GearExports;
    new Int32Array(this.memory.buffer, 0, 256).set(gear);
    this.window = new Uint8Array(this.memory.buffer, WINDOW, MAX_STEP);
  }

  /** Index of the first byte in bytes[from, to) after which (hash & mask) is 0, or -1 (then `hash` holds the value at `to`). */
  scan(bytes: Uint8Array, from: number, to: number, h: number, mask: number): number {
    if (bytes.buffer === this.memory.buffer) {
      const base = bytes.byteOffset;
      const i = this.wasm.scan(base + from, base + to, h, mask);
      if (i >= 0) return i - base;
      this.hash = this.wasm.hash.value as number;
      return -1;
    }
    for (let at = from, step = MIN_STEP; at < to; at += step, step = Math.min(2 * step, MAX_STEP)) {
      const n = Math.min(step, to - at);
      copyInto(this.window, 0, bytes.subarray(at, at + n));
      const i = this.wasm.scan(WINDOW, WINDOW + n, h, mask);
      if (i >= 0) return at + i - WINDOW;
      h = this.wasm.hash.value as number;
    }
    this.hash = h;
    return -1;
  }
}
