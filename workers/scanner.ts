// The scanning thread (engine/cas/stream-scanner.ts): per upload, in order, the whole-object
// SHA-256 and the cut points of its blocks; with the native SHA-256 pair also each block's
// SHA-256, computed together with the whole object's over the same bytes.
import { createHash, type Hash } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { type ChunkerSpec, type ScanState, findCut, freshScanState, scanInArena } from '../engine/cas/chunkers.js';
import { SegmentedBytes } from '../engine/cas/segmented-bytes.js';
import { type Sha256Pair, loadSha256Pair, newState } from '../engine/cas/sha256-pair.js';
import type { ScanMessage } from '../engine/cas/stream-scanner.js';

/** A whole-object hash: node:crypto's, or a state of the native pair. */
type ObjectHash = Hash | Uint8Array;

interface Stream {
  hash: ObjectHash | null;
  /** Bytes at the start that are cut but not hashed into the object (an earlier stream hashed them). */
  skip: number;
  spec: ChunkerSpec | null;
  segmentSize: number;
  /** Segments from the one holding `cutStart`; segments[0] starts at `first`. */
  segments: Uint8Array[];
  first: number;
  end: number;
  cutStart: number;
  state: ScanState;
  /** The SHA-256 of the block being cut (native pair only): it covers [cutStart, end). */
  block: Uint8Array | null;
}

const streams = new Map<number, Stream>();
/** Whole-object hashes of resumable uploads, kept between their streams. */
const kept = new Map<string, ObjectHash>();
const { arena, pairHashing } = workerData as { arena: WebAssembly.Memory; pairHashing: boolean };
const pair: Sha256Pair | null = pairHashing ? loadSha256Pair() : null;
scanInArena(arena);

const newObjectHash = (): ObjectHash => (pair ? newState(pair) : createHash('sha256'));
const hexOf = (h: ObjectHash): string => (h instanceof Uint8Array ? pair!.hex(h) : h.copy().digest('hex'));

/** Hashes the stream's bytes [from, to), which arrived in `bytes` (stream offset `at` is bytes[0]). */
function hashArrived(s: Stream, bytes: Uint8Array, at: number, from: number, to: number): void {
  if (to <= from) return;
  const piece = bytes.subarray(from - at, to - at);
  // Bytes before `skip` were hashed into the object by an earlier stream; blocks still need them.
  const objectFrom = s.hash ? Math.min(piece.length, Math.max(0, s.skip - from)) : piece.length;
  if (pair) {
    if (s.block && objectFrom > 0) pair.update(s.block, null, piece.subarray(0, objectFrom));
    if (objectFrom < piece.length) pair.update(s.hash as Uint8Array, s.block, piece.subarray(objectFrom));
  } else if (objectFrom < piece.length) (s.hash as Hash).update(piece.subarray(objectFrom));
}

/**
 * A cut behind bytes the block hash has already taken (the PDF chunker's FastCDC fallback can
 * cut inside bytes it only searched for markers): that block is hashed again from the segments,
 * and the next block's hash restarts at the cut, up to where the hashing had got.
 */
function cutBehind(block: Uint8Array, data: SegmentedBytes, blockStart: number, cut: number, hashedTo: number): string {
  const whole = newState(pair!);
  for (const p of data.pieces(blockStart, cut)) pair!.update(whole, null, p);
  pair!.init(block);
  for (const p of data.pieces(cut, hashedTo)) pair!.update(block, null, p);
  return pair!.hex(whole);
}

function update(s: Stream, segment: Uint8Array, offset: number, length: number, final: boolean): { cuts: number[]; digests?: string[] } {
  const start = s.end;
  const arrived = segment.subarray(offset, offset + length);
  if (offset === 0 && length > 0 && s.spec) s.segments.push(segment);
  s.end += length;
  let blockStart = s.cutStart;
  const cuts: number[] = [];
  // Only a stream that is cut keeps its segments (and a block hash).
  const data = s.spec ? new SegmentedBytes(s.segments, s.segmentSize, s.first, s.end) : null;
  if (data) {
    for (;;) {
      const cut = findCut(s.spec!, data, s.cutStart, final, s.state);
      if (cut < 0) break;
      cuts.push(cut);
      s.cutStart = cut;
      s.state = freshScanState();
    }
  }
  let digests: string[] | undefined;
  if (!s.block) hashArrived(s, arrived, start, start, s.end);
  else {
    // Both hashes advance over the arrived bytes together; each cut ends a block's hash.
    digests = [];
    let hashedTo = start;
    for (const cut of cuts) {
      if (cut < hashedTo) digests.push(cutBehind(s.block, data!, blockStart, cut, hashedTo));
      else {
        hashArrived(s, arrived, start, hashedTo, cut);
        hashedTo = cut;
        digests.push(pair!.hex(s.block));
        pair!.init(s.block);
      }
      blockStart = cut;
    }
    hashArrived(s, arrived, start, hashedTo, s.end);
  }
  while (s.segments.length > 0 && s.first + s.segmentSize <= s.cutStart) {
    s.segments.shift();
    s.first += s.segmentSize;
  }
  return { cuts, digests };
}

parentPort!.on('message', (m: ScanMessage) => {
  switch (m.op) {
    case 'open': {
      let hash: ObjectHash | null = null;
      if (m.kept) {
        hash = kept.get(m.kept.key) ?? newObjectHash();
        kept.set(m.kept.key, hash);
      } else if (m.hash) hash = newObjectHash();
      const block = pair && m.spec ? newState(pair) : null;
      streams.set(m.id, { hash, skip: m.kept?.skip ?? 0, spec: m.spec, segmentSize: m.segmentSize, segments: [], first: 0, end: 0, cutStart: 0, state: freshScanState(), block });
      break;
    }
    case 'kept-digest': {
      const h = kept.get(m.key);
      parentPort!.postMessage({ id: m.id, digest: h ? hexOf(h) : '' });
      break;
    }
    case 'kept-drop':
      kept.delete(m.key);
      break;
    case 'update': {
      const s = streams.get(m.id);
      if (!s) return;
      // A view rebuilt over this thread's own arena buffer: the wasm gear loop then reads it in place.
      const segment = m.inArena ? new Uint8Array(arena.buffer, m.segment.byteOffset, m.segment.length) : m.segment;
      const { cuts, digests } = update(s, segment, m.offset, m.length, m.final);
      parentPort!.postMessage({ id: m.id, scanned: s.end, cuts, digests });
      break;
    }
    case 'digest': {
      const s = streams.get(m.id);
      streams.delete(m.id);
      parentPort!.postMessage({ id: m.id, digest: s?.hash ? hexOf(s.hash) : '' });
      break;
    }
    case 'discard':
      streams.delete(m.id);
      break;
  }
});
