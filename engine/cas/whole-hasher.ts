import { Worker } from 'node:worker_threads';

interface Stream {
  onProgress: (hashedBytes: number) => void;
  digest?: { resolve: (hex: string) => void; reject: (err: Error) => void };
}

/**
 * The whole-object SHA-256 of large uploads, on a thread of its own. It must see each upload's
 * bytes in order, and node:crypto's hash state cannot move between Piscina's threads, so one
 * dedicated thread keeps a hash per upload. Taking it off the main thread matters beyond the
 * CPU: uWS honours pause() only while its data callback is quicker than the sender, and with the
 * hash in that callback it was not (docs/architecture.md, Known limits).
 */
export class WholeHasher {
  private readonly worker: Worker;
  private readonly streams = new Map<number, Stream>();
  private nextId = 1;
  private failure: Error | null = null;

  constructor(filename: string) {
    this.worker = new Worker(filename);
    this.worker.on('message', (m: { id: number; hashed?: number; digest?: string }) => {
      const stream = this.streams.get(m.id);
      if (!stream) return;
      if (m.digest !== undefined) {
        this.streams.delete(m.id);
        stream.digest?.resolve(m.digest);
      } else stream.onProgress(m.hashed!);
    });
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) => this.fail(new Error(`hasher thread exited with code ${code}`)));
  }

  /** A new hash; `onProgress` hears how many bytes it has consumed so far. */
  open(onProgress: (hashedBytes: number) => void): HashStream {
    const id = this.nextId++;
    this.streams.set(id, { onProgress });
    this.worker.postMessage({ op: 'open', id });
    return new HashStream(this, id);
  }

  /** @internal */ post(message: object): void {
    this.worker.postMessage(message);
  }

  /** @internal */ awaitDigest(id: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const stream = this.streams.get(id);
      if (this.failure || !stream) return reject(this.failure ?? new Error('hash stream closed'));
      stream.digest = { resolve, reject };
      this.worker.postMessage({ op: 'digest', id });
    });
  }

  /** @internal */ forget(id: number): void {
    if (this.streams.delete(id)) this.worker.postMessage({ op: 'discard', id });
  }

  private fail(err: Error): void {
    this.failure = err;
    for (const s of this.streams.values()) s.digest?.reject(err);
    this.streams.clear();
  }

  async close(): Promise<void> {
    this.worker.removeAllListeners('exit');
    await this.worker.terminate();
  }
}

export class HashStream {
  constructor(
    private readonly hasher: WholeHasher,
    private readonly id: number,
  ) {}

  /** Hashes bytes [offset, offset + length) of a shared segment; the segment must stay untouched until progress passes it. */
  update(segment: SharedArrayBuffer, offset: number, length: number): void {
    this.hasher.post({ op: 'update', id: this.id, segment, offset, length });
  }

  digest(): Promise<string> {
    return this.hasher.awaitDigest(this.id);
  }

  discard(): void {
    this.hasher.forget(this.id);
  }
}
