import { Worker } from 'node:worker_threads';
import type { ChunkerSpec } from './chunkers.js';

/** Messages to the scanning thread (workers/scanner.ts). */
export type ScanMessage =
  | { op: 'open'; id: number; hash: boolean; spec: ChunkerSpec | null; segmentSize: number; kept?: KeptHash }
  | { op: 'update'; id: number; segment: Uint8Array; inArena: boolean; offset: number; length: number; final: boolean }
  | { op: 'digest' | 'discard'; id: number }
  | { op: 'kept-digest'; id: number; key: string }
  | { op: 'kept-drop'; key: string };

/**
 * A whole-object hash that outlives its stream (a resumable upload's, across parts): the stream
 * continues the hash kept under `key` (a new one when none is kept) and leaves it there; its
 * first `skip` bytes are only cut, not hashed (bytes an earlier stream already hashed).
 */
interface KeptHash {
  key: string;
  skip: number;
}

interface Stream {
  onProgress: (scannedBytes: number, cuts: number[], digests?: string[]) => void;
  onFailure: (err: Error) => void;
  digest?: { resolve: (hex: string) => void; reject: (err: Error) => void };
}

/**
 * The in-order work of large uploads, on a thread of its own: the whole-object SHA-256 and the
 * block cut points (each cut depends on the bytes before it, and node:crypto's hash state cannot
 * move between Piscina's threads). One message per segment does both, so neither costs a pool
 * task. Keeping this off the main thread also matters beyond the CPU: uWS honours pause() only
 * while its data callback is quicker than the sender (docs/architecture.md, Known limits).
 */
export class StreamScanner {
  private readonly worker: Worker;
  private readonly streams = new Map<number, Stream>();
  private nextId = 1;
  private failure: Error | null = null;
  private readonly keptKeys = new Set<string>();

  /**
   * `arena`: the shared memory most segments live in (TransferMemory), scanned in place there.
   * `pairHashing`: the thread also hashes each block, with the native SHA-256 pair.
   */
  constructor(
    filename: string,
    private readonly arena: WebAssembly.Memory,
    readonly pairHashing = false,
  ) {
    this.worker = new Worker(filename, { workerData: { arena, pairHashing } });
    this.worker.on('message', (m: { id: number; scanned?: number; cuts?: number[]; digests?: string[]; digest?: string }) => {
      const stream = this.streams.get(m.id);
      if (!stream) return;
      if (m.digest !== undefined) {
        this.streams.delete(m.id);
        stream.digest?.resolve(m.digest);
      } else stream.onProgress(m.scanned!, m.cuts!, m.digests);
    });
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) => this.fail(new Error(`scanner thread exited with code ${code}`)));
  }

  /**
   * A new stream: hashed when `hash`, cut with `spec` unless null. `onProgress` hears how many
   * bytes the thread is done with and the cut points (absolute offsets) found in them, with
   * pair hashing also the SHA-256 (hex) of each block those cuts end.
   */
  open(hash: boolean, spec: ChunkerSpec | null, segmentSize: number, onProgress: Stream['onProgress'], onFailure: Stream['onFailure'], kept?: KeptHash): ScanStream {
    const id = this.nextId++;
    if (this.failure) queueMicrotask(() => onFailure(this.failure!));
    else this.streams.set(id, { onProgress, onFailure });
    if (kept) this.keptKeys.add(kept.key);
    this.post({ op: 'open', id, hash, spec, segmentSize, kept });
    return new ScanStream(this, id);
  }

  /** Whether a hash is kept under `key` in this process (kept hashes do not survive a restart). */
  hasKept(key: string): boolean {
    return this.keptKeys.has(key);
  }

  /** The digest of the hash kept under `key`, which stays kept (its streams must have been scanned). */
  keptDigest(key: string): Promise<string> {
    return new Promise((resolve, reject) => {
      if (this.failure || !this.keptKeys.has(key)) return reject(this.failure ?? new Error(`no hash kept under ${key}`));
      const id = this.nextId++;
      this.streams.set(id, { onProgress: () => {}, onFailure: reject, digest: { resolve, reject } });
      this.post({ op: 'kept-digest', id, key });
    });
  }

  dropKept(key: string): void {
    if (this.keptKeys.delete(key)) this.post({ op: 'kept-drop', key });
  }

  /** @internal */ inArena(segment: Uint8Array): boolean {
    return segment.buffer === this.arena.buffer;
  }

  /** @internal */ post(message: ScanMessage): void {
    this.worker.postMessage(message);
  }

  /** @internal */ awaitDigest(id: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const stream = this.streams.get(id);
      if (this.failure || !stream) return reject(this.failure ?? new Error('scan stream closed'));
      stream.digest = { resolve, reject };
      this.post({ op: 'digest', id });
    });
  }

  /** @internal */ forget(id: number): void {
    if (this.streams.delete(id)) this.post({ op: 'discard', id });
  }

  private fail(err: Error): void {
    this.failure = err;
    this.keptKeys.clear();
    const streams = [...this.streams.values()];
    this.streams.clear();
    for (const s of streams) {
      if (s.digest) s.digest.reject(err);
      else s.onFailure(err);
    }
  }

  async close(): Promise<void> {
    this.worker.removeAllListeners('exit');
    await this.worker.terminate();
  }
}

export class ScanStream {
  constructor(
    private readonly scanner: StreamScanner,
    private readonly id: number,
  ) {}

  /**
   * Scans bytes [offset, offset + length) of a shared segment, the next ones of the stream (a new
   * segment starts at offset 0); `final` once, with the last. The segment must stay untouched
   * until progress passes it.
   */
  update(segment: Uint8Array, offset: number, length: number, final: boolean): void {
    this.scanner.post({ op: 'update', id: this.id, segment, inArena: this.scanner.inArena(segment), offset, length, final });
  }

  digest(): Promise<string> {
    return this.scanner.awaitDigest(this.id);
  }

  discard(): void {
    this.scanner.forget(this.id);
  }
}
