// The scanning thread (engine/cas/stream-scanner.ts): per upload, in order, the whole-object
// SHA-256 and the cut points of its blocks.
import { createHash, type Hash } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { type ChunkerSpec, type ScanState, findCut, freshScanState, scanInArena } from '../engine/cas/chunkers.js';
import { SegmentedBytes } from '../engine/cas/segmented-bytes.js';
import type { ScanMessage } from '../engine/cas/stream-scanner.js';

interface Stream {
  hash: Hash | null;
  /** Bytes at the start that are cut but not hashed (an earlier stream hashed them). */
  skip: number;
  spec: ChunkerSpec | null;
  segmentSize: number;
  /** Segments from the one holding `cutStart`; segments[0] starts at `first`. */
  segments: Uint8Array[];
  first: number;
  end: number;
  cutStart: number;
  state: ScanState;
}

const streams = new Map<number, Stream>();
/** Whole-object hashes of resumable uploads, kept between their streams. */
const kept = new Map<string, Hash>();
const arena = (workerData as { arena: WebAssembly.Memory }).arena;
scanInArena(arena);

function update(s: Stream, segment: Uint8Array, offset: number, length: number, final: boolean): number[] {
  if (s.hash) {
    const from = Math.min(length, Math.max(0, s.skip - s.end));
    if (from < length) s.hash.update(segment.subarray(offset + from, offset + length));
  }
  if (offset === 0 && length > 0 && s.spec) s.segments.push(segment);
  s.end += length;
  const cuts: number[] = [];
  if (!s.spec) return cuts;
  const data = new SegmentedBytes(s.segments, s.segmentSize, s.first, s.end);
  for (;;) {
    const cut = findCut(s.spec, data, s.cutStart, final, s.state);
    if (cut < 0) break;
    cuts.push(cut);
    s.cutStart = cut;
    s.state = freshScanState();
  }
  while (s.segments.length > 0 && s.first + s.segmentSize <= s.cutStart) {
    s.segments.shift();
    s.first += s.segmentSize;
  }
  return cuts;
}

parentPort!.on('message', (m: ScanMessage) => {
  switch (m.op) {
    case 'open': {
      let hash: Hash | null = null;
      if (m.kept) {
        hash = kept.get(m.kept.key) ?? createHash('sha256');
        kept.set(m.kept.key, hash);
      } else if (m.hash) hash = createHash('sha256');
      streams.set(m.id, { hash, skip: m.kept?.skip ?? 0, spec: m.spec, segmentSize: m.segmentSize, segments: [], first: 0, end: 0, cutStart: 0, state: freshScanState() });
      break;
    }
    case 'kept-digest':
      parentPort!.postMessage({ id: m.id, digest: kept.get(m.key)?.copy().digest('hex') ?? '' });
      break;
    case 'kept-drop':
      kept.delete(m.key);
      break;
    case 'update': {
      const s = streams.get(m.id);
      if (!s) return;
      // A view rebuilt over this thread's own arena buffer: the wasm gear loop then reads it in place.
      const segment = m.inArena ? new Uint8Array(arena.buffer, m.segment.byteOffset, m.segment.length) : m.segment;
      const cuts = update(s, segment, m.offset, m.length, m.final);
      parentPort!.postMessage({ id: m.id, scanned: s.end, cuts });
      break;
    }
    case 'digest': {
      const s = streams.get(m.id);
      streams.delete(m.id);
      parentPort!.postMessage({ id: m.id, digest: s?.hash ? s.hash.digest('hex') : '' });
      break;
    }
    case 'discard':
      streams.delete(m.id);
      break;
  }
});
