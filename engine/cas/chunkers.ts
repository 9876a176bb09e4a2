import type { ChunkerSpec } from '../base/chunker-spec.js';
import { GearScanner } from './gear-scan.js';
import type { SegmentedBytes } from './segmented-bytes.js';

export type { ChunkerSpec };

/** Scanning progress of the block being cut, carried between tasks so no byte is scanned twice. */
export interface ScanState {
  /** FastCDC: where the gear hash resumes, and its value there. */
  pos: number;
  hash: number;
  /** PDF: markers were searched up to here (less a small overlap) without a boundary. */
  markerPos: number;
}

export const freshScanState = (): ScanState => ({ pos: -1, hash: 0, markerPos: -1 });

export function chunkerName(spec: ChunkerSpec): string {
  switch (spec.kind) {
    case 'fastcdc':
      return `fastcdc-${spec.min}-${spec.avg}-${spec.max}`;
    case 'fixed':
      return `fixed-${spec.size}`;
    case 'pdf':
      return `pdf-object-${spec.target}-${spec.max}`;
  }
}

/** Largest block any spec can produce: the bound on bytes an upload holds back. */
export function maxBlockBytes(spec: ChunkerSpec): number {
  return spec.kind === 'fixed' ? spec.size : Math.max(spec.max, spec.kind === 'pdf' ? spec.fallback.max : 0);
}

/**
 * Where the block starting at `start` ends, given bytes [start, data.end).
 * Returns the absolute end offset, or -1 when more bytes are needed to decide.
 * With `final` the stream has ended and the remainder is always cut.
 */
export function findCut(spec: ChunkerSpec, data: SegmentedBytes, start: number, final: boolean, state: ScanState): number {
  if (data.end <= start) return -1;
  switch (spec.kind) {
    case 'fastcdc':
      return fastcdcCut(spec, data, start, final, state);
    case 'fixed':
      return data.end - start >= spec.size ? start + spec.size : final ? data.end : -1;
    case 'pdf':
      return pdfCut(spec, data, start, final, state);
  }
}

// Gear table: 256 pseudo-random 32-bit values from a fixed seed (splitmix32). Changing it changes
// every cut point, which is why the chunker name carries its parameters and never the table.
const GEAR = (() => {
  const table = new Int32Array(256);
  let s = 0x9e3779b9;
  for (let i = 0; i < 256; i++) {
    s = (s + 0x9e3779b9) | 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    table[i] = z ^ (z >>> 16);
  }
  return table;
})();

let gear = new GearScanner(GEAR);

/** Scans in place the bytes that live in `arena` (the scanning thread's segment memory). */
export function scanInArena(arena: WebAssembly.Memory): void {
  gear = new GearScanner(GEAR, arena);
}

/** A mask of the `bits` highest bits: the gear hash's high bits depend on the last 32 bytes. */
export const highBits = (bits: number): number => (bits >= 32 ? -1 : (0xffffffff << (32 - bits)) | 0);

function fastcdcCut(spec: { min: number; avg: number; max: number }, data: SegmentedBytes, start: number, final: boolean, state: ScanState): number {
  const minEnd = start + spec.min;
  const avgEnd = start + spec.avg;
  const maxEnd = start + spec.max;
  const end = data.end;
  if (end <= minEnd) return final ? end : -1;
  // Normalized chunking (level 2): harder to cut before the average, easier after it.
  const bits = Math.round(Math.log2(spec.avg));
  const maskSmall = highBits(bits + 2);
  const maskLarge = highBits(bits - 2);
  let pos = state.pos >= minEnd ? state.pos : minEnd;
  let h = state.pos >= minEnd ? state.hash : 0;
  const limit = Math.min(end, maxEnd);
  while (pos < limit) {
    const { bytes, offset, length } = data.pieceAt(pos, limit);
    const split = Math.min(length, Math.max(0, avgEnd - pos));
    let i = gear.scan(bytes, offset, offset + split, h, maskSmall);
    if (i < 0) {
      h = gear.hash;
      i = gear.scan(bytes, offset + split, offset + length, h, maskLarge);
    }
    if (i >= 0) return pos + (i - offset) + 1;
    h = gear.hash;
    pos += length;
  }
  if (limit === maxEnd) return maxEnd;
  if (final) return end;
  state.pos = limit;
  state.hash = h;
  return -1;
}

const ENDOBJ = Buffer.from('endobj');
const EOF_MARKER = Buffer.from('%%EOF');

/**
 * PDF-aware cut: right after `endobj` + end-of-line once the block reaches `target`, or right after
 * `%%EOF` + end-of-line at any size (the end of a revision: an incremental update then starts a
 * fresh block, so every block of the previous revision is shared). Where no such boundary occurs
 * within `max` bytes the object structure cannot be followed, and FastCDC cuts instead.
 */
function pdfCut(spec: Extract<ChunkerSpec, { kind: 'pdf' }>, data: SegmentedBytes, start: number, final: boolean, state: ScanState): number {
  const windowEnd = Math.min(data.end, start + spec.max);
  const scanned = Math.max(start, state.markerPos);
  const eofCut = markerCut(data, EOF_MARKER, scanned, windowEnd, final, 0);
  const objFrom = Math.max(scanned, start + spec.target - ENDOBJ.length - 2);
  const objCut = markerCut(data, ENDOBJ, objFrom, windowEnd, final, start + spec.target);
  if (eofCut === NEED_MORE || objCut === NEED_MORE) return -1;
  const cut = eofCut > 0 && (objCut <= 0 || eofCut < objCut) ? eofCut : objCut;
  if (cut > 0) return cut;
  if (windowEnd === start + spec.max || final) return fastcdcCut(spec.fallback, data, start, final, state);
  // Nothing up to here; rescan only the last few bytes, where a marker may still be completing.
  state.markerPos = Math.max(start, windowEnd - ENDOBJ.length - 2);
  return -1;
}

const NEED_MORE = -2;

/** End of the first `marker` + EOL in [from, to) whose end is at least `minCut`; -1 none; NEED_MORE undecided. */
function markerCut(data: SegmentedBytes, marker: Buffer, from: number, to: number, final: boolean, minCut: number): number {
  let at = from;
  for (;;) {
    const hit = data.indexOf(marker, at, to);
    if (hit < 0) return -1;
    const after = hit + marker.length;
    if (after >= data.end) return final ? data.end : NEED_MORE;
    const c = data.byteAt(after);
    let cut = -1;
    if (c === 0x0a) cut = after + 1;
    else if (c === 0x0d) {
      if (after + 1 >= data.end && !final) return NEED_MORE;
      cut = after + 1 < data.end && data.byteAt(after + 1) === 0x0a ? after + 2 : after + 1;
    }
    if (cut > 0 && cut >= minCut && cut <= to) return cut;
    at = hit + 1;
  }
}
