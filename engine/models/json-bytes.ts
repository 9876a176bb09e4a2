// Frame values written as JSON straight into UTF-8 bytes in a SharedArrayBuffer, the same text
// JSON.stringify gives (numbers as V8 prints them, non-finite numbers as null, tensors in their
// MLeap object form). Building strings and arrays for JSON.stringify was half of a transform's
// time and most of its garbage; here a row costs no allocation except for the rare number or
// string that needs V8's own formatting.

import { coordinates } from './frame-json.js';
import { writeShortestDouble } from './shortest-double.js';
import type { Tensor, Value } from './types.js';

const QUOTE = 0x22;
const COMMA = 0x2c;
const OPEN_LIST = 0x5b;
const CLOSE_LIST = 0x5d;
const ZERO = 0x30;
const MINUS = 0x2d;
const DOT = 0x2e;
const DIMENSIONS = ascii('{"dimensions":[');
const VALUES = ascii('],"values":[');
const INDICES = ascii('],"indices":[');
const CLOSE_TENSOR = ascii(']}');
const NULL = ascii('null');
const TRUE = ascii('true');
const FALSE = ascii('false');
/** Most bytes one number takes (V8's longest form is 24 characters, e.g. -1.2345678901234567e-300). */
const NUMBER_ROOM = 32;
/** Decimal places of the exact short form tried before V8 formats a number. */
const SHORT_DECIMALS = 6;

const RECENT = 64;
const recentValue = new Float64Array(RECENT).fill(NaN);
const recentLength = new Uint8Array(RECENT);
/** Each slot's text, NUMBER_ROOM bytes apart. */
const recentBytes = new Uint8Array(RECENT * NUMBER_ROOM);
const BITS = new Float64Array(1);
const WORDS = new Int32Array(BITS.buffer);

function ascii(text: string): Uint8Array {
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

export class JsonBytes {
  private memory: SharedArrayBuffer;
  private bytes: Uint8Array;
  private text: Buffer;
  /** Bytes written so far. */
  length = 0;
  private readonly digits = new Uint8Array(24);

  constructor(capacity = 64 * 1024) {
    this.memory = new SharedArrayBuffer(capacity);
    this.bytes = new Uint8Array(this.memory);
    this.text = Buffer.from(this.memory);
  }

  /** The buffer written so far (valid bytes: [0, length)); the writer must not be used after. */
  get buffer(): SharedArrayBuffer {
    return this.memory;
  }

  value(v: Value): void {
    switch (typeof v) {
      case 'number':
        return this.number(v);
      case 'string':
        return this.string(v);
      case 'boolean':
        return this.raw(v ? TRUE : FALSE);
    }
    if (Array.isArray(v)) {
      this.byte(OPEN_LIST);
      for (let i = 0; i < v.length; i++) {
        if (i) this.byte(COMMA);
        this.value(v[i]!);
      }
      this.byte(CLOSE_LIST);
    } else this.tensor(v);
  }

  byte(b: number): void {
    if (this.length === this.bytes.length) this.grow(1);
    this.bytes[this.length++] = b;
  }

  /** A number exactly as JSON.stringify writes it. */
  number(x: number): void {
    if (this.length + NUMBER_ROOM > this.bytes.length) this.grow(NUMBER_ROOM);
    if (x === (x | 0)) return this.integer(x);
    if (x !== x || x === Infinity || x === -Infinity) return this.raw(NULL);
    const a = x < 0 ? -x : x;
    if (a < 9007199254740992 && Number.isInteger(a)) {
      if (x < 0) this.bytes[this.length++] = MINUS;
      return this.largeInteger(a);
    }
    // V8 prints the shortest digits that read back as x, in plain notation from 1e-6 to 1e21.
    // If x has such digits with at most six decimals, x * 1e6 rounds to them scaled to six
    // decimals (below 1e15 the product is within 1/8 of an integer), and s / 1e6 === x checks
    // it exactly: both operands are exact and IEEE division rounds once, as parsing does. The
    // digits are then s's without its trailing zeros (at most 15 significant digits are never
    // ambiguous, so they are V8's shortest digits too).
    if (a >= 1e-6 && a < 1e9) {
      const s = Math.round(a * 1e6);
      if (s / 1e6 === a) {
        if (x < 0) this.bytes[this.length++] = MINUS;
        // Both halves fit in 32 bits: integer arithmetic from here.
        const whole = Math.floor(s / 1e6);
        return this.fraction(whole, s - whole * 1e6);
      }
    }
    if (x < 0) this.bytes[this.length++] = MINUS;
    this.formatted(a);
  }

  /**
   * The shortest text of a positive double with more than six decimals, as V8 writes it, from a
   * small cache of recent values (pipelines often write a computed double twice in a row: a
   * scaled feature, then the assembled vector holding it), else by writeShortestDouble (~90 ns)
   * and, for what that leaves open, by V8 itself (~130 ns).
   */
  private formatted(a: number): void {
    BITS[0] = a;
    const slot = (WORDS[0]! ^ WORDS[1]!) & (RECENT - 1);
    const bytes = this.bytes;
    const start = this.length;
    const cached = slot * NUMBER_ROOM;
    if (recentValue[slot] === a) {
      const n = recentLength[slot]!;
      for (let i = 0; i < n; i++) bytes[start + i] = recentBytes[cached + i]!;
      this.length = start + n;
      return;
    }
    let end = writeShortestDouble(a, bytes, start);
    if (end < 0) {
      const text = String(a);
      end = start;
      for (let i = 0; i < text.length; i++) bytes[end++] = text.charCodeAt(i);
    }
    recentValue[slot] = a;
    recentLength[slot] = end - start;
    for (let i = start; i < end; i++) recentBytes[cached + i - start] = bytes[i]!;
    this.length = end;
  }

  /** A string with JSON escapes; printable ASCII is copied as is. */
  string(s: string): void {
    const most = s.length * 6 + 2;
    if (this.length + most > this.bytes.length) this.grow(most);
    const start = this.length;
    const bytes = this.bytes;
    let at = start;
    bytes[at++] = QUOTE;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x20 || c > 0x7e || c === QUOTE || c === 0x5c) {
        this.length = start + this.text.write(JSON.stringify(s), start, 'utf8');
        return;
      }
      bytes[at++] = c;
    }
    bytes[at++] = QUOTE;
    this.length = at;
  }

  private tensor(t: Tensor): void {
    this.raw(DIMENSIONS);
    this.numbers(t.dims);
    if (t.kind === 'sparse') {
      this.raw(INDICES);
      for (let i = 0; i < t.indices.length; i++) {
        if (i) this.byte(COMMA);
        this.byte(OPEN_LIST);
        this.numbers(coordinates(t.indices[i]!, t.dims));
        this.byte(CLOSE_LIST);
      }
    }
    this.raw(VALUES);
    this.numbers(t.values);
    this.raw(CLOSE_TENSOR);
  }

  private numbers(values: number[]): void {
    for (let i = 0; i < values.length; i++) {
      if (i) this.byte(COMMA);
      this.number(values[i]!);
    }
  }

  private raw(text: Uint8Array): void {
    if (this.length + text.length > this.bytes.length) this.grow(text.length);
    // A loop: TypedArray.set costs more than these few bytes.
    const bytes = this.bytes;
    let at = this.length;
    for (let i = 0; i < text.length; i++) bytes[at++] = text[i]!;
    this.length = at;
  }

  /** A 32-bit integer. */
  private integer(x: number): void {
    if (x >= 0 && x < 10) {
      this.bytes[this.length++] = ZERO + x;
      return;
    }
    if (x < 0) {
      this.bytes[this.length++] = MINUS;
      if (x === -2147483648) return this.largeInteger(2147483648);
      x = -x;
    }
    this.unsigned(x);
  }

  /** 0 <= n < 2^31. */
  private unsigned(n: number): void {
    let width = 1;
    for (let m = n; m >= 10; m = (m / 10) | 0) width++;
    this.fixedDigits(n, width);
  }

  /** `whole`.`millionths` (0 < millionths < 10^6), without trailing zeros. */
  private fraction(whole: number, millionths: number): void {
    this.unsigned(whole);
    this.bytes[this.length++] = DOT;
    let width = SHORT_DECIMALS;
    while (millionths % 10 === 0) {
      millionths = (millionths / 10) | 0;
      width--;
    }
    this.fixedDigits(millionths, width);
  }

  /** 0 <= n < 2^31 as exactly `width` digits (leading zeros included). */
  private fixedDigits(n: number, width: number): void {
    const bytes = this.bytes;
    const end = this.length + width;
    for (let at = end - 1; at >= this.length; at--) {
      const q = (n / 10) | 0;
      bytes[at] = ZERO + n - q * 10;
      n = q;
    }
    this.length = end;
  }

  /** A non-negative integer below 2^53 (beyond 32-bit arithmetic). */
  private largeInteger(s: number): void {
    const digits = this.digits;
    let n = 0;
    do {
      const q = Math.floor(s / 10);
      digits[n++] = s - q * 10;
      s = q;
    } while (s > 0);
    const bytes = this.bytes;
    let at = this.length;
    while (n > 0) bytes[at++] = ZERO + digits[--n]!;
    this.length = at;
  }

  /** Makes room for `total` bytes in all, at once (cheaper than doubling up to it). */
  reserve(total: number): void {
    if (total > this.bytes.length) this.grow(total - this.length, total);
  }

  private grow(need: number, exactly?: number): void {
    const memory = new SharedArrayBuffer(exactly ?? Math.max(this.bytes.length * 2, this.length + need));
    const bytes = new Uint8Array(memory);
    bytes.set(this.bytes.subarray(0, this.length));
    this.memory = memory;
    this.bytes = bytes;
    this.text = Buffer.from(memory);
  }
}
