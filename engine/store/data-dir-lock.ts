// One process at a time owns a data directory: it holds an exclusive advisory lock on
// <root>/svc.lock for its whole life (on Linux an open-file-description fcntl lock, flock on macOS;
// taken through fs-native-extensions, which ships prebuilt binaries). The lock belongs to the open
// file, so the kernel drops it when the process dies, kill -9 included, and nothing is ever left
// stuck; the file itself stays (removing it would let two processes lock two different files).
// The holder writes its pid into the file, so a process that finds the lock taken can name it.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** The data directory cannot be locked: start-up stops with this message. */
export class DataDirLockError extends Error {}

/** Another process holds the lock. */
export class DataDirInUse extends DataDirLockError {}

export interface DataDirLock {
  release(): void;
}

const LOCK_FILE = 'svc.lock';

interface FileLocks {
  /** Takes an exclusive lock on the whole file without waiting: false when another holds it. */
  tryLock(fd: number): boolean;
}

export function lockDataDir(root: string): DataDirLock {
  const file = path.join(root, LOCK_FILE);
  const locks = loadFileLocks(root);
  let fd: number;
  try {
    fd = openLockFile(file);
  } catch (err) {
    throw new DataDirLockError(`cannot lock the data directory ${root} (${file}): ${(err as Error).message}`);
  }
  let locked: boolean;
  try {
    locked = locks.tryLock(fd);
  } catch (err) {
    fs.closeSync(fd);
    throw new DataDirLockError(`cannot lock the data directory ${root} (${file}): ${(err as Error).message}`);
  }
  if (!locked) {
    const holder = awaitHolder(fd);
    fs.closeSync(fd);
    throw new DataDirInUse(`the data directory ${root} is in use by ${holder ? `process ${holder}` : 'another process'} (SVC_FS_ROOT): one svc process at a time`);
  }
  // Written before the truncation, so a process that finds the lock taken never reads an empty file.
  const pid = Buffer.from(`${process.pid}\n`);
  fs.writeSync(fd, pid, 0, pid.length, 0);
  fs.ftruncateSync(fd, pid.length);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      // Closing the only descriptor of the open file drops its lock.
      fs.closeSync(fd);
    },
  };
}

function loadFileLocks(root: string): FileLocks {
  try {
    return createRequire(import.meta.url)('fs-native-extensions') as FileLocks;
  } catch (err) {
    throw new DataDirLockError(`cannot lock the data directory ${root}: no file-locking binary for ${process.platform}-${process.arch} (fs-native-extensions: ${(err as Error).message})`);
  }
}

function openLockFile(file: string): number {
  try {
    return fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
  } catch (err) {
    // A Unix socket, which earlier versions of svc held at this path, cannot be opened: it locks nothing now.
    if ((err as NodeJS.ErrnoException).code !== 'ENXIO') throw err;
    fs.rmSync(file);
    return fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
  }
}

/**
 * The holder's pid. A holder that has only just taken the lock may not have written its pid yet
 * (the file still names the previous, dead holder), so a pid that is not alive is read again for up
 * to half a second; undefined when none can be named.
 */
function awaitHolder(fd: number): string | undefined {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let attempt = 0; attempt < 50; attempt++) {
    const holder = readHolder(fd);
    if (holder !== undefined && isAlive(Number(holder))) return holder;
    Atomics.wait(pause, 0, 0, 10);
  }
  return undefined;
}

function readHolder(fd: number): string | undefined {
  try {
    const buffer = Buffer.alloc(32);
    const text = buffer.toString('utf8', 0, fs.readSync(fd, buffer, 0, buffer.length, 0));
    const line = text.split('\n', 1)[0];
    return /^[0-9]+$/.test(line) ? line : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The pid of the process that holds the data directory now, for `svc reload`; undefined when none
 * does. The file's pid is trusted only when that process has the lock file open (on Linux, its
 * /proc/<pid>/fd names the same file), so a stale pid left by a holder that died, and since reused
 * by another program, is never signalled. Elsewhere a live process of that pid is taken as the holder.
 * It never takes the lock itself: that could make a server starting at the same moment fail.
 */
export function dataDirHolder(root: string): number | undefined {
  const file = path.join(root, LOCK_FILE);
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY);
  } catch {
    return undefined;
  }
  let holder: string | undefined;
  let lockFile: fs.Stats;
  try {
    holder = readHolder(fd);
    lockFile = fs.fstatSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  if (holder === undefined || !isAlive(Number(holder))) return undefined;
  if (process.platform !== 'linux') return Number(holder);
  let fds: string[];
  try {
    fds = fs.readdirSync(`/proc/${holder}/fd`);
  } catch {
    return undefined;
  }
  for (const entry of fds) {
    try {
      const open = fs.statSync(`/proc/${holder}/fd/${entry}`);
      if (open.dev === lockFile.dev && open.ino === lockFile.ino) return Number(holder);
    } catch {
      // closed meanwhile
    }
  }
  return undefined;
}
