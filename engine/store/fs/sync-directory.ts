import fs from 'node:fs';

/** fsync of a directory: a rename or create in it survives a crash once this returns. */
export function syncDirectory(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
