// The data directory's staging area for resumable uploads (fs and s3 backends): per session, the
// tail of its object (the bytes after its last recorded block: less than a block when the part's
// pipeline drained, up to the ingest's memory bound when the part was acknowledged early), in one
// of two files that parts take in turn: a part writes the file the session's record does not
// name, fsync'd (strict), before the part is recorded and acknowledged.

import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Durability } from '../../base/config.js';
import type { TailStaging } from '../upload-catalog.js';
import { syncDirectory } from './sync-directory.js';

const fsyncAsync = promisify(fs.fsync);

export class FsTailStaging implements TailStaging {
  readonly dir: string;

  constructor(
    fsRoot: string,
    private readonly durability: Durability,
  ) {
    this.dir = path.join(fsRoot, 'blocks', '.staging');
    fs.mkdirSync(this.dir, { recursive: true });
  }

  private sessionDir(id: string): string {
    return path.join(this.dir, id);
  }

  /**
   * Writes `pieces` (in order) over the file `name` of the session, in place (created on first
   * use), and cuts it to their length; fsync'd (strict). For a file no record refers to while it is written: a
   * crash leaves it partial, and the record still names the other one. Rewriting in place keeps
   * the file's inode and page cache: a new file per part would cost an inode, an unlink and fresh
   * page cache each time.
   */
  async overwrite(id: string, name: string, pieces: readonly Uint8Array[]): Promise<void> {
    const dir = this.sessionDir(id);
    const file = path.join(dir, name);
    let fd: number;
    let created = false;
    try {
      fd = fs.openSync(file, fs.constants.O_WRONLY);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      fs.mkdirSync(dir, { recursive: true });
      fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT);
      created = true;
    }
    try {
      let at = 0;
      for (const piece of pieces) {
        for (let off = 0; off < piece.length; ) off += fs.writeSync(fd, piece, off, piece.length - off, at + off);
        at += piece.length;
      }
      fs.ftruncateSync(fd, at);
      // The write is a page-cache copy; the fsync waits for the disk, off the event loop.
      if (this.durability === 'strict') await fsyncAsync(fd);
    } finally {
      fs.closeSync(fd);
    }
    if (created && this.durability === 'strict') syncDirectory(dir);
  }

  /**
   * With `take`, read on the calling thread into the buffer it gives (a part starting afresh
   * reads its tail before its body is let in); after a failed read the buffer taken is the
   * caller's to give back.
   */
  async read(id: string, name: string | undefined, take?: (size: number) => Buffer): Promise<Buffer> {
    if (name === undefined) return Buffer.alloc(0);
    const file = path.join(this.sessionDir(id), name);
    if (!take) return fsp.readFile(file);
    const fd = fs.openSync(file, 'r');
    try {
      const bytes = take(fs.fstatSync(fd).size);
      for (let at = 0; at < bytes.length; ) {
        const n = fs.readSync(fd, bytes, at, bytes.length - at, at);
        if (n === 0) throw new Error(`staged tail of ${id} ended at ${at} of ${bytes.length} bytes`);
        at += n;
      }
      return bytes;
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Removes one staged file of the session (absent is fine). */
  async removeFile(id: string, name: string): Promise<void> {
    await fsp.rm(path.join(this.sessionDir(id), name), { force: true });
  }

  /** Removes the session's files other than `keep` (only while no part of the session runs). */
  async prune(id: string, keep: string | undefined): Promise<void> {
    const dir = this.sessionDir(id);
    let names: string[];
    try {
      names = await fsp.readdir(dir);
    } catch {
      return;
    }
    await Promise.all(names.filter((n) => n !== keep).map((n) => fsp.rm(path.join(dir, n), { force: true })));
  }

  async remove(id: string): Promise<void> {
    await fsp.rm(this.sessionDir(id), { recursive: true, force: true });
  }

  /** Sessions that have staged files. */
  async sessions(): Promise<string[]> {
    return fsp.readdir(this.dir).catch(() => []);
  }
}
