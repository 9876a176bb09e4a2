import { createCipheriv, createHash, type Cipher } from 'node:crypto';

const ZEROS = Buffer.alloc(1024 * 1024);

/**
 * Deterministic pseudo-random bytes: AES-256-CTR keystream keyed by a seed string. Same seed,
 * same bytes, on every machine; fast enough (GB/s) that generating the bodies costs little.
 */
export class ByteStream {
  private readonly cipher: Cipher;

  constructor(seed: string) {
    const key = createHash('sha256').update(`svc-bench-key:${seed}`).digest();
    const iv = createHash('sha256').update(`svc-bench-iv:${seed}`).digest().subarray(0, 16);
    this.cipher = createCipheriv('aes-256-ctr', key, iv);
  }

  /** The next `n` bytes of the stream, as a fresh Buffer. */
  bytes(n: number): Buffer {
    if (n <= ZEROS.length) return this.cipher.update(ZEROS.subarray(0, n));
    const parts: Buffer[] = [];
    for (let left = n; left > 0; left -= ZEROS.length) parts.push(this.cipher.update(ZEROS.subarray(0, Math.min(left, ZEROS.length))));
    return Buffer.concat(parts, n);
  }

  /** A uniform number in [0, 1), 48 bits. */
  fraction(): number {
    return this.bytes(6).readUIntLE(0, 6) / 2 ** 48;
  }

  /** A uniform integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.fraction() * (max - min + 1));
  }
}
