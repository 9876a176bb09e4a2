// The block store's staging area for resumable uploads: per session, the tail of its object
// (the bytes after the last block cut, at most one maximal block) as one file per acknowledged
// part, written whole, fsync'd (strict) and renamed into place before the part is acknowledged.

import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Durability } from '../config.js';
import { syncDirectory } from '../store/fs-block-store.js';

export class Staging {
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

  async write(id: string, name: string, bytes: Uint8Array): Promise<void> {
    const dir = this.sessionDir(id);
    const final = path.join(dir, name);
    const tmp = `${final}.tmp`;
    if (this.durability === 'relaxed') {
      // Nothing to wait for (no fsync): two calls on this thread cost less than the pool's round trips.
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(tmp, bytes);
      fs.renameSync(tmp, final);
      return;
    }
    await fsp.mkdir(dir, { recursive: true });
    const handle = await fsp.open(tmp, 'w');
    try {
      await handle.writeFile(bytes);
      if (this.durability === 'strict') await handle.sync();
    } finally {
      await handle.close();
    }
    await fsp.rename(tmp, final);
    if (this.durability === 'strict') syncDirectory(dir);
  }

  async read(id: string, name: string | undefined): Promise<Buffer> {
    if (name === undefined) return Buffer.alloc(0);
    return fsp.readFile(path.join(this.sessionDir(id), name));
  }

  /** The tail, read on the calling thread (at most one maximal block, when a part starts). */
  readSync(id: string, name: string | undefined): Buffer {
    if (name === undefined) return Buffer.alloc(0);
    return fs.readFileSync(path.join(this.sessionDir(id), name));
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
