import { type ChunkerSpec, chunkerName, findCut, freshScanState } from '../engine/cas/chunkers.js';
import { SegmentedBytes } from '../engine/cas/segmented-bytes.js';
import { type BenchCase, type BenchResult, KiB, MiB, consume, runGroup } from './harness.js';

/** Segment size of the engine's ingest (SVC_SEGMENT_BYTES default). */
const SEGMENT = 1 * MiB;
/** Bytes chunked per iteration. */
const STREAM_BYTES = 16 * MiB;

const FASTCDC_DEFAULT = { kind: 'fastcdc', min: 256 * KiB, avg: 1 * MiB, max: 4 * MiB } as const;
const SPECS: Array<{ label: string; spec: ChunkerSpec; body: 'random' | 'pdf' }> = [
  { label: 'fastcdc 256KiB/1MiB/4MiB', spec: FASTCDC_DEFAULT, body: 'random' },
  { label: 'fixed 1MiB (no byte scan)', spec: { kind: 'fixed', size: 1 * MiB }, body: 'random' },
  // As engine/cas/ingest.ts pdfChunker() builds it with the default configuration.
  { label: 'pdf 1MiB/4MiB (synthetic PDF)', spec: { kind: 'pdf', target: 1 * MiB, max: 4 * MiB, fallback: FASTCDC_DEFAULT }, body: 'pdf' },
];

export interface ChunkingStats {
  chunker: string;
  blocks: number;
  meanBlockBytes: number;
  minBlockBytes: number;
  maxBlockBytes: number;
}

/**
 * Pseudo-random bytes from a fixed seed (xorshift32): every run chunks the same stream into the
 * same blocks, so the rate does not move with how many minimum-size skips a random draw allows.
 */
export function seededBytes(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  const words = new Uint32Array(out.buffer, out.byteOffset, n >>> 2);
  let x = seed | 0 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x >>> 0;
  }
  for (let i = words.length * 4; i < n; i++) out[i] = (x = (x * 1103515245 + 12345) | 0) >>> 24;
  return out;
}

/** Copies `body` into shared 1 MiB segments, as DirectIngest does. */
export function toSegments(body: Uint8Array): Uint8Array[] {
  const segments: Uint8Array[] = [];
  for (let off = 0; off < body.length; off += SEGMENT) {
    const seg = new Uint8Array(new SharedArrayBuffer(SEGMENT));
    seg.set(body.subarray(off, Math.min(off + SEGMENT, body.length)));
    segments.push(seg);
  }
  return segments;
}

/** A PDF-like body: many `N 0 obj ... endobj` objects, mostly small dictionaries, some binary streams. */
export function syntheticPdf(bytes: number): Uint8Array {
  const parts: Buffer[] = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  let size = parts[0].length;
  let n = 1;
  // Deterministic sizes (xorshift) so every run cuts the same body shape.
  let x = 0x2545f491;
  const rand = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
  while (size < bytes - 64) {
    let obj: Buffer;
    if (rand() < 0.7) {
      const dict = `<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 ${n + 1} 0 R >> >> /MediaBox [0 0 612 792] /Contents ${n + 2} 0 R /Pad ${'x'.repeat(Math.floor(rand() * 200))} >>`;
      obj = Buffer.from(`${n} 0 obj\n${dict}\nendobj\n`, 'latin1');
    } else {
      const len = 4 * KiB + Math.floor(rand() * 124 * KiB);
      const head = Buffer.from(`${n} 0 obj\n<< /Length ${len} /Filter /FlateDecode >>\nstream\n`, 'latin1');
      const tail = Buffer.from('\nendstream\nendobj\n', 'latin1');
      obj = Buffer.concat([head, seededBytes(len, n * 0x9e3779b1), tail]);
    }
    parts.push(obj);
    size += obj.length;
    n++;
  }
  parts.push(Buffer.from(`trailer\n<< /Size ${n} /Root 1 0 R >>\nstartxref\n0\n%%EOF\n`, 'latin1'));
  return Buffer.concat(parts);
}

/**
 * Cuts a whole stream the way the ingest workers see it: bytes arrive one segment at a time
 * (`final` only with the last), and the scan state carries over between arrivals.
 */
export function chunkStream(spec: ChunkerSpec, segments: Uint8Array[], total: number, onCut?: (cut: number) => void): number {
  let start = 0;
  let state = freshScanState();
  let blocks = 0;
  for (let end = Math.min(SEGMENT, total); ; end = Math.min(end + SEGMENT, total)) {
    const final = end === total;
    const data = new SegmentedBytes(segments, SEGMENT, 0, end);
    for (;;) {
      const cut = findCut(spec, data, start, final, state);
      if (cut < 0) break;
      blocks++;
      onCut?.(cut);
      start = cut;
      state = freshScanState();
    }
    if (final) break;
  }
  if (start !== total) throw new Error(`chunker stopped at ${start} of ${total}`);
  return blocks;
}

export async function benchChunkers(): Promise<{ results: BenchResult[]; stats: ChunkingStats[] }> {
  const random = seededBytes(STREAM_BYTES, 0x5eed);
  const bodies = {
    random: { segments: toSegments(random), total: random.length },
    pdf: (() => {
      const pdf = syntheticPdf(STREAM_BYTES);
      return { segments: toSegments(pdf), total: pdf.length };
    })(),
  };
  const stats: ChunkingStats[] = [];
  const cases: BenchCase[] = [];
  for (const { label, spec, body } of SPECS) {
    const { segments, total } = bodies[body];
    const sizes: number[] = [];
    let prev = 0;
    const blocks = chunkStream(spec, segments, total, (cut) => {
      sizes.push(cut - prev);
      prev = cut;
    });
    stats.push({
      chunker: `${label} = ${chunkerName(spec)}`,
      blocks,
      meanBlockBytes: Math.round(total / blocks),
      minBlockBytes: Math.min(...sizes),
      maxBlockBytes: Math.max(...sizes),
    });
    cases.push({ name: `findCut ${label}, ${(total / MiB).toFixed(0)} MiB stream`, bytesPerOp: total, fn: () => consume(chunkStream(spec, segments, total)) });
  }
  return { results: await runGroup('chunking', cases), stats };
}
