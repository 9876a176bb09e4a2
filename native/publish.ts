// How the build puts a file into dist/: written under a temporary name beside it, then renamed over
// the old one, never truncated in place. A running svc keeps the inode it mapped (its addons) and
// stays whole; an output that has not changed is not rewritten at all.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';

/** A temporary name beside `target`, unique to this process. */
export function stagingName(target: string): string {
  return `${target}.${process.pid}.tmp`;
}

/** Publishes `staged` (a file beside `target`) as `target`, unless `target` holds the same bytes. */
export function publishStaged(staged: string, target: string): void {
  if (existsSync(target) && readFileSync(target).equals(readFileSync(staged))) rmSync(staged, { force: true });
  else renameSync(staged, target);
}

/** Publishes `bytes` as `target`, unless `target` holds them already. */
export function publishBytes(target: string, bytes: Uint8Array): void {
  const staged = stagingName(target);
  writeFileSync(staged, bytes);
  publishStaged(staged, target);
}
