// The resume state of `svc put`: which session a file is going to and which part was last in
// flight, in a small JSON file, so that a killed client picks up the same session.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface PartRef {
  /** The Upload-Part-Id: sent again, unchanged, while the part may have been applied. */
  id: string;
  offset: number;
  length: number;
}

export interface PutState {
  version: 1;
  file: string;
  size: number;
  mtimeMs: number;
  server: string;
  contentType?: string;
  sessionId: string;
  /** The part sent last and not known to be acknowledged. */
  part?: PartRef;
}

/** `$XDG_CACHE_HOME/svc/uploads/<sha-256 of path, size, mtime>.json` (else under ~/.cache). */
export function defaultStatePath(file: string, size: number, mtimeMs: number): string {
  const cache = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  const key = createHash('sha256').update(`${file}\0${size}\0${mtimeMs}`).digest('hex');
  return path.join(cache, 'svc', 'uploads', `${key}.json`);
}

export function loadState(file: string): PutState | undefined {
  try {
    const state = JSON.parse(fs.readFileSync(file, 'utf8'));
    return state && state.version === 1 && typeof state.sessionId === 'string' ? (state as PutState) : undefined;
  } catch {
    return undefined;
  }
}

/** Written to a temporary name and renamed: a kill never leaves half a file. */
export function saveState(file: string, state: PutState): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temp, `${JSON.stringify(state, null, 2)}\n`);
  fs.renameSync(temp, file);
}

export function removeState(file: string): void {
  fs.rmSync(file, { force: true });
}
