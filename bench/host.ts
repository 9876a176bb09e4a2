// Facts about the host the scenarios need: file-system types, where temp data goes, free ports.

import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** The file-system type of `dir` by its statfs magic number. */
export function fsTypeName(dir: string): string {
  try {
    const type = fs.statfsSync(dir).type;
    const names: Record<number, string> = { 0xef53: 'ext2/3/4', 0x01021994: 'tmpfs', 0x58465342: 'xfs', 0x9123683e: 'btrfs', 0x794c7630: 'overlayfs' };
    return names[type] ?? `0x${type.toString(16)}`;
  } catch {
    return 'unknown';
  }
}

/**
 * The file-system type of `dir` for reports; ext4 says whether it has a journal (an ext4 device
 * is listed in /proc/fs/ext4, its journal in /proc/fs/jbd2 as `<device>-8`). Without one, ext4
 * skips every inode freed in the last 60-300 s when it makes a file, so each new file costs
 * more after many were deleted (docs/performance.md, issue 2).
 */
export function fsDescription(dir: string): string {
  const type = fsTypeName(dir);
  if (type !== 'ext2/3/4') return type;
  try {
    const dev = fs.statSync(dir).dev;
    const major = (dev >> 8) & 0xfff;
    const minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
    const device = path.basename(fs.realpathSync(`/sys/dev/block/${major}:${minor}`));
    if (!fs.existsSync(`/proc/fs/ext4/${device}`)) return type;
    return fs.existsSync(`/proc/fs/jbd2/${device}-8`) ? 'ext4 with a journal' : 'ext4 without a journal';
  } catch {
    return type;
  }
}

/** A temp parent on the repository's disk: os.tmpdir() when it is there (and not tmpfs), else the repository's parent. */
export function tmpParentFor(repo: string): string {
  const tmp = os.tmpdir();
  try {
    if (fs.statSync(tmp).dev === fs.statSync(repo).dev && fsTypeName(tmp) !== 'tmpfs') return tmp;
  } catch {
    // fall through
  }
  return path.dirname(repo);
}

/** A port nobody listens on right now (the kernel's pick for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
