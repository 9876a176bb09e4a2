import { describe, expect, it } from 'vitest';
import { type ChunkerSpec, chunkerName, findCut, freshScanState } from '../dist/engine/cas/chunkers.js';
import { SegmentedBytes } from '../dist/engine/cas/segmented-bytes.js';
import { seededBytes } from './helpers/http.js';
import { syntheticPdf } from './helpers/pdf.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const FASTCDC: ChunkerSpec = { kind: 'fastcdc', min: 256 * KiB, avg: 1 * MiB, max: 4 * MiB };
const PDF: ChunkerSpec = { kind: 'pdf', target: 1 * MiB, max: 4 * MiB, fallback: { kind: 'fastcdc', min: 256 * KiB, avg: 1 * MiB, max: 4 * MiB } };

/** Cuts `data` the way an upload does: arriving `step` bytes at a time in segments of `segment`. */
function cutAll(spec: ChunkerSpec, data: Buffer, segment: number, step: number): number[] {
  const segments: Uint8Array[] = [];
  for (let off = 0; off < data.length; off += segment) {
    const s = new Uint8Array(segment);
    s.set(data.subarray(off, off + segment));
    segments.push(s);
  }
  const cuts: number[] = [];
  let start = 0;
  let state = freshScanState();
  for (let end = Math.min(step, data.length); ; end = Math.min(end + step, data.length)) {
    const final = end === data.length;
    const view = new SegmentedBytes(segments, segment, 0, end);
    for (;;) {
      const cut = findCut(spec, view, start, final, state);
      if (cut < 0) break;
      cuts.push(cut);
      start = cut;
      state = freshScanState();
    }
    if (final) return cuts;
  }
}

function sizes(cuts: number[]): number[] {
  return cuts.map((c, i) => c - (i === 0 ? 0 : cuts[i - 1]));
}

describe('FastCDC (normalized)', () => {
  const data = seededBytes(24 * MiB, 7);

  it('cuts within min..max, ends at the end, averages near the target', () => {
    const cuts = cutAll(FASTCDC, data, 1 * MiB, 1 * MiB);
    expect(cuts.at(-1)).toBe(data.length);
    const s = sizes(cuts);
    for (const n of s.slice(0, -1)) {
      expect(n).toBeGreaterThanOrEqual(256 * KiB);
      expect(n).toBeLessThanOrEqual(4 * MiB);
    }
    const mean = data.length / s.length;
    expect(mean).toBeGreaterThan(0.5 * MiB);
    expect(mean).toBeLessThan(2 * MiB);
  });

  it('gives the same cuts whatever the segment size and arrival pattern', () => {
    const a = cutAll(FASTCDC, data, 1 * MiB, 1 * MiB);
    expect(cutAll(FASTCDC, data, 64 * KiB, 100_000)).toEqual(a);
    expect(cutAll(FASTCDC, data, 4 * MiB, 3 * MiB + 17)).toEqual(a);
  });

  it('is content-defined: an insertion near the start leaves later cuts in place', () => {
    const a = cutAll(FASTCDC, data, 1 * MiB, 1 * MiB);
    const shifted = Buffer.concat([data.subarray(0, 1000), Buffer.from('inserted bytes'), data.subarray(1000)]);
    const b = cutAll(FASTCDC, shifted, 1 * MiB, 1 * MiB).map((c) => c - 14);
    const shared = a.filter((c) => b.includes(c));
    expect(shared.length).toBeGreaterThanOrEqual(a.length - 2);
  });

  it('names its parameters', () => {
    expect(chunkerName(FASTCDC)).toBe('fastcdc-262144-1048576-4194304');
    expect(chunkerName({ kind: 'fixed', size: MiB })).toBe('fixed-1048576');
    expect(chunkerName(PDF)).toBe('pdf-object-1048576-4194304');
  });
});

describe('fixed chunker', () => {
  it('cuts every size bytes', () => {
    const data = seededBytes(3 * MiB + 5, 3);
    expect(cutAll({ kind: 'fixed', size: MiB }, data, 256 * KiB, 300_000)).toEqual([MiB, 2 * MiB, 3 * MiB, 3 * MiB + 5]);
  });
});

describe('PDF-aware chunker', () => {
  it('cuts right after endobj + EOL once a block reaches 1 MiB', () => {
    const pdf = syntheticPdf(400, 11);
    const cuts = cutAll(PDF, pdf, 1 * MiB, 1 * MiB);
    expect(cuts.at(-1)).toBe(pdf.length);
    for (const c of cuts.slice(0, -1)) {
      expect(pdf.subarray(c - 7, c).toString('latin1')).toBe('endobj\n');
    }
    for (const n of sizes(cuts).slice(0, -1)) expect(n).toBeGreaterThanOrEqual(MiB);
  });

  it('shares every block of the previous revision after an incremental update', () => {
    const rev1 = syntheticPdf(600, 5);
    const update = syntheticPdf(3, 99, 601, false);
    const rev2 = Buffer.concat([rev1, update]);
    const a = cutAll(PDF, rev1, 1 * MiB, 1 * MiB);
    const b = cutAll(PDF, rev2, 1 * MiB, 700_000);
    expect(b.slice(0, a.length)).toEqual(a);
    expect(b.at(-1)! - a.at(-1)!).toBe(update.length);
  });

  it('falls back to FastCDC where no object boundary appears within 4 MiB', () => {
    const body = Buffer.concat([Buffer.from('%PDF-1.7\n'), seededBytes(12 * MiB, 1)]);
    const cuts = cutAll(PDF, body, 1 * MiB, 1 * MiB);
    expect(cuts.length).toBeGreaterThan(3);
    for (const n of sizes(cuts).slice(0, -1)) expect(n).toBeLessThanOrEqual(4 * MiB);
  });
});
