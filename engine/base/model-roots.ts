// SVC_MODEL_ROOTS: where model bundles may be read from, parsed (engine/base/config.ts reads the
// variable; engine/models/roots.ts applies the roots).
import path from 'node:path';
import { ConfigError } from './config-error.js';

/** An s3:// or gs:// root: a bucket and a key prefix (empty, or a folder ending in "/"). */
export interface ObjectRoot {
  scheme: 's3' | 'gs';
  bucket: string;
  prefix: string;
}

/** S3's rule for bucket names (3 to 63 lowercase letters, digits, dots and hyphens, a letter or digit at each end). */
export const S3_BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** `s3://bucket/folder` → the bucket and the folder as a prefix ending in "/" (so `team` does not also cover `team-b/`). */
function objectRoot(entry: string, at: number): ObjectRoot {
  const m = /^(s3|gs):\/\/([^/]*)(?:\/(.*))?$/i.exec(entry)!;
  const scheme = m[1]!.toLowerCase() as 's3' | 'gs';
  const bucket = m[2]!;
  if (scheme === 's3' ? !S3_BUCKET_NAME.test(bucket) : !/^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/.test(bucket)) {
    throw new ConfigError(`SVC_MODEL_ROOTS: entry ${at} (${entry}) does not name a valid ${scheme} bucket`);
  }
  let prefix: string;
  try {
    prefix = decodeURIComponent(m[3] ?? '');
  } catch {
    throw new ConfigError(`SVC_MODEL_ROOTS: entry ${at} (${entry}) is not valid percent-encoding`);
  }
  if (prefix.split('/').some((s) => s === '.' || s === '..')) throw new ConfigError(`SVC_MODEL_ROOTS: entry ${at} (${entry}) has a . or .. segment`);
  if (prefix !== '' && !prefix.endsWith('/')) prefix += '/';
  return { scheme, bucket, prefix };
}

/**
 * `/a,/b,s3://bucket/folder/` → absolute directories (relative ones resolved from the working
 * directory) and object roots.
 */
export function parseModelRoots(raw: string): { directories: string[]; objects: ObjectRoot[] } {
  const roots: string[] = [];
  const objects: ObjectRoot[] = [];
  if (raw.trim() === '') return { directories: roots, objects };
  const entries = raw.split(',');
  for (const [i, rawEntry] of entries.entries()) {
    const entry = rawEntry.trim();
    if (entry === '') {
      // A trailing comma is tolerated; an empty entry between two others is a typo.
      if (i === entries.length - 1 && i > 0) continue;
      throw new ConfigError(`SVC_MODEL_ROOTS: entry ${i + 1} is empty (expected /dir,/dir2)`);
    }
    if (entry.includes('\0')) throw new ConfigError(`SVC_MODEL_ROOTS: entry ${i + 1} contains NUL`);
    if (/^(s3|gs):\/\//i.test(entry)) objects.push(objectRoot(entry, i + 1));
    else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(entry)) throw new ConfigError(`SVC_MODEL_ROOTS: entry ${i + 1} (${entry}) is a directory, an s3:// or a gs:// prefix`);
    else roots.push(path.resolve(entry));
  }
  return { directories: roots, objects };
}
