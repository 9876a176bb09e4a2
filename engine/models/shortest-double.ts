// V8's text for a positive double (not an integer) between 1e-5 and 1e6, written
// as ASCII bytes without V8's formatter (~120 ns a number, the largest cost of a transform
// answer). The shortest digits that read back as x are found with exact arithmetic on doubles:
//
// - 15 digits or fewer: s = round(x * 10^p) and s / 10^p === x is an exact test (both operands
//   exact, one IEEE rounding, as parsing does); fewer digits show as trailing zeros of s.
// - 16 or 17 digits: x * 10^p is formed exactly as a double-double (Dekker's product; 10^p is
//   exact for p <= 22). The nearest 16-digit integer N reads back as x exactly when
//   |x * 10^p - N| < ulp(x) / 2 * 10^p, a product that is exact too; V8 then prints N's digits,
//   else the nearest 17-digit integer's (17 digits always read back).
//
// Whatever is not clear-cut (a tie, a power of two whose rounding interval is lopsided, a
// margin within rounding noise, a magnitude outside the range) returns -1: the caller asks V8.

/** 10^0 .. 10^22, exact (parsed from decimal literals: correctly rounded, and exact up to 10^22). */
const POW10 = Array.from({ length: 23 }, (_, i) => Number(`1e${i}`));
const SPLITTER = 134217729; // 2^27 + 1 (Veltkamp)
/** 10^-5 .. 10^6 as the doubles nearest to them (a literal is the nearest double). */
const EXACT_POW10 = [1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1e3, 1e4, 1e5, 1e6];
const BITS = new Float64Array(1);
const WORDS = new Int32Array(BITS.buffer);
const HALF_ULP = new Float64Array(1);
const HALF_ULP_WORDS = new Int32Array(HALF_ULP.buffer);
const ZERO = 0x30;
const DOT = 0x2e;

/** The rounding error of a * b (a * b + error is the exact product), Dekker's algorithm. */
function productError(a: number, b: number, product: number): number {
  let c = SPLITTER * a;
  const ah = c - (c - a);
  const al = a - ah;
  c = SPLITTER * b;
  const bh = c - (c - b);
  const bl = b - bh;
  return ah * bh - product + ah * bl + al * bh + al * bl;
}

/**
 * Writes x (1e-5 <= x < 1e6, not an integer) as V8 prints it into `out` at `at`; returns the
 * position after it, or -1 when the caller must use V8's formatter. `out` needs 24 bytes of room.
 */
export function writeShortestDouble(x: number, out: Uint8Array, at: number): number {
  if (!(x >= 1e-5 && x < 1e6)) return -1;
  let e10 = -5;
  while (e10 < 5 && x >= EXACT_POW10[e10 + 6]!) e10++;
  // Up to 15 significant digits.
  const p15 = 14 - e10;
  const s15 = Math.round(x * POW10[p15]!);
  if (s15 / POW10[p15]! === x) {
    if (s15 >= 1e15 || s15 < 1e14) return -1;
    const upper = Math.floor(s15 / 1e8);
    return digits(upper, s15 - upper * 1e8, 15, e10, out, at);
  }
  BITS[0] = x;
  const high = WORDS[1]!;
  // A power of two has a narrower interval below it than above: not handled here.
  if ((high & 0xfffff) === 0 && WORDS[0] === 0) return -1;
  // ulp(x) / 2 = 2^(exponent - 1076): a double with that biased exponent and no mantissa.
  HALF_ULP_WORDS[1] = (((high >>> 20) & 0x7ff) - 53) << 20;
  const halfUlp = HALF_ULP[0]!;
  // 16 significant digits: the nearest 16-digit integer to x * 10^p16, and its distance.
  const p16 = 15 - e10;
  const scale16 = POW10[p16]!;
  const hi16 = x * scale16;
  const lo16 = productError(x, scale16, hi16);
  const floor16 = Math.floor(hi16);
  const frac16 = hi16 - floor16 + lo16;
  const round16 = Math.round(frac16);
  const distance16 = Math.abs(frac16 - round16);
  if (distance16 === 0.5) return -1;
  const limit16 = halfUlp * scale16;
  // The sum above rounds once (~1e-16 of the margin); a margin closer than that is left to V8.
  if (Math.abs(distance16 - limit16) <= limit16 * 1e-9) return -1;
  if (distance16 < limit16) return split(floor16, round16, 16, e10, out, at);
  // 17 significant digits: the nearest 17-digit integer (x * 10^p17 >= 2^53: hi17 is whole).
  const p17 = 16 - e10;
  const scale17 = POW10[p17]!;
  const hi17 = x * scale17;
  const lo17 = productError(x, scale17, hi17);
  const round17 = Math.round(lo17);
  if (Math.abs(lo17 - round17) === 0.5) return -1;
  return split(hi17, round17, 17, e10, out, at);
}

/** Writes the n-digit integer whole + extra (whole may exceed 2^53) as a decimal with exponent e10. */
function split(whole: number, extra: number, n: number, e10: number, out: Uint8Array, at: number): number {
  let upper = Math.floor(whole / 1e8);
  let lower = whole - upper * 1e8 + extra;
  while (lower < 0) {
    lower += 1e8;
    upper--;
  }
  while (lower >= 1e8) {
    lower -= 1e8;
    upper++;
  }
  const limit = 10 ** (n - 8);
  if (upper < limit / 10 || upper >= limit) return -1;
  return digits(upper, lower, n, e10, out, at);
}

/** Writes the n-digit integer upper * 10^8 + lower (lower < 10^8) as a decimal whose first digit has exponent e10, without trailing zeros. */
function digits(upper: number, lower: number, n: number, e10: number, out: Uint8Array, at: number): number {
  const buffer = DIGITS;
  // Both halves fit in 32 bits: upper < 10^9, lower < 10^8.
  for (let i = n - 1; i >= n - 8; i--) {
    const q = (lower / 10) | 0;
    buffer[i] = lower - q * 10;
    lower = q;
  }
  for (let i = n - 9; i >= 0; i--) {
    const q = (upper / 10) | 0;
    buffer[i] = upper - q * 10;
    upper = q;
  }
  let count = n;
  while (count > 1 && buffer[count - 1] === 0) count--;
  if (e10 < 0) {
    out[at++] = ZERO;
    out[at++] = DOT;
    for (let i = -1; i > e10; i--) out[at++] = ZERO;
    for (let i = 0; i < count; i++) out[at++] = ZERO + buffer[i]!;
    return at;
  }
  for (let i = 0; i < count || i <= e10; i++) {
    if (i === e10 + 1) out[at++] = DOT;
    out[at++] = ZERO + (i < count ? buffer[i]! : 0);
  }
  return at;
}

const DIGITS = new Uint8Array(17);
