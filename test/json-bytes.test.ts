// The transform answer's JSON writer must write exactly what JSON.stringify writes for the same
// cells (numbers as V8 prints them), so every mode and part size gives byte-identical answers.
import { describe, expect, it } from 'vitest';
import { JsonBytes } from '../dist/engine/models/json-bytes.js';
import { writeShortestDouble } from '../dist/engine/models/shortest-double.js';
import { RowWriter } from '../dist/engine/models/row-writer.js';
import { encodeRow } from '../dist/engine/models/frame-json.js';

function written(fill: (w: InstanceType<typeof JsonBytes>) => void, capacity?: number): string {
  const w = new JsonBytes(capacity);
  fill(w);
  return Buffer.from(w.buffer, 0, w.length).toString('utf8');
}

/** A deterministic generator (xorshift) so a failure names a reproducible value. */
function generator(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

describe('JSON bytes of numbers', () => {
  const special = [
    0, -0, 1, -1, 9, 10, -10, 0.1, 0.2, 0.3, 0.1 + 0.2, 1 / 3, -2 / 3, 0.5, 1.5, 2.25, 100.01, 1e-6, 1.5e-6, 9.99e-7, 1e-7,
    123456.789, 999999.999999, 0.000001, 0.0000015, 123456789.123456, 999999999.999999, 1e9, 1e9 + 0.5, 1e15, 1e15 + 1,
    2 ** 31, -(2 ** 31), 2 ** 31 - 1, 2 ** 32, 2 ** 53, 2 ** 53 + 2, -(2 ** 53), 1e20, 1e21, 1.7976931348623157e308,
    5e-324, -5e-324, 2.2250738585072014e-308, Number.EPSILON, 4.35, 0.07, 1.005, 8.675309, 251.81671700585053,
    NaN, Infinity, -Infinity,
  ];

  it('writes the special values as JSON.stringify does', () => {
    for (const x of special) expect(written((w) => w.number(x)), String(x)).toBe(JSON.stringify(x));
  });

  it('writes 200,000 generated doubles of every magnitude and precision as JSON.stringify does', () => {
    const next = generator(7);
    const bad: string[] = [];
    for (let i = 0; i < 200_000; i++) {
      const kind = i % 5;
      const magnitude = 10 ** Math.floor(next() * 30 - 12);
      let x: number;
      if (kind === 0) x = next() * magnitude;
      else if (kind === 1) x = Math.round(next() * 1e6) / 10 ** Math.floor(next() * 8);
      else if (kind === 2) x = Math.round(next() * magnitude);
      else if (kind === 3) x = Number((next() * magnitude).toPrecision(1 + Math.floor(next() * 17)));
      else x = new Float64Array(new Uint32Array([next() * 2 ** 32, next() * 2 ** 32]).buffer)[0]!;
      if (next() < 0.5) x = -x;
      const got = written((w) => w.number(x));
      if (got !== JSON.stringify(x)) bad.push(`${JSON.stringify(x)} written as ${got}`);
    }
    expect(bad.slice(0, 10)).toEqual([]);
  });

  it('finds the shortest digits of 300,000 full-precision doubles from 1e-5 to 1e6 as V8 does, leaving almost none to V8', () => {
    const next = generator(11);
    const out = new Uint8Array(32);
    const words = new Uint32Array(2);
    const asDouble = new Float64Array(words.buffer);
    const bad: string[] = [];
    let written = 0;
    let left = 0;
    for (let i = 0; i < 300_000; i++) {
      let x: number;
      if (i % 3 === 0) x = next() * 10 ** Math.floor(next() * 11 - 5);
      else if (i % 3 === 1) x = Number((next() * 10 ** Math.floor(next() * 11 - 5)).toPrecision(15 + (i % 3)));
      else {
        // Random mantissa bits with an exponent inside the range.
        words[0] = next() * 2 ** 32;
        words[1] = 0x3ee00000 + Math.floor(next() * (0x412e8480 - 0x3ee00000));
        x = asDouble[0]!;
      }
      if (!(x >= 1e-5 && x < 1e6) || Number.isInteger(x)) continue;
      const end = writeShortestDouble(x, out, 0);
      if (end < 0) {
        left++;
        continue;
      }
      written++;
      const text = Buffer.from(out.subarray(0, end)).toString('latin1');
      if (text !== String(x)) bad.push(`${String(x)} written as ${text}`);
    }
    expect(bad.slice(0, 10)).toEqual([]);
    expect(written).toBeGreaterThan(250_000);
    expect(left).toBeLessThan(written / 1000);
    // Out of its range it leaves the number to V8.
    expect(writeShortestDouble(1e7 + 0.5, out, 0)).toBe(-1);
    expect(writeShortestDouble(5.123456789012345e-6, out, 0)).toBe(-1);
  });

  it('gives a repeated value the same text from its cache of recent values', () => {
    const x = 4.885531529182592;
    expect(written((w) => [x, 1, x, -x, x].forEach((v, i) => (i ? (w.byte(0x2c), w.number(v)) : w.number(v))))).toBe('4.885531529182592,1,4.885531529182592,-4.885531529182592,4.885531529182592');
  });
});

describe('JSON bytes of strings and rows', () => {
  it('writes strings with JSON escapes and UTF-8', () => {
    for (const s of ['', 'NY', 'Entire home/apt', 'a"b', 'back\\slash', 'tab\there', 'line\nbreak', '\u0000\u001f', 'é', '日本語', '😀 emoji', '\u2028\u2029', 'mixed "é" \n ok']) {
      expect(written((w) => w.string(s), 4)).toBe(JSON.stringify(s));
    }
  });

  it('writes rows of scalars, lists and tensors as JSON.stringify of their encoded form', () => {
    const rows = [
      [1, 2.5, 'x', true, false, ['a', 'b'], [1.25, -3], { kind: 'dense', dims: [3], values: [0.1, 2, NaN] }],
      [-0, 1e21, 'é"', false, [], [], { kind: 'sparse', dims: [2, 3], indices: [1, 5], values: [7.5, -1] }],
      [3, 0.000001, '', true, ['z'], [Infinity], { kind: 'sparse', dims: [4], indices: [], values: [] }],
    ];
    const expected = rows.map((r) => JSON.stringify(encodeRow(r as never))).join(',');
    for (const keepEnds of [false, true]) {
      const writer = new RowWriter(keepEnds, rows.length);
      for (const r of rows) writer.write(r as never, undefined);
      const out = writer.finish();
      const text = Buffer.from(out.bytes, 0, out.length).toString('utf8');
      if (!keepEnds) expect(text).toBe(expected);
      else {
        const ends = Array.from(out.ends!);
        const bytes = Buffer.from(out.bytes, 0, out.length);
        const pieces = ends.map((end, i) => bytes.subarray(i ? ends[i - 1] : 0, end).toString('utf8'));
        expect(pieces).toEqual(rows.map((r) => JSON.stringify(encodeRow(r as never))));
      }
    }
  });

  it('writes only the selected columns, in the order asked', () => {
    const writer = new RowWriter(false, 2);
    writer.write([1, 'a', 2.5] as never, [2, 0]);
    writer.write([3, 'b', 4.5] as never, [2, 0]);
    const out = writer.finish();
    expect(Buffer.from(out.bytes, 0, out.length).toString()).toBe('[2.5,1],[4.5,3]');
  });
});
