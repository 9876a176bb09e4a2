// The fallback of a lookup in a legacy repository: an index of one tree (`metadata/` or
// `binaries/`) from a key (a document id, a binary hash) to the file's path. Built lazily, once
// per tree, at the first lookup that needs it: concurrent first lookups share the one build. The
// walk is bounded (depth, entries); directories reached through links are not entered; an
// unreadable directory is skipped and logged. The index is a snapshot: files put in odd places
// after it was built are found after a restart (the documented paths are always tried first).

import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../base/log.js';

/** Directories below the tree's top that are walked. */
export const INDEX_MAX_DEPTH = 8;
/** Entries kept per tree (a bound on the index's memory); the walk stops there and says so in the log. */
export const INDEX_MAX_ENTRIES = 1_000_000;

export interface TreeIndexOptions {
  /** The tree's top (resolved). */
  top: string;
  /** The key of a file's name, or undefined when the file is not indexed. */
  keyOf: (name: string) => string | undefined;
  log: Logger;
  /** Told once per build: entries and seconds. */
  onBuilt: (entries: number, seconds: number, truncated: boolean) => void;
  label: string;
  maxDepth?: number;
  maxEntries?: number;
}

export class TreeIndex {
  private built?: Promise<Map<string, string>>;
  private sorted?: Promise<string[]>;

  constructor(private readonly options: TreeIndexOptions) {}

  /** The path of `key`'s file (absolute), or undefined. The first call builds the index. */
  async lookup(key: string): Promise<string | undefined> {
    this.built ??= this.build();
    const relative = (await this.built).get(key);
    return relative === undefined ? undefined : path.join(this.options.top, relative);
  }

  /** Every key of the index in code-unit order (built once, like the index). */
  keys(): Promise<string[]> {
    this.built ??= this.build();
    this.sorted ??= this.built.then((index) => [...index.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    return this.sorted;
  }

  /** Breadth first, names sorted: for a key found twice the shallower, then the first in name order, wins. */
  private async build(): Promise<Map<string, string>> {
    const { top, keyOf, log, label } = this.options;
    const maxDepth = this.options.maxDepth ?? INDEX_MAX_DEPTH;
    const maxEntries = this.options.maxEntries ?? INDEX_MAX_ENTRIES;
    const started = performance.now();
    const index = new Map<string, string>();
    let level: string[] = [''];
    let truncated = false;
    for (let depth = 0; depth <= maxDepth && level.length > 0 && !truncated; depth++) {
      const next: string[] = [];
      for (const dir of level) {
        let entries: fs.Dirent[];
        try {
          entries = await fs.promises.readdir(path.join(top, dir), { withFileTypes: true });
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (!(depth === 0 && code === 'ENOENT')) log.warn('legacy index: a directory is skipped', { index: label, dir, err: code ?? String(err) });
          continue;
        }
        entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        for (const e of entries) {
          const relative = dir === '' ? e.name : `${dir}/${e.name}`;
          if (e.isDirectory()) {
            if (depth < maxDepth) next.push(relative);
            continue;
          }
          // Files and links to files (a link is checked against the root when it is opened).
          if (!e.isFile() && !e.isSymbolicLink()) continue;
          const key = keyOf(e.name);
          if (key === undefined || index.has(key)) continue;
          if (index.size >= maxEntries) {
            truncated = true;
            break;
          }
          index.set(key, relative);
        }
        if (truncated) break;
      }
      level = next;
    }
    const seconds = (performance.now() - started) / 1000;
    if (truncated) log.warn('legacy index: entry limit reached, the rest of the tree is not indexed', { index: label, entries: index.size });
    log.info('legacy index built', { index: label, entries: index.size, seconds: Number(seconds.toFixed(3)) });
    this.options.onBuilt(index.size, seconds, truncated);
    return index;
  }
}
