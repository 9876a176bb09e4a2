import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

/** A FIFO of body bytes on disk: the part of an upload's backlog that does not fit in memory. */
export class SpillFile {
  private readonly file: string;
  private readonly fd: number;
  private writePos = 0;
  private readPos = 0;

  constructor(dir: string) {
    this.file = path.join(dir, `spill.${randomBytes(8).toString('hex')}`);
    this.fd = fs.openSync(this.file, 'w+');
  }

  get pending(): number {
    return this.writePos - this.readPos;
  }

  append(chunk: Uint8Array): void {
    let off = 0;
    while (off < chunk.length) off += fs.writeSync(this.fd, chunk, off, chunk.length - off, this.writePos + off);
    this.writePos += chunk.length;
  }

  /** Reads up to `into.length` pending bytes in order; returns how many. */
  take(into: Uint8Array): number {
    const want = Math.min(into.length, this.pending);
    let got = 0;
    while (got < want) {
      const n = fs.readSync(this.fd, into, got, want - got, this.readPos + got);
      if (n === 0) throw new Error('spill file shorter than written');
      got += n;
    }
    this.readPos += got;
    return got;
  }

  dispose(): void {
    fs.closeSync(this.fd);
    fs.rmSync(this.file, { force: true });
  }
}
