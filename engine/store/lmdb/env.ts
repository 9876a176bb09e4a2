import fs from 'node:fs';
import path from 'node:path';
import { type Database, type Key, open, type RootDatabase } from 'lmdb';
import type { Durability } from '../../base/config.js';

/** Small commits further apart than this are sparse: one then commits synchronously (relaxed only). */
const SPARSE_COMMIT_MS = 0.1;

/**
 * The LMDB environment under `<root>/catalog`. This module opens it and hands each named
 * database to the one module that owns it; nobody else opens databases.
 */
export class CatalogEnv {
  readonly root: RootDatabase;
  /** Asynchronous commits of the catalog's and the units' not yet committed, and when the last small commit was asked for. */
  private asyncInFlight = 0;
  private lastSmallCommitAt = 0;

  private constructor(
    root: RootDatabase,
    /** Commits are not fsync'd (SVC_DURABILITY=relaxed): a synchronous transaction waits for no disk. */
    readonly relaxed: boolean,
  ) {
    this.root = root;
  }

  static open(fsRoot: string, durability: Durability): CatalogEnv {
    const dir = path.join(fsRoot, 'catalog');
    fs.mkdirSync(dir, { recursive: true });
    const root = open({
      path: dir,
      noSubdir: false,
      // relaxed: commits are not fsync'd; the OS page cache is trusted.
      noSync: durability === 'relaxed',
      mapSize: 2 ** 34,
      // Each module owns its named databases; lmdb-js's default of 12 is too few.
      maxDbs: 128,
      encoding: 'msgpack',
      useVersions: false,
    });
    return new CatalogEnv(root, durability === 'relaxed');
  }

  /**
   * Whether a small commit (a catalog publication of a few blocks, a unit of a few writes) runs
   * synchronously on this thread now. lmdb-js's asynchronous commits batch concurrent writes on
   * its own thread, but a lone one waits for that thread twice (its transaction begun, then
   * committed); without fsync (relaxed) a synchronous commit takes microseconds. So a small
   * commit runs at once when small commits are sparse and no asynchronous one is in flight (it
   * would wait for that one's write lock), and joins the batch otherwise (committing every one
   * synchronously loses the batching under load). One policy for the whole environment: the
   * blob catalog's publications and the units store's commits share its one writer.
   */
  commitsAtOnce(small: boolean): boolean {
    if (!this.relaxed || !small) return false;
    const now = performance.now();
    const sparse = now - this.lastSmallCommitAt > SPARSE_COMMIT_MS;
    this.lastSmallCommitAt = now;
    return this.asyncInFlight === 0 && sparse;
  }

  /** An asynchronous commit, counted while in flight (commitsAtOnce). */
  async batched<T>(commit: () => Promise<T>): Promise<T> {
    this.asyncInFlight++;
    try {
      return await commit();
    } finally {
      this.asyncInFlight--;
    }
  }

  database<V = unknown, K extends Key = Key>(
    name: string,
    options: { keyEncoding?: 'uint32' | 'binary' | 'ordered-binary'; encoding?: 'msgpack' | 'binary' | 'string'; useRecords?: boolean } = {},
  ): Database<V, K> {
    return this.root.openDB<V, K>({ name, ...options });
  }

  /** A cheap read and write round trip for readiness checks. */
  async probe(): Promise<void> {
    const health = this.database<number, string>('health');
    await health.put('probe', Date.now());
    if (typeof health.get('probe') !== 'number') throw new Error('catalog probe read back nothing');
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}
