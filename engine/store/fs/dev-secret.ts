import fs from 'node:fs';
import path from 'node:path';
import type { DevSecretStore } from '../dev-secret.js';
import { syncDirectory } from './sync-directory.js';

/**
 * The development secret in the data directory (`<SVC_FS_ROOT>/secrets/dev-shared-secret`, mode
 * 0600), one node's (fs, s3). Made whole under another name and linked into place, so a crash
 * leaves the file complete or absent, and a second writer's link fails instead of replacing it.
 */
export class FileDevSecretStore implements DevSecretStore {
  readonly location: string;

  constructor(fsRoot: string) {
    this.location = path.join(fsRoot, 'secrets', 'dev-shared-secret');
  }

  async keep(candidate: string): Promise<{ secret: string; created: boolean }> {
    const kept = this.read();
    if (kept !== undefined) return { secret: kept, created: false };
    const dir = path.dirname(this.location);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const temp = `${this.location}.${process.pid}.tmp`;
    const fd = fs.openSync(temp, 'w', 0o600);
    try {
      fs.writeSync(fd, `${candidate}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    try {
      fs.linkSync(temp, this.location);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      return { secret: this.read()!, created: false };
    } finally {
      fs.rmSync(temp, { force: true });
    }
    syncDirectory(dir);
    return { secret: candidate, created: true };
  }

  private read(): string | undefined {
    try {
      return fs.readFileSync(this.location, 'utf8').trim();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }
}
