import fs from 'node:fs';
import fsp, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import type { Durability } from '../../base/config.js';
import type { BlockStoreLocation, EmbeddedBlockStore, ListedBlock, PutOutcome, RestoreOutcome } from '../block-store.js';
import { syncDirectory } from './sync-directory.js';

/** Blocks are spread over 4096 directories named by the first three hex digits of their digest. */
const PARTITION_DIGITS = 3;
const PARTITION = /^[0-9a-f]{3}$/;
const BLOCK_NAME = /^([0-9a-f]{64})-([0-9]{1,10})$/;

/**
 * Block bytes as files: `<root>/blocks/<h[0:3]>/<hex>-<size>`, written as a temp file in
 * `<root>/blocks/.tmp/w<thread>` (one directory per writing thread: creating files in one shared
 * directory serialised the workers on its lock), fsync'd (strict), renamed into place, then the
 * directory fsync'd (strict).
 * A file under its final name is always complete. The write side runs in worker threads (sync
 * calls, blocking only that worker); the read side runs on the main thread.
 */
export class FsBlockStore implements EmbeddedBlockStore {
  readonly location: BlockStoreLocation;
  private readonly blocksDir: string;
  /** Writes in progress, ingest spills and readiness probes. */
  readonly scratchDir: string;
  /** Garbage collection's restorable area: `<root>/blocks/.quarantine/<h[0:3]>/<hex>-<size>`. */
  readonly quarantineDir: string;
  /** Partition directories known to exist (each is made on its first block). */
  private readonly knownDirs = new Set<string>();
  /** This thread's directory of writes in progress, made on its first write. */
  private writeDir?: string;
  private tempCounter = 0;
  readonly readAhead = 1;

  constructor(
    root: string,
    readonly durability: Durability,
  ) {
    this.location = { kind: 'fs', root, durability };
    this.blocksDir = path.join(root, 'blocks');
    this.scratchDir = path.join(this.blocksDir, '.tmp');
    this.quarantineDir = path.join(this.blocksDir, '.quarantine');
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

  private blockPath(hex: string, size: number): string {
    return path.join(this.blocksDir, hex.slice(0, PARTITION_DIGITS), `${hex}-${size}`);
  }

  private quarantinePath(hex: string, size: number): string {
    return path.join(this.quarantineDir, hex.slice(0, PARTITION_DIGITS), `${hex}-${size}`);
  }

  /**
   * Stores a block unless an intact copy exists: 'present' when one was there, 'written' when
   * this call wrote the bytes. A block garbage collection quarantined is moved back instead
   * ('restored', no bytes written); its receipt is settled when a manifest referencing it is
   * published (engine/gc).
   */
  put(hex: string, size: number, pieces: readonly Uint8Array[], alwaysWrite = false): PutOutcome {
    const final = this.blockPath(hex, size);
    const existing = fs.statSync(final, { throwIfNoEntry: false });
    const present = existing !== undefined && existing.size === size;
    if (present && !alwaysWrite) return 'present';
    if (!present && this.restoreSync(hex, size, true) !== 'missing') return 'restored';
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
    try {
      fs.renameSync(tmp, final);
    } catch (err) {
      fs.rmSync(tmp, { force: true });
      throw err;
    }
    if (this.durability === 'strict') syncDirectory(dir);
    // Written over an intact copy (alwaysWrite): the same bytes, not this store's to reclaim.
    return present ? 'present' : 'written';
  }

  /**
   * Moves a quarantined block back under its final name ('restored'); 'live' when the final
   * file is already there (the quarantined copy is left to GC), 'missing' when neither is.
   * The restored file's mtime is set to now: it was just needed, so it is young again.
   */
  restoreSync(hex: string, size: number, liveChecked = false): RestoreOutcome {
    const final = this.blockPath(hex, size);
    if (!liveChecked) {
      const live = fs.statSync(final, { throwIfNoEntry: false });
      if (live && live.size === size) return 'live';
    }
    const quarantined = this.quarantinePath(hex, size);
    const copy = fs.statSync(quarantined, { throwIfNoEntry: false });
    if (!copy || copy.size !== size) return 'missing';
    const dir = path.dirname(final);
    if (!this.knownDirs.has(dir)) {
      fs.mkdirSync(dir, { recursive: true });
      this.knownDirs.add(dir);
    }
    try {
      fs.renameSync(quarantined, final);
    } catch (err) {
      // Purged (or restored by another thread) meanwhile.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      const again = fs.statSync(final, { throwIfNoEntry: false });
      return again && again.size === size ? 'live' : 'missing';
    }
    const now = new Date();
    fs.utimesSync(final, now, now);
    if (this.durability === 'strict') syncDirectory(dir);
    return 'restored';
  }

  /**
   * Moves a block file into quarantine (GC). False when the block file is not there. The
   * directories are not fsync'd: after a crash the file is in either place, and GC settles both.
   */
  quarantineSync(hex: string, size: number): boolean {
    const target = this.quarantinePath(hex, size);
    try {
      fs.renameSync(this.blockPath(hex, size), target);
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') throw err;
      if (!fs.existsSync(this.blockPath(hex, size))) return false;
      // The quarantine partition did not exist yet.
      fs.mkdirSync(path.dirname(target), { recursive: true });
      try {
        fs.renameSync(this.blockPath(hex, size), target);
        return true;
      } catch (again) {
        if ((again as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw again;
      }
    }
  }

  /** Deletes a quarantined copy (GC purge). False when it was not there. */
  purgeSync(hex: string, size: number): boolean {
    try {
      fs.unlinkSync(this.quarantinePath(hex, size));
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  /** Size of the live block file, or undefined when there is none. */
  liveSize(hex: string, size: number): number | undefined {
    return fs.statSync(this.blockPath(hex, size), { throwIfNoEntry: false })?.size;
  }

  async lastWrittenMs(hex: string, size: number): Promise<number | undefined> {
    return (await fsp.stat(this.blockPath(hex, size)).catch(() => undefined))?.mtimeMs;
  }

  async listPartitions(): Promise<string[]> {
    return (await readdirOrNothing(this.blocksDir)).filter((n) => PARTITION.test(n)).sort();
  }

  async listPartition(partition: string): Promise<ListedBlock[]> {
    const blocks: ListedBlock[] = [];
    for (const name of await readdirOrNothing(path.join(this.blocksDir, partition))) {
      const m = BLOCK_NAME.exec(name);
      if (m) blocks.push({ hex: m[1], size: Number(m[2]) });
    }
    return blocks;
  }

  async probe(): Promise<void> {
    await fsp.access(this.scratchDir, fs.constants.W_OK);
  }

  /** Not recursive: a block store whose directories are gone must fail writes, not recreate them. */
  private makeWriteDir(): string {
    const dir = path.join(this.scratchDir, `w${threadId}`);
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
    if (size <= 65536) return this.readWhole(hex, size);
    let handle: FileHandle;
    try {
      handle = await fsp.open(this.blockPath(hex, size), 'r');
    } catch (err) {
      // A block GC moved to quarantine while something still needed it is read from there.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      handle = await fsp.open(this.quarantinePath(hex, size), 'r').catch(() => Promise.reject(err));
    }
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

  /** Reads a whole block on the calling thread (workers); a quarantined block is read from quarantine. */
  readWhole(hex: string, size: number): Buffer {
    try {
      return readExactSync(this.blockPath(hex, size), size);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      try {
        return readExactSync(this.quarantinePath(hex, size), size);
      } catch {
        throw err;
      }
    }
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

/** A directory's names; none when it does not exist (yet). */
async function readdirOrNothing(dir: string): Promise<string[]> {
  try {
    return await fsp.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}
