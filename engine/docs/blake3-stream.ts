// An incremental BLAKE3 (hash-wasm) that takes bytes at once, before its wasm instance is ready:
// a document's bytes are hashed as they stream into the CAS (its contentRef is `b3:<hex>`).

import { createBLAKE3, type IHasher } from 'hash-wasm';

export class Blake3Stream {
  private hasher?: IHasher;
  private pending: Uint8Array[] = [];
  private readonly ready: Promise<void>;

  constructor() {
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

  async hex(): Promise<string> {
    await this.ready;
    return this.hasher!.digest('hex');
  }
}
