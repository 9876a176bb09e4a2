// Reading a file for upload: exact byte ranges as streams (bounded memory), and the SHA-256 of
// the whole file built from what was sent, so the id the server returns can be checked.

import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs/promises';
import { Readable } from 'node:stream';
import { CliError } from './errors.js';

const CHUNK = 1024 * 1024;

/** Bytes [start, start + length) of `file`; fails with CliError if the file is shorter now. */
export function rangeStream(file: string, start: number, length: number, onChunk: (position: number, chunk: Buffer) => void = () => {}): Readable {
  async function* read() {
    const handle = await fs.open(file, 'r');
    try {
      let position = start;
      const end = start + length;
      while (position < end) {
        const buf = Buffer.allocUnsafe(Math.min(CHUNK, end - position));
        const { bytesRead } = await handle.read(buf, 0, buf.length, position);
        if (bytesRead === 0) throw new CliError(`${file} is shorter than when the upload started (changed while uploading?)`);
        const chunk = bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
        onChunk(position, chunk);
        position += bytesRead;
        yield chunk;
      }
    } finally {
      await handle.close();
    }
  }
  return Readable.from(read(), { objectMode: false, highWaterMark: CHUNK });
}

/** SHA-256 of a file's prefix, fed in order from what is sent and filled from the file where needed. */
export class FileHasher {
  private hash: Hash = createHash('sha256');
  /** Bytes [0, hashed) are in the hash. */
  hashed = 0;

  constructor(private readonly file: string) {}

  /** Bytes seen at `position`; only the part that extends the hashed prefix counts. */
  see(position: number, chunk: Buffer): void {
    if (position > this.hashed || position + chunk.length <= this.hashed) return;
    this.hash.update(chunk.subarray(this.hashed - position));
    this.hashed = position + chunk.length;
  }

  /** Reads the file up to `to` if the hash is behind it (a resumed upload). */
  async catchUp(to: number): Promise<void> {
    if (this.hashed >= to) return;
    for await (const chunk of rangeStream(this.file, this.hashed, to - this.hashed) as AsyncIterable<Buffer>) this.see(this.hashed, chunk);
  }

  reset(): void {
    this.hash = createHash('sha256');
    this.hashed = 0;
  }

  hex(): string {
    return this.hash.copy().digest('hex');
  }
}
