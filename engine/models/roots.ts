// Where file:// bundles may be read from (SVC_MODEL_ROOTS). A path is judged by its name first:
// a name outside every root is refused without touching the file system (no stat, no realpath,
// no open), so a FIFO, a device or a huge directory outside costs nothing and no answer says
// whether it exists. A name inside a root is then resolved, links followed, and the real path
// must still be inside a root (a link in a root that points out of it is refused the same way).
// The real path is what gets read.
// s3:// and gs:// bundles are judged by name alone, before any request to the store: the bucket
// and key must lie under an object root (SVC_MODEL_ROOTS' s3://, gs:// entries), and an s3://
// one never in the blob store's own bucket under its prefix (SVC_S3_BUCKET, SVC_S3_PREFIX),
// whatever the roots say: a model.write token must not make the server read its own blocks.

import fs from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type ModelConfig } from '../base/config.js';
import type { ObjectRoot } from '../base/model-roots.js';
import { type ModelFailure, bundleError, forbiddenLocation } from './errors.js';

export class BundleRoots {
  private constructor(
    /** Each root as configured and as resolved (links followed); null: any local path. */
    private readonly names: readonly string[] | null,
    private readonly real: readonly string[] | null,
    /** The bucket folders object bundles may be read from; null: any. */
    private readonly objectRoots: readonly ObjectRoot[] | null,
    private readonly storeLocation: ModelConfig['storeLocation'],
  ) {}

  /**
   * The roots of `config`, each resolved: it must be an existing directory (ConfigError
   * otherwise); the default root (<SVC_FS_ROOT>/models) is made when missing.
   */
  static check(config: Pick<ModelConfig, 'roots' | 'defaultRoots' | 'objectRoots' | 'storeLocation'>): BundleRoots {
    if (config.roots === null) return new BundleRoots(null, null, config.objectRoots, config.storeLocation);
    const real = config.roots.map((root) => {
      if (config.defaultRoots) fs.mkdirSync(root, { recursive: true });
      let resolved: string;
      try {
        resolved = fs.realpathSync(root);
      } catch (err) {
        throw new ConfigError(`SVC_MODEL_ROOTS: ${root} cannot be resolved (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      }
      if (!fs.statSync(resolved).isDirectory()) throw new ConfigError(`SVC_MODEL_ROOTS: ${root} is not a directory`);
      return resolved;
    });
    return new BundleRoots([...new Set([...config.roots, ...real])], real, config.objectRoots, config.storeLocation);
  }

  /** Whether some bundle URI is refused by where it points (a registration may then be refused at start). */
  get restricted(): boolean {
    return this.real !== null || this.objectRoots !== null || this.storeLocation !== null;
  }

  /**
   * Refuses (403 ForbiddenLocation) an s3:// or gs:// bundle outside the object roots, or in the
   * blob store's own bucket and prefix; `key` is the object key as the store will read it
   * (decoded). Nothing is asked of the store: the answer is the same whether the object exists.
   */
  checkObject(scheme: 's3' | 'gs', bucket: string, key: string, uri: string): void {
    const own = this.storeLocation;
    if (scheme === 's3' && own && bucket === own.bucket && key.startsWith(own.prefix)) throw forbiddenObject(uri, scheme);
    if (this.objectRoots && !this.objectRoots.some((root) => root.scheme === scheme && root.bucket === bucket && key.startsWith(root.prefix))) throw forbiddenObject(uri, scheme);
  }

  /**
   * The real path of the bundle (a regular file or a directory) that the absolute path `file`
   * names: 403 ForbiddenLocation outside the roots, 400 BundleException when it does not exist
   * or is something else (a FIFO, a device: opening one could block forever).
   */
  async locate(file: string, uri: string): Promise<string> {
    const named = path.resolve(file);
    if (this.names && !this.names.some((root) => isInside(root, named))) throw forbiddenFile(uri);
    let real: string;
    try {
      real = await realpath(named);
    } catch (err) {
      throw unreadable(uri, named, err);
    }
    if (this.real && !this.real.some((root) => isInside(root, real))) throw forbiddenFile(uri);
    const info = await stat(real).catch((err: unknown) => {
      throw unreadable(uri, named, err);
    });
    if (!info.isFile() && !info.isDirectory()) throw bundleError(`bundle ${uri} is neither a file nor a directory`);
    return real;
  }
}

/** Whether `file` is `root` or lies below it (both absolute and normalized). */
function isInside(root: string, file: string): boolean {
  const rel = path.relative(root, file);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

function forbiddenFile(uri: string): ModelFailure {
  return forbiddenLocation(`bundle ${uri} is outside the directories bundles may be read from (SVC_MODEL_ROOTS)`);
}

/** The same answer for a bucket no root names and for the blob store's own: nothing tells the store's bucket apart. */
function forbiddenObject(uri: string, scheme: 's3' | 'gs'): ModelFailure {
  return forbiddenLocation(`bundle ${uri} is outside the ${scheme}:// prefixes bundles may be read from (SVC_MODEL_ROOTS)`);
}

function unreadable(uri: string, file: string, err: unknown): ModelFailure {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return bundleError(`file does not exist: ${file} (${uri})`);
  return bundleError(`bundle ${uri} cannot be read (${code ?? 'unknown error'})`);
}
