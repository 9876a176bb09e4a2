// The scanning thread (engine/cas/stream-scanner.ts): per upload, in order, the whole-object
// SHA-256 and the cut points of its blocks.
import { createHash, type Hash } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { type ChunkerSpec, findCut, freshScanState } from '../engine/cas/chunkers.js';
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
  state: ReturnType<typeof freshScanState>;
}

const streams = new Map<number, Stream>();

function update(s: Stream, segment: SharedArrayBuffer, offset: number, length: number, final: boolean): number[] {
  const bytes = new Uint8Array(segment, offset, length);
  s.hash?.update(bytes);
  if (offset === 0 && length > 0 && s.spec) s.segments.push(new Uint8Array(segment));
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
      const cuts = update(s, m.segment, m.offset, m.length, m.final);
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
