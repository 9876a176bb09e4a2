import fs from 'node:fs';
import { SvcError } from '../base/errors.js';
import { formatBytes } from '../base/bytes.js';
import type { FreeSpaceFloor } from '../base/config.js';

/** SVC_MIN_FREE_SPACE: a number of bytes, or a share of the file system. */
export type { FreeSpaceFloor };

interface DiskSpaceReading {
  freeBytes: number;
  totalBytes: number;
  /** The floor in bytes (a percentage is taken of `totalBytes`). */
  floorBytes: number;
  belowFloor: boolean;
}

/** The floor in bytes on a file system of `totalBytes`. */
export function floorInBytes(floor: FreeSpaceFloor, totalBytes: number): number {
  return 'bytes' in floor ? floor.bytes : Math.ceil((totalBytes * floor.percent) / 100);
}

type StatFs = (dir: string) => { blocks: number; bavail: number; bsize: number };

/** A reading is reused this long: uploads ask on every request, the figure moves slowly. */
const FRESH_MS = 500;

/**
 * Free space of the data directory's file system against SVC_MIN_FREE_SPACE. Below the floor no
 * upload starts (507 insufficient_storage, before any byte is read); reads go on.
 */
export class DiskSpace {
  private last?: { at: number; reading: DiskSpaceReading };

  constructor(
    private readonly root: string,
    private readonly floor: FreeSpaceFloor,
    private readonly statfs: StatFs = (dir) => fs.statfsSync(dir),
  ) {}

  /** The current figures; throws when the file system cannot be read. */
  read(): DiskSpaceReading {
    const now = Date.now();
    if (this.last && now - this.last.at < FRESH_MS) return this.last.reading;
    const s = this.statfs(this.root);
    const totalBytes = s.blocks * s.bsize;
    const freeBytes = s.bavail * s.bsize;
    const floorBytes = floorInBytes(this.floor, totalBytes);
    const reading = { freeBytes, totalBytes, floorBytes, belowFloor: freeBytes < floorBytes };
    this.last = { at: now, reading };
    return reading;
  }

  /** Why uploads are refused, or undefined while free space is above the floor (or unreadable: the write then says). */
  shortage(): string | undefined {
    let r: DiskSpaceReading;
    try {
      r = this.read();
    } catch {
      return undefined;
    }
    if (!r.belowFloor) return undefined;
    return `${formatBytes(r.freeBytes)} free, below SVC_MIN_FREE_SPACE (${formatBytes(r.floorBytes)})`;
  }

  /** Throws 507 insufficient_storage while free space is below the floor. */
  assertRoom(): void {
    const shortage = this.shortage();
    if (shortage) throw new SvcError('insufficient_storage', 'insufficient_storage', `The data directory is nearly full (${shortage}): uploads are refused until space is freed`);
  }
}
