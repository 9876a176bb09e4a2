// An incremental BLAKE3 (hash-wasm) that takes bytes at once, before its wasm instance is ready:
// a document's bytes are hashed as they stream into the CAS (its contentRef is `b3:<hex>`).
// Instances are reused (creating one compiles and instantiates wasm each time).

import { createBLAKE3, type IHasher } from 'hash-wasm';

const SPARE_HASHERS = 16;
const spare: IHasher[] = [];

export class Blake3Stream {
  private hasher?: IHasher;
  private pending: Uint8Array[] = [];
  private readonly ready: Promise<void>;

  constructor() {
    const reused = spare.pop();
    if (reused) {
      reused.init();
      this.hasher = reused;
      this.ready = Promise.resolve();
      return;
    }
    this.ready = createBLAKE3().then((h) => {
      h.init();
      for (const piece of this.pending) h.update(piece);
      this.pending = [];
      this.hasher = h;
    });
  }

  /** Hashes `bytes` (valid only during the call: copied while the instance is not ready). */
  update(bytes: Uint8Array): void {
    if (this.hasher) this.hasher.update(bytes);
    else this.pending.push(Uint8Array.prototype.slice.call(bytes));
  }

  /** The digest; the instance goes back to the spares (the stream is done). */
  async hex(): Promise<string> {
    await this.ready;
    const hasher = this.hasher!;
    const hex = hasher.digest('hex');
    if (spare.length < SPARE_HASHERS) spare.push(hasher);
    return hex;
  }
}
