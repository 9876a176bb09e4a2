// The scanning thread (engine/cas/stream-scanner.ts): per upload, in order, the whole-object
// SHA-256 and the cut points of its blocks.
import { createHash, type Hash } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { type ChunkerSpec, type ScanState, findCut, freshScanState, scanInArena } from '../engine/cas/chunkers.js';
import { SegmentedBytes } from '../engine/cas/segmented-bytes.js';
import type { ScanMessage } from '../engine/cas/stream-scanner.js';

interface Stream {
  hash: Hash | null;
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
const arena = (workerData as { arena: WebAssembly.Memory }).arena;
scanInArena(arena);

function update(s: Stream, segment: Uint8Array, offset: number, length: number, final: boolean): number[] {
  s.hash?.update(segment.subarray(offset, offset + length));
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
    case 'open':
      streams.set(m.id, { hash: m.hash ? createHash('sha256') : null, spec: m.spec, segmentSize: m.segmentSize, segments: [], first: 0, end: 0, cutStart: 0, state: freshScanState() });
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
