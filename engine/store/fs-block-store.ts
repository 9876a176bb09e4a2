import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import type { Durability } from '../config.js';

/** Blocks are spread over 4096 directories named by the first three hex digits of their digest. */
const PARTITION_DIGITS = 3;

/**
 * Block bytes as files: `<root>/blocks/<h[0:3]>/<hex>-<size>`, written as a temp file in
 * `<root>/blocks/.tmp/w<thread>` (one directory per writing thread: creating files in one shared
 * directory serialised the workers on its lock), fsync'd (strict), renamed into place, then the
 * directory fsync'd (strict).
 * A file under its final name is always complete. The write side runs in worker threads (sync
 * calls, blocking only that worker); the read side runs on the main thread.
 */
export class FsBlockStore {
  readonly blocksDir: string;
  readonly tmpDir: string;
  /** Partition directories known to exist (each is made on its first block). */
  private readonly knownDirs = new Set<string>();
  /** This thread's directory of writes in progress, made on its first write. */
  private writeDir?: string;
  private tempCounter = 0;

  constructor(
    root: string,
    readonly durability: Durability,
  ) {
    this.blocksDir = path.join(root, 'blocks');
    this.tmpDir = path.join(this.blocksDir, '.tmp');
  }

  /** Creates the layout and removes temp files that interrupted writes left behind. */
  static prepare(root: string): { removedTempFiles: number } {
    const tmp = path.join(root, 'blocks', '.tmp');
    fs.mkdirSync(tmp, { recursive: true });
    let removed = 0;
    for (const entry of fs.readdirSync(tmp, { withFileTypes: true })) {
      const file = path.join(tmp, entry.name);
      removed += entry.isDirectory() ? fs.readdirSync(file).length : 1;
      fs.rmSync(file, { force: true, recursive: true });
    }
    return { removedTempFiles: removed };
  }

  blockPath(hex: string, size: number): string {
    return path.join(this.blocksDir, hex.slice(0, PARTITION_DIGITS), `${hex}-${size}`);
  }

  /** Stores a block unless an intact copy exists. Returns true when this call wrote it. */
  putSync(hex: string, size: number, pieces: readonly Uint8Array[]): boolean {
    const final = this.blockPath(hex, size);
    const existing = fs.statSync(final, { throwIfNoEntry: false });
    if (existing && existing.size === size) return false;
    const tmp = path.join(this.writeDir ?? this.makeWriteDir(), `${hex}.${this.tempCounter++}`);
    let fd: number;
    try {
      fd = fs.openSync(tmp, 'w');
    } catch (err) {
      // The write directory is not usable (gone, or something else in its place): look again next time.
      this.writeDir = undefined;
      throw err;
    }
    try {
      let written = 0;
      for (const piece of pieces) {
        let off = 0;
        while (off < piece.length) off += fs.writeSync(fd, piece, off, piece.length - off);
        written += piece.length;
      }
      if (written !== size) throw new Error(`block ${hex}: wrote ${written} of ${size} bytes`);
      if (this.durability === 'strict') fs.fsyncSync(fd);
    } catch (err) {
      fs.closeSync(fd);
      fs.rmSync(tmp, { force: true });
      throw err;
    }
    fs.closeSync(fd);
    const dir = path.dirname(final);
    if (!this.knownDirs.has(dir)) {
      fs.mkdirSync(dir, { recursive: true });
      this.knownDirs.add(dir);
    }
    fs.renameSync(tmp, final);
    if (this.durability === 'strict') syncDirectory(dir);
    return true;
  }

  /** Not recursive: a block store whose directories are gone must fail writes, not recreate them. */
  private makeWriteDir(): string {
    const dir = path.join(this.tmpDir, `w${threadId}`);
    try {
      fs.mkdirSync(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    return (this.writeDir = dir);
  }

  /**
   * Reads a whole block, into `into` when given (reused by the caller to keep memory flat).
   * Small blocks are read synchronously: cheaper than three thread-pool hops.
   */
  async read(hex: string, size: number, into?: Buffer): Promise<Buffer> {
    const file = this.blockPath(hex, size);
    if (size <= 65536) return readExactSync(file, size);
    const handle = await fsp.open(file, 'r');
    try {
      const buf = into ? into.subarray(0, size) : Buffer.allocUnsafe(size);
      let off = 0;
      while (off < size) {
        const { bytesRead } = await handle.read(buf, off, size - off, off);
        if (bytesRead === 0) throw new Error(`block ${hex}: short file`);
        off += bytesRead;
      }
      return buf;
    } finally {
      await handle.close();
    }
  }

  /** Reads a whole block on the calling thread (workers). */
  readSync(hex: string, size: number): Buffer {
    return readExactSync(this.blockPath(hex, size), size);
  }
}

function readExactSync(file: string, size: number): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(size);
    let off = 0;
    while (off < size) {
      const n = fs.readSync(fd, buf, off, size - off, off);
      if (n === 0) throw new Error(`${file}: short file`);
      off += n;
    }
    return buf;
  } finally {
    fs.closeSync(fd);
  }
}

export function syncDirectory(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
