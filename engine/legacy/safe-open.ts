// Opening a file of a legacy repository so that nothing outside its root is ever read: the path
// is resolved (every link followed) and must stay under the root; the file is opened without
// following a last link and must be a regular file; on Linux the open descriptor's own path is
// checked once more (a directory swapped for a link between the two steps is caught).

import fs from 'node:fs';
import path from 'node:path';
import { legacyLinkEscape, legacyUnreadable } from './errors.js';

export interface OpenedFile {
  handle: fs.promises.FileHandle;
  /** Bytes, from the open descriptor. */
  size: number;
}

/** Nothing there (or a dangling link); `directory`: a directory where the file was looked for. */
export type Absent = 'missing' | 'directory';

const MISSING = new Set(['ENOENT', 'ENOTDIR']);
const PROC_FD = fs.existsSync('/proc/self/fd');

/** Whether `p` is `root` or below it (both resolved). */
export function inside(root: string, p: string): boolean {
  const base = root.endsWith(path.sep) ? root : root + path.sep;
  return p === root || p.startsWith(base);
}

/**
 * Opens `candidate` (a path under `root`, which is resolved) for reading. Missing → 'missing';
 * a directory → 'directory'; a link leaving the root, a file that is not regular (a FIFO, a
 * device) or one that cannot be opened → 409. `what` names the file in messages.
 */
export async function openInside(root: string, candidate: string, what: string): Promise<OpenedFile | Absent> {
  let real: string;
  try {
    real = await fs.promises.realpath(candidate);
  } catch (err) {
    if (MISSING.has((err as NodeJS.ErrnoException).code ?? '')) return 'missing';
    throw legacyUnreadable(what, errnoText(err));
  }
  if (!inside(root, real)) throw legacyLinkEscape(what);
  let st: fs.Stats;
  try {
    st = await fs.promises.stat(real);
  } catch (err) {
    if (MISSING.has((err as NodeJS.ErrnoException).code ?? '')) return 'missing';
    throw legacyUnreadable(what, errnoText(err));
  }
  if (st.isDirectory()) return 'directory';
  if (!st.isFile()) throw legacyUnreadable(what, 'it is not a regular file');
  let handle: fs.promises.FileHandle;
  try {
    // O_NONBLOCK: a FIFO swapped in after the check does not hang the open.
    handle = await fs.promises.open(real, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (MISSING.has(code)) return 'missing';
    if (code === 'ELOOP') throw legacyLinkEscape(what);
    throw legacyUnreadable(what, errnoText(err));
  }
  try {
    const opened = await handle.stat();
    if (!opened.isFile()) throw legacyUnreadable(what, 'it is not a regular file');
    if (PROC_FD) {
      const actual = await fs.promises.readlink(`/proc/self/fd/${handle.fd}`);
      if (!inside(root, actual)) throw legacyLinkEscape(what);
    }
    return { handle, size: opened.size };
  } catch (err) {
    await handle.close().catch(() => {});
    throw err;
  }
}

function errnoText(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'ELOOP') return 'too many levels of links';
  if (code === 'ENAMETOOLONG') return 'its name is too long';
  return code ? `error ${code}` : 'read error';
}
