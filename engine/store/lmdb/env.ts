import fs from 'node:fs';
import path from 'node:path';
import { type Database, type Key, open, type RootDatabase } from 'lmdb';
import type { Durability } from '../../base/config.js';

/** A small commit waiting for the group it joins (CatalogEnv.grouped). */
interface Grouped {
  write: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/**
 * The LMDB environment under `<root>/catalog`. This module opens it and hands each named
 * database to the one module that owns it; nobody else opens databases.
 */
export class CatalogEnv {
  readonly root: RootDatabase;
  /** Asynchronous commits of the catalog's and the units' not yet committed. */
  private asyncInFlight = 0;
  /** The small commits asked for in this turn of the event loop (CatalogEnv.grouped), committed together at its end. */
  private group: Grouped[] | undefined;

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
   * Whether a small commit (a catalog publication of a few blocks, a unit of a few writes) runs on
   * this thread in a synchronous transaction (`grouped`). lmdb-js's asynchronous commits batch
   * concurrent writes on its own thread, but a lone one waits for that thread twice (its
   * transaction begun, then committed); without fsync (relaxed) a synchronous commit takes
   * microseconds. Not while an asynchronous commit is in flight: it would wait for that one's
   * write lock. One policy for the whole environment: the blob catalog's publications and the
   * units store's commits share its one writer.
   */
  commitsAtOnce(small: boolean): boolean {
    return this.relaxed && small && this.asyncInFlight === 0;
  }

  /**
   * Runs `write` in a synchronous write transaction at the end of this turn of the event loop
   * (setImmediate), together with every other small commit asked for in the same turn: each in a
   * child transaction of its own (one that throws is undone alone and rejects its own promise),
   * the group committed once. Under load the requests answered in one turn share one commit
   * (LMDB writes the shared pages and the meta page once); a lone commit waits one turn, no
   * thread. The caller asks `commitsAtOnce` first.
   */
  grouped<T>(write: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.group === undefined) {
        this.group = [];
        setImmediate(() => this.commitGroup());
      }
      this.group.push({ write, resolve: resolve as (value: unknown) => void, reject });
    });
  }

  private commitGroup(): void {
    const group = this.group!;
    this.group = undefined;
    const outcomes: Array<{ value?: unknown; err?: unknown; failed: boolean }> = [];
    const settle = () => group.forEach((member, i) => (outcomes[i]!.failed ? member.reject(outcomes[i]!.err) : member.resolve(outcomes[i]!.value)));
    const failAll = (err: unknown) => {
      for (const member of group) member.reject(err);
    };
    const writeAll = () => {
      outcomes.length = 0;
      // Inside a write transaction, lmdb-js's transactionSync is a child transaction: one member that throws is undone alone.
      for (const member of group) {
        try {
          outcomes.push({ value: group.length === 1 ? member.write() : this.root.transactionSync(member.write), failed: false });
        } catch (err) {
          if (group.length === 1) throw err;
          outcomes.push({ err, failed: true });
        }
      }
    };
    // An asynchronous commit that began after the members asked holds the write lock: join its
    // batch rather than wait for it on this thread.
    if (this.asyncInFlight > 0) {
      this.commit(writeAll, false).then(settle, failAll);
      return;
    }
    try {
      this.root.transactionSync(writeAll);
    } catch (err) {
      failAll(err);
      return;
    }
    settle();
  }

  /**
   * Commits `write` (a synchronous step inside a write transaction): grouped on this thread when
   * `small` and commitsAtOnce allows it, else in lmdb-js's batched asynchronous transaction. The
   * one policy the catalog's publications and the units store's commits share.
   */
  commit<T>(write: () => T, small: boolean): Promise<T> {
    return this.commitsAtOnce(small) ? this.grouped(write) : this.batched(() => this.root.transaction(write));
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
