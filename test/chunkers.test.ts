import { describe, expect, it } from 'vitest';
import { type ChunkerSpec, chunkerName, findCut, freshScanState, highBits } from '../dist/engine/cas/chunkers.js';
import { ARENA_RESERVED_BYTES, GearScanner } from '../dist/engine/cas/gear-scan.js';
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

describe('gear scan (WebAssembly)', () => {
  /** The loop the wasm function unrolls, byte by byte in JavaScript. */
  function reference(gearTable: Int32Array, bytes: Uint8Array, from: number, to: number, h: number, mask: number): { at: number; hash: number } {
    for (let i = from; i < to; i++) {
      h = ((h << 1) + gearTable[bytes[i]]) | 0;
      if ((h & mask) === 0) return { at: i, hash: h };
    }
    return { at: -1, hash: h };
  }

  it('finds the same first cut as the byte-by-byte loop, at every alignment, in place and copied', () => {
    const table = new Int32Array(seededBytes(1024, 3).buffer.slice(0, 1024));
    const arena = new WebAssembly.Memory({ initial: 4, maximum: 4, shared: true });
    const inPlace = new GearScanner(table, arena);
    const copying = new GearScanner(table);
    const data = new Uint8Array(arena.buffer, ARENA_RESERVED_BYTES, 65536);
    data.set(seededBytes(65536, 11));
    const plain = Buffer.from(data);
    let cuts = 0;
    for (let round = 0; round < 2000; round++) {
      const from = round % 61;
      const to = from + ((round * 7919) % 9000);
      const mask = highBits(1 + (round % 14));
      const h = (round * 0x9e3779b9) | 0;
      const want = reference(table, plain, from, to, h, mask);
      for (const [scanner, bytes] of [[inPlace, data], [copying, plain]] as const) {
        const at = scanner.scan(bytes, from, to, h, mask);
        expect(at).toBe(want.at);
        if (at < 0) expect(scanner.hash).toBe(want.hash);
      }
      if (want.at >= 0) cuts++;
    }
    expect(cuts).toBeGreaterThan(500);
  });
});
